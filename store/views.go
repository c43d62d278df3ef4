package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// This file holds the merchant-facing reads of events and deliveries (GET
// /v1/events, /v1/webhook_deliveries) and the claim that rate-limits
// failure e-mails. Every read is scoped to one merchant and to the 30-day
// retention: a row whose partition is not dropped yet is still gone for the
// merchant once it is older than Retention (spec 6.4 rule 6).

// EventFilter narrows an event list; zero fields do not filter.
type EventFilter struct {
	// Type keeps events of that type.
	Type string
	// CreatedGTE keeps events created at or after it.
	CreatedGTE *time.Time
}

// DeliveryFilter narrows a delivery list; zero fields do not filter.
type DeliveryFilter struct {
	// Status is pending, succeeded or failed.
	Status string
	// CreatedGTE keeps deliveries created at or after it.
	CreatedGTE *time.Time
	// EventID keeps the deliveries of one event.
	EventID *uuid.UUID
	// SubscriptionID keeps the deliveries to one subscription.
	SubscriptionID *uuid.UUID
}

// retentionStart is the oldest created_at a merchant may still see.
func (s *Store) retentionStart() time.Time { return s.Now().Add(-Retention) }

// pageAfter splits a cursor into the typed keyset bounds of a query.
func pageAfter(p Page) (*time.Time, *uuid.UUID, error) {
	if p.After == nil {
		return nil, nil, nil
	}
	id, err := uuid.Parse(p.After.ID)
	if err != nil {
		return nil, nil, fmt.Errorf("cursor id: %w", err)
	}
	return &p.After.CreatedAt, &id, nil
}

// ListEvents returns one page of the merchant's events, newest first, up to
// p.Limit+1 rows (the extra one tells the caller there is another page).
func (s *Store) ListEvents(ctx context.Context, merchantID string, f EventFilter, p Page) ([]Event, error) {
	afterAt, afterID, err := pageAfter(p)
	if err != nil {
		return nil, fmt.Errorf("list events of %s: %w", merchantID, err)
	}
	// The lower bound on created_at is the greater of the filter and the
	// retention start, so that the planner prunes to the partitions asked for.
	from := s.retentionStart()
	if f.CreatedGTE != nil && f.CreatedGTE.After(from) {
		from = *f.CreatedGTE
	}
	rows, err := s.pool.Query(ctx, `
		SELECT id, merchant_id, type, api_version, body, created_at FROM events
		WHERE merchant_id = $1 AND created_at >= $2
		  AND ($3 = '' OR type = $3)
		  AND ($4::timestamptz IS NULL OR (created_at, id) < ($4, $5::uuid))
		ORDER BY created_at DESC, id DESC
		LIMIT $6`, merchantID, from, f.Type, afterAt, afterID, p.Limit+1)
	if err != nil {
		return nil, fmt.Errorf("list events of %s: %w", merchantID, err)
	}
	events, err := pgx.CollectRows(rows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("list events of %s: %w", merchantID, err)
	}
	return events, nil
}

// GetEvent returns one of the merchant's events. Another merchant's, or one
// past retention, is ErrNotFound.
func (s *Store) GetEvent(ctx context.Context, merchantID string, id uuid.UUID) (Event, error) {
	// event_ids gives created_at, so that the events lookup prunes to one
	// partition.
	rows, err := s.pool.Query(ctx, `
		SELECT e.id, e.merchant_id, e.type, e.api_version, e.body, e.created_at
		FROM event_ids i JOIN events e ON e.id = i.id AND e.created_at = i.created_at
		WHERE i.id = $1 AND e.merchant_id = $2 AND e.created_at >= $3`, id, merchantID, s.retentionStart())
	if err != nil {
		return Event{}, fmt.Errorf("get event %s: %w", id, err)
	}
	e, err := pgx.CollectExactlyOneRow(rows, scanEvent)
	if err != nil {
		return Event{}, fmt.Errorf("get event %s: %w", id, notFound(err))
	}
	return e, nil
}

func scanEvent(row pgx.CollectableRow) (Event, error) {
	var e Event
	err := row.Scan(&e.ID, &e.MerchantID, &e.Type, &e.APIVersion, &e.Body, &e.CreatedAt)
	return e, err
}

