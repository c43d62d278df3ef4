package publish

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
)

// ErrSubscriptionInactive reports a redelivery to a subscription that is
// disabled or deleted: nothing is sent. The API answers 409 conflict.
var ErrSubscriptionInactive = store.ErrSubscriptionInactive

// deliveryReader reads a merchant's delivery, as the API shows it.
type deliveryReader interface {
	// GetDelivery reads the merchant's delivery.
	GetDelivery(ctx context.Context, merchantID string, id uuid.UUID) (store.Delivery, error)
}

// listenerReader reads a merchant's listener.
type listenerReader interface {
	// GetListener reads the merchant's listener.
	GetListener(ctx context.Context, merchantID string, id uuid.UUID) (store.Listener, error)
}

// manualAttemptRequests is what the Redeliverer needs of the database's
// manual attempts.
type manualAttemptRequests interface {
	// FailedDeliveries reads a subscription's deliveries that failed since
	// a time, at most limit.
	FailedDeliveries(ctx context.Context, merchantID string, subscriptionID uuid.UUID, since time.Time, limit int) ([]store.Delivery, error)
	// RequestManualAttempts records the requests of manual attempts.
	RequestManualAttempts(ctx context.Context, merchantID string, ds []store.Delivery, now time.Time) (int, error)
}

// RedelivererConfig is what the Redeliverer needs; all of it is required.
type RedelivererConfig struct {
	// Views reads the delivery to redeliver.
	Views deliveryReader
	// Subscriptions reads the subscription it belongs to.
	Subscriptions subscriptionReader
	// Listeners reads it when that subscription is a listener.
	Listeners listenerReader
	// ManualAttempts finds the failed deliveries to recover and records
	// each request.
	ManualAttempts manualAttemptRequests
}

func (c RedelivererConfig) validate() error {
	if c.Views == nil || c.Subscriptions == nil || c.Listeners == nil || c.ManualAttempts == nil {
		return errors.New("redeliverer: Views, Subscriptions, Listeners and ManualAttempts are required")
	}
	return nil
}

// Redeliverer makes manual attempts: one delivery at a time (Redeliver) or
// every delivery of a subscription that failed since a time (Recover). It
// records each request in Postgres before it enqueues the attempt, so a
// request survives Redis; a worker (deliver.Runner) makes the attempt.
type Redeliverer struct {
	cfg    RedelivererConfig
	tasks  *queue.Enqueuer
	clock  clock.Clock
	logger *slog.Logger
}

// NewRedeliverer checks cfg and builds the Redeliverer.
func NewRedeliverer(cfg RedelivererConfig, tasks *queue.Enqueuer, clock clock.Clock, logger *slog.Logger) (*Redeliverer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Redeliverer{cfg: cfg, tasks: tasks, clock: clock, logger: logger}, nil
}

