package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ManualAttempts owns the attempts a merchant asks for (redeliver, recover):
// their requests on the delivery row, the sweeper's list of those still to
// make, their lease, and the failed deliveries a recover replays.
type ManualAttempts struct {
	db
}

// RequestManualAttempts records that one manual attempt (redeliver) of
// each of the merchant's deliveries was asked for at now, before any task
// for it is enqueued: a task lost with Redis is then found again by
// ManualRequestsDue. It returns how many deliveries it found (ErrNotFound
// when none).
func (s *ManualAttempts) RequestManualAttempts(ctx context.Context, merchantID string, ds []Delivery, now time.Time) (int, error) {
	ids := make([]uuid.UUID, len(ds))
	created := make([]time.Time, len(ds))
	for i, d := range ds {
		ids[i], created[i] = d.ID, d.CreatedAt
	}
	tag, err := s.pool.Exec(ctx, `
		UPDATE deliveries d SET manual_requested = manual_requested + 1, manual_requested_at = $4
		FROM unnest($2::uuid[], $3::timestamptz[]) AS r(id, created_at)
		WHERE d.id = r.id AND d.created_at = r.created_at AND d.merchant_id = $1
		  AND NOT EXISTS (SELECT 1 FROM erasures x WHERE x.event_id = d.event_id)`,
		merchantID, ids, created, now)
	if err != nil {
		return 0, fmt.Errorf("request %d manual attempts: %w", len(ds), err)
	}
	if tag.RowsAffected() == 0 && len(ds) > 0 {
		return 0, fmt.Errorf("request manual attempts: %w", ErrNotFound)
	}
	return int(tag.RowsAffected()), nil
}

// ManualRequest is a delivery with manual attempts asked for and not yet
// made.
type ManualRequest struct {
	Delivery
	// Requested is how many are still to be made.
	Requested int
}

// ManualRequestsDue lists deliveries whose manual attempts were asked for
// before before and are still to be made, and that no lease younger than
// before holds, oldest request first, at most limit of them: the sweeper
// enqueues their tasks again in case Redis lost them.
func (s *ManualAttempts) ManualRequestsDue(ctx context.Context, before time.Time, limit int) ([]ManualRequest, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+deliveryColumns+`, manual_requested FROM deliveries
		WHERE manual_requested > 0 AND manual_requested_at < $1 AND (lease_until IS NULL OR lease_until < $1)
		ORDER BY manual_requested_at LIMIT $2`, before, limit)
	if err != nil {
		return nil, fmt.Errorf("list manual requests: %w", err)
	}
	rs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ManualRequest, error) {
		var m ManualRequest
		err := row.Scan(append(deliveryTargets(&m.Delivery), &m.Requested)...)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("list manual requests: %w", err)
	}
	return rs, nil
}