// ListDeliveries returns one page of the merchant's deliveries with their
// attempts, newest first, up to p.Limit+1 rows.
func (s *Store) ListDeliveries(ctx context.Context, merchantID string, f DeliveryFilter, p Page) ([]Delivery, error) {
	afterAt, afterID, err := pageAfter(p)
	if err != nil {
		return nil, fmt.Errorf("list deliveries of %s: %w", merchantID, err)
	}
	from := s.retentionStart()
	if f.CreatedGTE != nil && f.CreatedGTE.After(from) {
		from = *f.CreatedGTE
	}
	rows, err := s.pool.Query(ctx, `SELECT `+deliveryColumns+` FROM deliveries
		WHERE merchant_id = $1 AND created_at >= $2
		  AND ($3 = '' OR status = $3)
		  AND ($4::uuid IS NULL OR event_id = $4)
		  AND ($5::uuid IS NULL OR subscription_id = $5)
		  AND ($6::timestamptz IS NULL OR (created_at, id) < ($6, $7::uuid))
		ORDER BY created_at DESC, id DESC
		LIMIT $8`, merchantID, from, f.Status, f.EventID, f.SubscriptionID, afterAt, afterID, p.Limit+1)
	if err != nil {
		return nil, fmt.Errorf("list deliveries of %s: %w", merchantID, err)
	}
	ds, err := pgx.CollectRows(rows, scanDelivery)
	if err != nil {
		return nil, fmt.Errorf("list deliveries of %s: %w", merchantID, err)
	}
	if err := s.attachAttempts(ctx, ds, from); err != nil {
		return nil, fmt.Errorf("list deliveries of %s: %w", merchantID, err)
	}
	return ds, nil
}

// attachAttempts fills the Attempts of ds with one query. from bounds the
// partitions searched: no delivery of ds is older.
func (s *Store) attachAttempts(ctx context.Context, ds []Delivery, from time.Time) error {
	if len(ds) == 0 {
		return nil
	}
	ids := make([]uuid.UUID, len(ds))
	index := make(map[uuid.UUID]int, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
		index[d.ID] = i
		ds[i].Attempts = []Attempt{}
	}
	rows, err := s.pool.Query(ctx, `
		SELECT delivery_id, number, status, trigger, http_status, error, duration_ms, response_body, attempted_at
		FROM attempts WHERE delivery_id = ANY($1) AND delivery_created_at >= $2
		ORDER BY delivery_id, number`, ids, from)
	if err != nil {
		return fmt.Errorf("attempts: %w", err)
	}
	attempts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Attempt, error) {
		var a Attempt
		err := row.Scan(&a.DeliveryID, &a.Number, &a.Status, &a.Trigger, &a.HTTPStatus, &a.Error,
			&a.DurationMS, &a.ResponseBody, &a.AttemptedAt)
		return a, err
	})
	if err != nil {
		return fmt.Errorf("attempts: %w", err)
	}
	for _, a := range attempts {
		i := index[a.DeliveryID]
		ds[i].Attempts = append(ds[i].Attempts, a)
	}
	return nil
}

// GetDelivery returns one of the merchant's deliveries with its attempts.
// Another merchant's, or one past retention, is ErrNotFound.
func (s *Store) GetDelivery(ctx context.Context, merchantID string, id uuid.UUID) (Delivery, error) {
	d, err := s.DeliveryByID(ctx, id)
	if err != nil {
		return Delivery{}, err
	}
	if d.MerchantID != merchantID || d.CreatedAt.Before(s.retentionStart()) {
		return Delivery{}, fmt.Errorf("get delivery %s: %w", id, ErrNotFound)
	}
	if d.Attempts == nil {
		d.Attempts = []Attempt{}
	}
	return d, nil
}

// FailureNotice is what a failure e-mail needs to know about the
// subscription it is about.
type FailureNotice struct {
	// SubscriptionID and URL name the failing endpoint.
	SubscriptionID uuid.UUID
	URL            string
	// MerchantID owns the subscription.
	MerchantID string
	// Email is the merchant's notification address; nil when none is set.
	Email *string
}

// ClaimFailureNotification claims the right to send the failure e-mail of a
// subscription: it succeeds for at most one caller per interval, across
// every instance, because the check and the stamp are one UPDATE. When an
// e-mail was claimed less than interval ago, it returns ErrConflict.
func (s *Store) ClaimFailureNotification(ctx context.Context, subscriptionID uuid.UUID, interval time.Duration) (FailureNotice, error) {
	now := s.Now()
	var n FailureNotice
	err := s.pool.QueryRow(ctx, `
		UPDATE subscriptions s SET last_notified_at = $2
		FROM merchants m
		WHERE s.id = $1 AND m.id = s.merchant_id
		  AND (s.last_notified_at IS NULL OR s.last_notified_at <= $3)
		RETURNING s.id, s.url, s.merchant_id, m.notification_email`,
		subscriptionID, now, now.Add(-interval)).Scan(&n.SubscriptionID, &n.URL, &n.MerchantID, &n.Email)
	if errors.Is(err, pgx.ErrNoRows) {
		return FailureNotice{}, fmt.Errorf("claim failure notification of %s: %w", subscriptionID, ErrConflict)
	}
	if err != nil {
		return FailureNotice{}, fmt.Errorf("claim failure notification of %s: %w", subscriptionID, err)
	}
	return n, nil
}