// Redeliver appends one immediate manual attempt to a delivery of the
// merchant, whatever its status: it checks the delivery and its
// subscription, enqueues the attempt for the workers to run now, and
// returns the delivery as it is (status and attempts unchanged). The API
// answers 202 with it; the attempt appears in its attempts, trigger manual,
// within moments. The API process never dials a receiver: webhooks leave
// from the workers' addresses alone (spec 6.4), under the workers'
// concurrency and per-subscription caps, and the request never waits on a
// receiver.
//
// The attempt sends the stored body bytes under the same webhook-id, with a
// fresh webhook-timestamp and signatures from the secrets active when it
// runs. Each call enqueues one attempt of its own (the Idempotency-Key
// middleware keeps a replayed request from calling twice). If an attempt of
// the delivery is running then, the manual one runs right after it. The
// delivery's status after it (decideManual):
//   - success: succeeded, and a pending delivery's schedule ends (the
//     scheduled task, finding the attempt number taken, does nothing);
//   - failure of a pending delivery: still pending, its next scheduled
//     attempt stays at the time it was planned for (manual attempts count
//     towards the total, so the schedule may end one attempt sooner);
//   - failure of a succeeded or failed delivery: failed (DESIGN.md: "a
//     manual attempt failed").
//
// ErrNotFound: no such delivery of the merchant. ErrSubscriptionInactive
// (an ErrConflict): its subscription is disabled or deleted. A subscription
// disabled or deleted after the call drops the attempt unsent.
func (r *Redeliverer) Redeliver(ctx context.Context, merchantID string, deliveryID uuid.UUID) (store.Delivery, error) {
	del, err := r.cfg.Views.GetDelivery(ctx, merchantID, deliveryID)
	if err != nil {
		return store.Delivery{}, err
	}
	sub, err := r.cfg.Subscriptions.GetSubscription(ctx, merchantID, del.SubscriptionID)
	if errors.Is(err, store.ErrNotFound) {
		// A live listener's delivery is redelivered down its connection.
		var l store.Listener
		if l, err = r.cfg.Listeners.GetListener(ctx, merchantID, del.SubscriptionID); err == nil {
			sub = l.Subscription
		}
	}
	if errors.Is(err, store.ErrNotFound) || (err == nil && sub.Status != store.SubscriptionEnabled && !del.Test) {
		return store.Delivery{}, fmt.Errorf("redeliver %s: %w", deliveryID, ErrSubscriptionInactive)
	}
	if err != nil {
		return store.Delivery{}, err
	}
	if err := refusePoll(sub); err != nil {
		return store.Delivery{}, err
	}
	if err := r.requestManual(ctx, merchantID, []store.Delivery{del}); err != nil {
		return store.Delivery{}, fmt.Errorf("redeliver %s: %w", deliveryID, err)
	}
	return del, nil
}

// requestManual records one manual attempt of each delivery as asked for
// (durable: from then on the request survives Redis) and enqueues their
// tasks. An enqueue that fails is logged, not returned: the sweeper
// enqueues the request again (ManualRequestsDue).
func (r *Redeliverer) requestManual(ctx context.Context, merchantID string, dels []store.Delivery) error {
	if _, err := r.cfg.ManualAttempts.RequestManualAttempts(ctx, merchantID, dels, r.clock.Now()); err != nil {
		return err
	}
	for _, del := range dels {
		call, err := uuid.NewV7()
		if err == nil {
			_, err = r.tasks.Schedule(ctx, queue.ManualAttempt(merchantID, del), queue.ManualTaskID(del.ID, call))
		}
		if err != nil {
			r.logger.WarnContext(ctx, "enqueue manual attempt; the sweeper will retry", "delivery_id", del.ID, "error", err)
		}
	}
	return nil
}

// MaxRecover bounds one bulk replay; a merchant with more failed
// deliveries recovers again from the last one's created_at.
const MaxRecover = 10_000

// Recover replays every delivery to the subscription that failed for good
// since the given time (like Svix's recover): one manual attempt each, as
// Redeliver makes. Test deliveries are left alone. It returns how many
// attempts it enqueued. ErrNotFound: no such subscription of the merchant;
// ErrSubscriptionInactive: it is disabled.
func (r *Redeliverer) Recover(ctx context.Context, merchantID string, subscriptionID uuid.UUID, since time.Time) (int, error) {
	sub, err := r.cfg.Subscriptions.GetSubscription(ctx, merchantID, subscriptionID)
	if err != nil {
		return 0, err
	}
	if sub.Status != store.SubscriptionEnabled {
		return 0, fmt.Errorf("recover %s: %w", subscriptionID, ErrSubscriptionInactive)
	}
	if err := refusePoll(sub); err != nil {
		return 0, err
	}
	failed, err := r.cfg.ManualAttempts.FailedDeliveries(ctx, merchantID, subscriptionID, since, MaxRecover)
	if err != nil {
		return 0, err
	}
	if len(failed) > 0 {
		if err := r.requestManual(ctx, merchantID, failed); err != nil {
			return 0, fmt.Errorf("recover %s: %w", subscriptionID, err)
		}
	}
	r.logger.InfoContext(ctx, "failed deliveries replayed", "subscription_id", subscriptionID, "deliveries", len(failed))
	return len(failed), nil
}
