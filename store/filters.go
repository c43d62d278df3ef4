package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// FilteredSubscription is a subscription with a filter that an event's
// fan-out must evaluate.
type FilteredSubscription struct {
	ID uuid.UUID
	// Version is the subscription's updated_at: a cache of its compiled
	// filter keyed by it is never stale.
	Version time.Time
	Filter  string
}

// FilteredSubscriptions lists the merchant's endpoints that an event of
// eventType would reach (enabled, or disabled for a skipped delivery) and
// that have a filter. Subscriptions without a filter are not read: the
// fan-out statement selects them itself.
func (s *Store) FilteredSubscriptions(ctx context.Context, merchantID, eventType string) ([]FilteredSubscription, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, updated_at, filter FROM subscriptions
		WHERE merchant_id = $1 AND deleted_at IS NULL AND filter IS NOT NULL
		  AND (status = 'enabled' OR (status = 'disabled' AND kind = 'endpoint'))
		  AND events && ARRAY[$2::text, '*']`, merchantID, eventType)
	if err != nil {
		return nil, fmt.Errorf("filtered subscriptions of %s: %w", merchantID, err)
	}
	subs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (FilteredSubscription, error) {
		var f FilteredSubscription
		err := r.Scan(&f.ID, &f.Version, &f.Filter)
		return f, err
	})
	if err != nil {
		return nil, fmt.Errorf("filtered subscriptions of %s: %w", merchantID, err)
	}
	return subs, nil
}

// AutoDisabled is a subscription that DisableFailingSubscriptions disabled,
// with what its e-mail needs.
type AutoDisabled struct {
	SubscriptionID uuid.UUID
	MerchantID     string
	URL            string
	// FailingSince is when its run of failed attempts began.
	FailingSince time.Time
	// Email is the merchant's notification address; nil or empty for none.
	Email *string
}

// DisableFailingSubscriptions disables at most limit enabled endpoints
// whose every attempt has failed since before failingBefore, and returns
// them. SKIP LOCKED lets two instances run it at once without waiting on
// (or disabling twice) the same rows.
func (s *Store) DisableFailingSubscriptions(ctx context.Context, failingBefore time.Time, limit int) ([]AutoDisabled, error) {
	rows, err := s.pool.Query(ctx, `
		UPDATE subscriptions s SET status = 'disabled', updated_at = $3
		FROM merchants m
		WHERE m.id = s.merchant_id AND s.id IN (
			SELECT id FROM subscriptions
			WHERE status = 'enabled' AND deleted_at IS NULL AND kind = 'endpoint'
			  AND failing_since IS NOT NULL AND failing_since <= $1
			ORDER BY failing_since LIMIT $2 FOR UPDATE SKIP LOCKED)
		RETURNING s.id, s.merchant_id, s.url, s.failing_since, m.notification_email`,
		failingBefore, limit, s.Now())
	if err != nil {
		return nil, fmt.Errorf("disable failing subscriptions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AutoDisabled, error) {
		var a AutoDisabled
		err := r.Scan(&a.SubscriptionID, &a.MerchantID, &a.URL, &a.FailingSince, &a.Email)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("disable failing subscriptions: %w", err)
	}
	return out, nil
}
