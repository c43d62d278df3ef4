package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// AttemptCounts counts a subscription's attempts over a period.
type AttemptCounts struct {
	// Attempts is every attempt made; Succeeded those the receiver took.
	Attempts, Succeeded int
}

// SubscriptionAttemptsSince counts the attempts of the merchant's
// subscription made at or after since, test deliveries left out (they
// never count towards an endpoint's health). Recording an attempt moves
// its delivery's updated_at to the attempt's instant, so only deliveries
// updated since then can hold one: deliveries_subscription_updated_idx
// finds them, and each one's attempts are read by primary key.
func (s *Store) SubscriptionAttemptsSince(ctx context.Context, merchantID string, subscriptionID uuid.UUID, since time.Time) (AttemptCounts, error) {
	var c AttemptCounts
	err := s.pool.QueryRow(ctx, subscriptionAttemptsSQL, merchantID, subscriptionID, since).Scan(&c.Attempts, &c.Succeeded)
	if err != nil {
		return AttemptCounts{}, fmt.Errorf("attempts of subscription %s since %s: %w", subscriptionID, since, err)
	}
	return c, nil
}

// subscriptionAttemptsSQL is SubscriptionAttemptsSince's statement. The
// attempts are counted per delivery in a LATERAL aggregate, which the
// planner cannot turn into a join: each delivery's attempts are read by
// primary key in its own partition, never a scan of a day's attempts of
// every merchant.
const subscriptionAttemptsSQL = `
	SELECT coalesce(sum(a.n), 0)::int8, coalesce(sum(a.ok), 0)::int8
	FROM deliveries d, LATERAL (
		SELECT count(*) AS n, count(*) FILTER (WHERE status = 'succeeded') AS ok
		FROM attempts
		WHERE delivery_id = d.id AND delivery_created_at = d.created_at AND attempted_at >= $3
	) a
	WHERE d.subscription_id = $2 AND d.merchant_id = $1 AND NOT d.test AND d.updated_at >= $3`
