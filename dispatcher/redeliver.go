package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/store"
)

// ErrSubscriptionInactive reports a redelivery to a subscription that is
// disabled or deleted: nothing is sent. The API answers 409 conflict.
var ErrSubscriptionInactive = store.ErrSubscriptionInactive

// TestEventType is the event kind send_test_event stores (spec 6.1).
const TestEventType = "ping.test"

// testEventMessage is the message of every ping.test payload.
const testEventMessage = "This is a test event sent by webhookd. Handlers may ignore it."

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
func (d *Dispatcher) Redeliver(ctx context.Context, merchantID string, deliveryID uuid.UUID) (store.Delivery, error) {
	del, err := d.store.GetDelivery(ctx, merchantID, deliveryID)
	if err != nil {
		return store.Delivery{}, err
	}
	sub, err := d.store.GetSubscription(ctx, merchantID, del.SubscriptionID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && sub.Status != store.SubscriptionEnabled && !del.Test) {
		return store.Delivery{}, fmt.Errorf("redeliver %s: %w", deliveryID, ErrSubscriptionInactive)
	}
	if err != nil {
		return store.Delivery{}, err
	}
	if err := d.requestManual(ctx, merchantID, []store.Delivery{del}); err != nil {
		return store.Delivery{}, fmt.Errorf("redeliver %s: %w", deliveryID, err)
	}
	return del, nil
}

// requestManual records one manual attempt of each delivery as asked for
// (durable: from then on the request survives Redis) and enqueues their
// tasks. An enqueue that fails is logged, not returned: the sweeper
// enqueues the request again (ManualRequestsDue).
func (d *Dispatcher) requestManual(ctx context.Context, merchantID string, dels []store.Delivery) error {
	if _, err := d.store.RequestManualAttempts(ctx, merchantID, dels, d.cfg.Now()); err != nil {
		return err
	}
	for _, del := range dels {
		call, err := uuid.NewV7()
		if err == nil {
			_, err = d.enqueueManual(ctx, merchantID, del, manualTaskID(del.ID, call))
		}
		if err != nil {
			d.logger.WarnContext(ctx, "enqueue manual attempt; the sweeper will retry", "delivery_id", del.ID, "error", err)
		}
	}
	return nil
}

// enqueueManual enqueues one manual attempt of del, due now, under the
// task id given: each request has its own, so that each adds one attempt.
func (d *Dispatcher) enqueueManual(ctx context.Context, merchantID string, del store.Delivery, taskID string) (bool, error) {
	at := attemptTask{DeliveryID: del.ID, CreatedAt: del.CreatedAt, SubscriptionID: del.SubscriptionID,
		Trigger: store.TriggerManual, MerchantID: merchantID}
	// Due now on asynq's clock, the wall clock (cfg.Now dates records).
	return d.enqueueTask(ctx, at, taskID, time.Now())
}

// MaxRecover bounds one bulk replay; a merchant with more failed
// deliveries recovers again from the last one's created_at.
const MaxRecover = 10_000

// Recover replays every delivery to the subscription that failed for good
// since the given time (like Svix's recover): one manual attempt each, as
// Redeliver makes. Test deliveries are left alone. It returns how many
// attempts it enqueued. ErrNotFound: no such subscription of the merchant;
// ErrSubscriptionInactive: it is disabled.
func (d *Dispatcher) Recover(ctx context.Context, merchantID string, subscriptionID uuid.UUID, since time.Time) (int, error) {
	sub, err := d.store.GetSubscription(ctx, merchantID, subscriptionID)
	if err != nil {
		return 0, err
	}
	if sub.Status != store.SubscriptionEnabled {
		return 0, fmt.Errorf("recover %s: %w", subscriptionID, ErrSubscriptionInactive)
	}
	failed, err := d.store.FailedDeliveries(ctx, merchantID, subscriptionID, since, MaxRecover)
	if err != nil {
		return 0, err
	}
	if len(failed) > 0 {
		if err := d.requestManual(ctx, merchantID, failed); err != nil {
			return 0, fmt.Errorf("recover %s: %w", subscriptionID, err)
		}
	}
	d.logger.InfoContext(ctx, "failed deliveries replayed", "subscription_id", subscriptionID, "deliveries", len(failed))
	return len(failed), nil
}