// LeaseManualAttempt takes one of the merchant's deliveries, whatever its
// status, for a manual attempt (redeliver) until now+leaseFor, if a manual
// attempt of it was asked for and not yet made. The attempt it runs is
// number AttemptCount+1 of the returned delivery. It returns ErrNotFound
// when the merchant has no such delivery (or it is past retention) or no
// manual attempt of it is still asked for (a duplicate task), and
// ErrConflict when an attempt of it is running right now: the same lease as
// scheduled attempts, so that two attempts of one delivery never run at
// once and one number is never used twice.
func (s *ManualAttempts) LeaseManualAttempt(ctx context.Context, merchantID string, id uuid.UUID, now time.Time, leaseFor time.Duration) (LeasedDelivery, error) {
	var l LeasedDelivery
	d := &l.Delivery
	createdAt := uuidTime(id)
	err := s.pool.QueryRow(ctx, `
		UPDATE deliveries d SET lease_until = $5, `+pinRetryPolicy+`
		FROM subscriptions s, events e
		WHERE d.id = $1 AND d.created_at >= $2 AND d.created_at < $3 AND d.merchant_id = $4
		  AND d.created_at >= $7 AND d.manual_requested > 0 AND d.status <> 'erased'
		  AND (d.lease_until IS NULL OR d.lease_until < $6)
		  AND s.id = d.subscription_id
		  AND e.id = d.event_id AND e.created_at = d.event_created_at
		RETURNING d.id, d.merchant_id, d.event_id, d.event_created_at, d.event_type, d.subscription_id,
			d.status, d.test, d.attempt_count, d.next_attempt_at, d.created_at, d.updated_at,
			s.url, s.status, s.deleted_at IS NOT NULL, e.body, d.lease_until, s.updated_at, s.kind,
			d.ordering_key, d.sequence, s.headers_sealed, s.authentication_sealed,
			coalesce(s.authentication->>'type', ''), s.encryption_key, coalesce(e.traceparent, ''), s.trace_context, s.payload_style, s.destination_sealed,
			`+leasedTransformation+`, `+leasedRetryPolicy,
		id, createdAt, createdAt.Add(time.Millisecond), merchantID, now.Add(leaseFor), now, s.retentionStart()).
		Scan(&d.ID, &d.MerchantID, &d.EventID, &d.EventCreatedAt, &d.EventType, &d.SubscriptionID,
			&d.Status, &d.Test, &d.AttemptCount, &d.NextAttemptAt, &d.CreatedAt, &d.UpdatedAt,
			&l.URL, &l.SubscriptionStatus, &l.SubscriptionDeleted, &l.Body, &l.LeaseUntil, &l.SubscriptionVersion, &l.Kind,
			&d.OrderingKey, &d.Sequence, &l.SealedHeaders, &l.SealedAuthentication, &l.AuthenticationType, &l.EncryptionKey,
			&l.TraceParent, &l.TraceContext, &l.PayloadStyle, &l.SealedDestination, &l.TransformationVersion, &d.RetryPolicy)
	if errors.Is(err, pgx.ErrNoRows) {
		// Missing, served already, or leased by a running attempt: tell
		// them apart.
		var requested bool
		err := s.pool.QueryRow(ctx, `SELECT manual_requested > 0 FROM deliveries
			WHERE id = $1 AND created_at >= $2 AND created_at < $3 AND merchant_id = $4 AND created_at >= $5`,
			id, createdAt, createdAt.Add(time.Millisecond), merchantID, s.retentionStart()).Scan(&requested)
		switch {
		case errors.Is(err, pgx.ErrNoRows) || err == nil && !requested:
			return LeasedDelivery{}, fmt.Errorf("lease delivery %s for a manual attempt: %w", id, ErrNotFound)
		case err != nil:
			return LeasedDelivery{}, fmt.Errorf("lease delivery %s for a manual attempt: %w", id, err)
		}
		return LeasedDelivery{}, fmt.Errorf("lease delivery %s for a manual attempt: an attempt is running: %w", id, ErrConflict)
	}
	if err != nil {
		return LeasedDelivery{}, fmt.Errorf("lease delivery %s for a manual attempt: %w", id, err)
	}
	return l, nil
}

// FailedDeliveries lists the merchant's real (non-test) deliveries to one
// subscription that failed for good, or were skipped while it was
// disabled, and were created at or after since
// (at most limit of them, oldest first), for a bulk replay.
func (s *ManualAttempts) FailedDeliveries(ctx context.Context, merchantID string, subscriptionID uuid.UUID, since time.Time, limit int) ([]Delivery, error) {
	if start := s.retentionStart(); since.Before(start) {
		since = start
	}
	rows, err := s.pool.Query(ctx, `SELECT `+deliveryColumns+` FROM deliveries
		WHERE merchant_id = $1 AND subscription_id = $2 AND status IN ('failed', 'skipped') AND NOT test AND created_at >= $3
		  AND NOT EXISTS (SELECT 1 FROM erasures x WHERE x.event_id = deliveries.event_id)
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
