package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// LeaseManualAttempt takes one of the merchant's deliveries, whatever its
// status, for a manual attempt (redeliver) until now+leaseFor. The attempt
// it runs is number AttemptCount+1 of the returned delivery. It returns
// ErrNotFound when the merchant has no such delivery (or it is past
// retention), and ErrConflict when an attempt of it is running right now:
// the same lease as scheduled attempts, so that two attempts of one
// delivery never run at once and one number is never used twice.
func (s *Store) LeaseManualAttempt(ctx context.Context, merchantID string, id uuid.UUID, now time.Time, leaseFor time.Duration) (LeasedDelivery, error) {
	var l LeasedDelivery
	d := &l.Delivery
	createdAt := uuidTime(id)
	err := s.pool.QueryRow(ctx, `
		UPDATE deliveries d SET lease_until = $5
		FROM subscriptions s, events e
		WHERE d.id = $1 AND d.created_at >= $2 AND d.created_at < $3 AND d.merchant_id = $4
		  AND d.created_at >= $7
		  AND (d.lease_until IS NULL OR d.lease_until < $6)
		  AND s.id = d.subscription_id
		  AND e.id = d.event_id AND e.created_at = d.event_created_at
		RETURNING d.id, d.merchant_id, d.event_id, d.event_created_at, d.event_type, d.subscription_id,
			d.status, d.test, d.attempt_count, d.next_attempt_at, d.created_at, d.updated_at,
			s.url, s.status, s.deleted_at IS NOT NULL, e.body, d.lease_until, s.updated_at`,
		id, createdAt, createdAt.Add(time.Millisecond), merchantID, now.Add(leaseFor), now, s.retentionStart()).
		Scan(&d.ID, &d.MerchantID, &d.EventID, &d.EventCreatedAt, &d.EventType, &d.SubscriptionID,
			&d.Status, &d.Test, &d.AttemptCount, &d.NextAttemptAt, &d.CreatedAt, &d.UpdatedAt,
			&l.URL, &l.SubscriptionStatus, &l.SubscriptionDeleted, &l.Body, &l.LeaseUntil, &l.SubscriptionVersion)
	if errors.Is(err, pgx.ErrNoRows) {
		// Missing, or leased by a running attempt: tell the two apart.
		if _, gerr := s.GetDelivery(ctx, merchantID, id); gerr != nil {
			return LeasedDelivery{}, fmt.Errorf("lease delivery %s for a manual attempt: %w", id, gerr)
		}
		return LeasedDelivery{}, fmt.Errorf("lease delivery %s for a manual attempt: an attempt is running: %w", id, ErrConflict)
	}
	if err != nil {
		return LeasedDelivery{}, fmt.Errorf("lease delivery %s for a manual attempt: %w", id, err)
	}
	return l, nil
}

// FailedDeliveries lists the merchant's real (non-test) deliveries to one
// subscription that failed for good and were created at or after since
// (at most limit of them, oldest first), for a bulk replay.
func (s *Store) FailedDeliveries(ctx context.Context, merchantID string, subscriptionID uuid.UUID, since time.Time, limit int) ([]Delivery, error) {
	if start := s.retentionStart(); since.Before(start) {
		since = start
	}
	rows, err := s.pool.Query(ctx, `SELECT `+deliveryColumns+` FROM deliveries
		WHERE merchant_id = $1 AND subscription_id = $2 AND status = 'failed' AND NOT test AND created_at >= $3
		ORDER BY created_at, id LIMIT $4`, merchantID, subscriptionID, since, limit)
	if err != nil {
		return nil, fmt.Errorf("failed deliveries of subscription %s: %w", subscriptionID, err)
	}
	ds, err := pgx.CollectRows(rows, scanDelivery)
	if err != nil {
		return nil, fmt.Errorf("failed deliveries of subscription %s: %w", subscriptionID, err)
	}
	return ds, nil
}
