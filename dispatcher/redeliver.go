package dispatcher

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/store"
)

// ErrSubscriptionInactive reports a redelivery to a subscription that is
// disabled or deleted: nothing is sent. It wraps store.ErrConflict, so the
// API answers 409.
var ErrSubscriptionInactive = fmt.Errorf("subscription is disabled or deleted: %w", store.ErrConflict)

// TestEventType is the event kind send_test_event stores (spec 6.1).
const TestEventType = "ping.test"

// testEventMessage is the message of every ping.test payload.
const testEventMessage = "This is a test event sent by webhookd. Handlers may ignore it."

// Redeliver appends one manual attempt to a delivery of the merchant,
// whatever its status, and runs it now, in the caller's request: the
// merchant asked for it and sees its outcome in the answer. The attempt
// sends the stored body bytes under the same webhook-id, with a fresh
// webhook-timestamp and signatures from the secrets active now.
//
// The delivery's status after it:
//   - success: succeeded, and a pending delivery's schedule ends (the
//     scheduled task, finding the attempt number taken, does nothing);
//   - failure of a pending delivery: still pending, its next scheduled
//     attempt stays at the time it was planned for (manual attempts count
//     towards the total, so the schedule may end one attempt sooner);
//   - failure of a succeeded or failed delivery: failed (DESIGN.md: "a
//     manual attempt failed").
//
// ErrNotFound: no such delivery of the merchant. ErrConflict: an attempt of
// it is running, or its subscription is disabled or deleted.
func (d *Dispatcher) Redeliver(ctx context.Context, merchantID string, deliveryID uuid.UUID) (store.Delivery, error) {
	// The attempt, once started, is carried through and recorded even if
	// the merchant's client goes away; the lease bounds it.
	ctx = context.WithoutCancel(ctx)
	now := d.cfg.Now()
	leased, err := d.store.LeaseManualAttempt(ctx, merchantID, deliveryID, now, d.cfg.DeliveryTimeout+d.leaseMargin())
	if err != nil {
		return store.Delivery{}, err
	}
	at := attemptTask{DeliveryID: leased.ID, CreatedAt: leased.CreatedAt, SubscriptionID: leased.SubscriptionID,
		Number: leased.AttemptCount + 1, Trigger: store.TriggerManual}
	log := d.logger.With("event_id", leased.EventID, "delivery_id", leased.ID, "attempt", at.Number,
		"subscription_id", leased.SubscriptionID)
	if leased.SubscriptionDeleted || (leased.SubscriptionStatus != store.SubscriptionEnabled && !leased.Test) {
		d.releaseLease(ctx, leased, log)
		return store.Delivery{}, fmt.Errorf("redeliver %s: %w", deliveryID, ErrSubscriptionInactive)
	}
	keys, err := d.signingKeys(ctx, leased.SubscriptionID, now)
	if err != nil {
		d.releaseLease(ctx, leased, log)
		return store.Delivery{}, err
	}

	res := d.send(ctx, leased.URL, leased.EventID.String(), leased.Body, keys)
	rec := d.decideManual(leased.Delivery, at, res)
	d.metrics.attempts.WithLabelValues(res.outcome).Inc()
	d.metrics.attemptDuration.Observe(res.duration.Seconds())
	if err := d.recorder.RecordAttempt(ctx, rec); err != nil {
		return store.Delivery{}, err
	}
	d.observe(ctx, log, leased.Delivery, at, rec, res)
	if rec.NextAttemptAt != nil {
		if err := d.enqueueAttempt(ctx, leased.Delivery, at.Number+1, store.TriggerScheduled, *rec.NextAttemptAt); err != nil {
			log.WarnContext(ctx, "enqueue next attempt after a manual one; the sweeper will retry", "error", err)
		}
	}
	return d.store.GetDelivery(ctx, merchantID, deliveryID)
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