// manualTaskID names the task of one redeliver call: unique per call, so
// that two calls make two attempts.
func manualTaskID(deliveryID, call uuid.UUID) string {
	return "m:" + deliveryID.String() + ":" + call.String()
}

// sweptManualTaskID names the sweeper's task for the manual attempts still
// asked of a delivery in one state (attempts made, requests left): sweeping
// again while it waits adds nothing.
func sweptManualTaskID(r store.ManualRequest) string {
	return fmt.Sprintf("m:%s:s%d.%d", r.ID, r.AttemptCount, r.Requested)
}

// leaseManual leases the delivery of a manual attempt task and gives the
// task its attempt number (attempt_count+1). While another attempt of the
// delivery runs it returns errThrottled, so that asynq brings the task back
// soon, without counting a failure, and the manual attempt runs right after.
func (d *Dispatcher) leaseManual(ctx context.Context, at *attemptTask, now time.Time) (store.LeasedDelivery, error) {
	leased, err := d.store.LeaseManualAttempt(ctx, at.MerchantID, at.DeliveryID, now, d.cfg.DeliveryTimeout+d.leaseMargin())
	if errors.Is(err, store.ErrConflict) {
		return store.LeasedDelivery{}, errThrottled
	}
	if err != nil {
		return store.LeasedDelivery{}, err
	}
	at.Number = leased.AttemptCount + 1
	return leased, nil
}

// decideManual is the delivery state a manual attempt leaves (see
// Redeliver). A 410 Gone ends the delivery and disables the subscription,
// as for a scheduled attempt.
func (d *Dispatcher) decideManual(del store.Delivery, at attemptTask, res result) store.AttemptRecord {
	rec := d.decide(del, at, res)
	if res.ok() || res.gone() || del.Status != store.DeliveryPending || del.NextAttemptAt == nil {
		return rec
	}
	if at.Number >= d.cfg.Schedule.Attempts() {
		rec.Status, rec.NextAttemptAt = store.DeliveryFailed, nil
		return rec
	}
	next := *del.NextAttemptAt
	rec.Status, rec.NextAttemptAt = store.DeliveryPending, &next
	return rec
}

// testPayload is the payload of a ping.test event (DESIGN.md).
type testPayload struct {
	SubscriptionID uuid.UUID `json:"subscription_id"`
	Message        string    `json:"message"`
}

// SendTestEvent stores a ping.test event of the merchant, at its pinned
// version, with one test delivery to subscriptionID alone (whatever its
// events list or status), and schedules it like any delivery: same
// signing, headers and retry schedule. Test deliveries never touch the
// subscription's health and never send a failure e-mail. It returns the
// delivery as created, before its first attempt.
func (d *Dispatcher) SendTestEvent(ctx context.Context, merchantID string, subscriptionID uuid.UUID) (store.Delivery, error) {
	// Check first, so that a stranger's or a missing subscription stores no
	// event at all.
	if _, err := d.store.GetSubscription(ctx, merchantID, subscriptionID); err != nil {
		return store.Delivery{}, err
	}
	payload, err := json.Marshal(testPayload{SubscriptionID: subscriptionID, Message: testEventMessage})
	if err != nil {
		return store.Delivery{}, fmt.Errorf("encode test payload: %w", err)
	}
	_, deliveries, _, err := d.publish(ctx, store.NewEvent{MerchantID: merchantID, Type: TestEventType, Payload: payload},
		store.Audience{SubscriptionID: &subscriptionID, Test: true})
	if err != nil {
		return store.Delivery{}, err
	}
	if len(deliveries) != 1 {
		// Deleted between the check and the insert.
		return store.Delivery{}, fmt.Errorf("send test event to %s: %w", subscriptionID, store.ErrNotFound)
	}
	del := deliveries[0]
	del.Attempts = []store.Attempt{}
	return del, nil
}
