package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// EndpointHealth owns what is read and written about an endpoint's health
// outside an attempt: its attempt counts over a period, the disabling of
// endpoints failing too long, and the claim of a failure e-mail.
type EndpointHealth struct {
	db
}

// AttemptCounts counts a subscription's attempts over a period.
type AttemptCounts struct {
	// Attempts is every attempt made; Succeeded those the receiver took.
	Attempts, Succeeded int
}

// SubscriptionAttemptsFrom counts the attempts of the merchant's
// subscription in the hours (UTC) from the one holding from, test
// deliveries and skipped attempts left out: the attempts the stats
// endpoint's buckets count over the same hours, read from the same rollup
// (attempt_stats, written with each record). A count read from the
// attempts themselves needed an index on the deliveries' last update, two
// more index entries for every delivery recorded (5 % of Postgres's CPU at
// fan-out 10), and grew with the endpoint's attempts of the day; this
// reads at most a row per hour and response-time slot.
func (s *EndpointHealth) SubscriptionAttemptsFrom(ctx context.Context, merchantID string, subscriptionID uuid.UUID, from time.Time) (AttemptCounts, error) {
	var c AttemptCounts
	err := s.pool.QueryRow(ctx, subscriptionAttemptsSQL, merchantID, subscriptionID, from.UTC().Truncate(time.Hour)).Scan(&c.Attempts, &c.Succeeded)
	if err != nil {
		return AttemptCounts{}, fmt.Errorf("attempts of subscription %s from %s: %w", subscriptionID, from, err)
	}
	return c, nil
}

// subscriptionAttemptsSQL is SubscriptionAttemptsFrom's statement: the
// rollup's rows of the subscription from an hour on, by its primary key,
// and only if the subscription is the merchant's.
const subscriptionAttemptsSQL = `
	SELECT coalesce(sum(a.succeeded + a.retrying + a.failed), 0)::int8, coalesce(sum(a.succeeded), 0)::int8
	FROM attempt_stats a JOIN subscriptions s ON s.id = a.subscription_id AND s.merchant_id = $1
	WHERE a.subscription_id = $2 AND a.hour >= $3`

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
func (s *EndpointHealth) DisableFailingSubscriptions(ctx context.Context, failingBefore time.Time, limit int) ([]AutoDisabled, error) {
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

// FailureNotice is what a failure e-mail needs to know about the
// subscription it is about.
type FailureNotice struct {
	// SubscriptionID and URL name the failing endpoint.
	SubscriptionID uuid.UUID
	URL            string
	// MerchantID owns the subscription.
	MerchantID string
	// Email is the merchant's notification address (a claim is only made
	// when there is one).
	Email *string
}

// ClaimFailureNotification claims the right to send the failure e-mail of a
// subscription: it succeeds for at most one caller per interval, across
// every instance, because the check and the stamp are one UPDATE. It
// returns ErrConflict when there is nothing to send now: an e-mail was
// claimed less than interval ago, or the merchant has no notification
// address (then nothing is stamped, so the first failure after the address
// is set sends one).
func (s *EndpointHealth) ClaimFailureNotification(ctx context.Context, subscriptionID uuid.UUID, interval time.Duration) (FailureNotice, error) {
	now := s.Now()
	var n FailureNotice
	err := s.pool.QueryRow(ctx, `
		UPDATE subscriptions s SET last_notified_at = $2
		FROM merchants m
		WHERE s.id = $1 AND m.id = s.merchant_id
		  AND m.notification_email IS NOT NULL AND m.notification_email <> ''
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
