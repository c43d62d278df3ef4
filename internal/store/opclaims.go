package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The kinds of operational claim (operational_claims.kind).
const (
	// ClaimState is a subscription's last announced state, "disabled" or
	// "enabled": one webhook_endpoint.disabled or .enabled per change.
	ClaimState = "state"
	// ClaimExhausted is the last webhook_delivery.exhausted, at most one
	// per interval.
	ClaimExhausted = "exhausted"
	// ClaimTokenFailing is the token_failing episode announced, keyed by
	// when it began.
	ClaimTokenFailing = "token_failing"
)

// ClaimOperational claims the operational event of kind about
// subscriptionID, keyed key, at now, and reports whether it won: it wins
// when no claim of the kind is held yet, when the held one has another
// key (a new state, a new episode), or when it is older than interval (0:
// no age frees it). One statement that only one caller can win, so each
// event goes out once whichever worker asks. A claim of state "enabled"
// never wins without an earlier claim: an enabled subscription that was
// never announced disabled has no change to tell.
func (s *EndpointHealth) ClaimOperational(ctx context.Context, subscriptionID uuid.UUID, kind, key string, interval time.Duration) (bool, error) {
	now := s.Now()
	var freed *time.Time
	if interval > 0 {
		at := now.Add(-interval)
		freed = &at
	}
	var won bool
	err := s.pool.QueryRow(ctx, `
		INSERT INTO operational_claims AS c (subscription_id, kind, key, claimed_at)
		SELECT $1, $2, $3, $4 WHERE NOT ($2 = 'state' AND $3 = 'enabled')
		ON CONFLICT (subscription_id, kind) DO UPDATE SET key = excluded.key, claimed_at = excluded.claimed_at
		WHERE c.key <> excluded.key OR c.claimed_at <= $5::timestamptz
		RETURNING true`, subscriptionID, kind, key, now, freed).Scan(&won)
	if errors.Is(err, pgx.ErrNoRows) {
		if kind == ClaimState && key == "enabled" {
			// No row to insert: update a held "disabled" claim instead.
			return s.claimEnabled(ctx, subscriptionID, now)
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claim %s event of %s: %w", kind, subscriptionID, err)
	}
	return won, nil
}

// claimEnabled turns a held "disabled" state claim into "enabled".
func (s *EndpointHealth) claimEnabled(ctx context.Context, subscriptionID uuid.UUID, now time.Time) (bool, error) {
	tag, err := s.pool.Exec(ctx, `
		UPDATE operational_claims SET key = 'enabled', claimed_at = $2
		WHERE subscription_id = $1 AND kind = 'state' AND key = 'disabled'`, subscriptionID, now)
	if err != nil {
		return false, fmt.Errorf("claim enabled event of %s: %w", subscriptionID, err)
	}
	return tag.RowsAffected() == 1, nil
}
