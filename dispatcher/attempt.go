package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/retry"
	"github.com/webhookd/webhookd/store"
)

// TaskAttempt is the asynq task type of one due delivery attempt.
const TaskAttempt = "webhookd:attempt"

// attemptTask is the payload of TaskAttempt: which attempt of which
// delivery. Everything else is read from Postgres when it runs.
type attemptTask struct {
	DeliveryID     uuid.UUID `json:"d"`
	CreatedAt      time.Time `json:"c"`
	SubscriptionID uuid.UUID `json:"s"`
	Number         int       `json:"n"`
	Trigger        string    `json:"t"`
	// MerchantID is set on manual attempts (redeliver) alone, whose Number
	// is 0 in the task: the number is taken when the delivery is leased.
	MerchantID string `json:"m,omitempty"`
}

// attemptTaskID names the task of attempt number of a delivery. The
// sweeper's re-enqueue of an attempt whose task still exists is refused by
// asynq on this id; a finished task is deleted at once (no retention), so a
// legitimate re-enqueue is never blocked.
func attemptTaskID(id uuid.UUID, number int) string {
	return "d:" + id.String() + ":" + strconv.Itoa(number)
}

// throttleWait is how long an attempt waits for its subscription's slot
// before going back on the queue.
const throttleWait = 100 * time.Millisecond

// enqueueTimeout bounds one enqueue of a follow-up task; past it the
// sweeper takes over.
const enqueueTimeout = 5 * time.Second

// enqueueAttempt schedules attempt number of delivery del at at, with the
// trigger to record (store.TriggerScheduled or store.TriggerManual). It is
// what Redeliver and SendTestEvent call after updating the delivery in
// Postgres: the task only runs if the delivery is then pending with
// attempt_count = number-1. An existing task for the same attempt makes it
// a no-op.
func (d *Dispatcher) enqueueAttempt(ctx context.Context, del store.Delivery, number int, trigger string, at time.Time) error {
	_, err := d.enqueue(ctx, del, number, trigger, at)
	return err
}

// enqueue is enqueueAttempt reporting whether a task was added.
func (d *Dispatcher) enqueue(ctx context.Context, del store.Delivery, number int, trigger string, at time.Time) (bool, error) {
	return d.enqueueTask(ctx, attemptTask{DeliveryID: del.ID, CreatedAt: del.CreatedAt, SubscriptionID: del.SubscriptionID,
		Number: number, Trigger: trigger}, attemptTaskID(del.ID, number), at)
}

// enqueueTask enqueues task at under the given TaskID, reporting whether it
// was added (false: a task of that id exists).
func (d *Dispatcher) enqueueTask(ctx context.Context, t attemptTask, id string, at time.Time) (bool, error) {
	payload, err := json.Marshal(t)
	if err != nil {
		return false, fmt.Errorf("encode attempt task: %w", err)
	}
	task := asynq.NewTask(TaskAttempt, payload,
		asynq.TaskID(id),
		asynq.Queue(queueDeliveries),
		asynq.ProcessAt(at),
		asynq.MaxRetry(maxTaskRetry),
		// The handler never outlives its lease in Postgres.
		asynq.Timeout(d.cfg.DeliveryTimeout+d.leaseMargin()))
	if _, err := d.client.EnqueueContext(ctx, task); err != nil {
		if errors.Is(err, asynq.ErrTaskIDConflict) {
			return false, nil
		}
		return false, fmt.Errorf("enqueue attempt %d (%s) of delivery %s: %w", t.Number, t.Trigger, t.DeliveryID, err)
	}
	return true, nil
}

// handleAttempt runs one attempt: lease the delivery row, sign, POST,
// record, then schedule the next attempt. It returns an error only when the
// attempt could not run for an internal reason and should be retried.
func (d *Dispatcher) handleAttempt(ctx context.Context, t *asynq.Task) error {
	var at attemptTask
	if err := json.Unmarshal(t.Payload(), &at); err != nil || (at.Number < 1 && at.Trigger != store.TriggerManual) {
		d.logger.ErrorContext(ctx, "attempt task unreadable; dropped", "error", err)
		return asynq.RevokeTask
	}
	if !d.limiter.acquireWithin(ctx, at.SubscriptionID, throttleWait) {
		return d.throttleFor(at.SubscriptionID)
	}
	defer d.limiter.release(at.SubscriptionID)

	err := d.attempt(ctx, at)
	if err != nil && lastTry(ctx) {
		// Give up quietly: the task is deleted and the sweeper re-enqueues
		// the delivery once Postgres answers again.
		d.logger.ErrorContext(ctx, "attempt task gives up; the sweeper will retry", "delivery_id", at.DeliveryID,
			"attempt", at.Number, "error", err)
		return nil
	}
	return err
}

func (d *Dispatcher) attempt(ctx context.Context, at attemptTask) error {
	now := d.cfg.Now()
	var leased store.LeasedDelivery
	var err error
	if at.Trigger == store.TriggerManual {
		leased, err = d.leaseManual(ctx, &at, now)
	} else {
		leased, err = d.leaser.do(ctx, store.LeaseRequest{ID: at.DeliveryID, CreatedAt: at.CreatedAt, Number: at.Number})
	}
	if errors.Is(err, store.ErrNotFound) {
		// Already attempted, finished, or running elsewhere: this task is
		// stale or a duplicate.
		d.logger.DebugContext(ctx, "attempt task is stale", "delivery_id", at.DeliveryID, "attempt", at.Number)
		return nil
	}
	if err != nil {
		return err
	}
	log := d.logger.With("event_id", leased.EventID, "delivery_id", leased.ID, "attempt", at.Number,
		"subscription_id", leased.SubscriptionID)
	if leased.SubscriptionDeleted || (leased.SubscriptionStatus != store.SubscriptionEnabled && !leased.Test) {
		if at.Trigger == store.TriggerManual {
			// The delivery stays as it was; nothing was sent.
			log.InfoContext(ctx, "subscription deleted or disabled since redeliver; manual attempt dropped")
			d.releaseLease(ctx, leased, log)
			return nil
		}
		log.InfoContext(ctx, "subscription deleted or disabled; delivery abandoned")
		return d.store.AbandonDelivery(ctx, leased.Delivery, now)
	}
	keys, err := d.secrets.keys(ctx, leased.SubscriptionID, leased.SubscriptionVersion, now)
	if err != nil {
		d.releaseLease(ctx, leased, log)
		return err
	}

	res := d.send(ctx, leased.URL, leased.EventID.String(), leased.Body, keys)
	decide := d.decide
	if at.Trigger == store.TriggerManual {
		decide = d.decideManual
	}
	rec := decide(leased.Delivery, at, res)
	d.metrics.attempts.WithLabelValues(res.outcome).Inc()
	d.metrics.attemptDuration.Observe(res.duration.Seconds())

	// Recorded before the task is acknowledged; a cancelled task context
	// must not lose a result that was obtained.
	if err := d.record(context.WithoutCancel(ctx), rec, log); err != nil {
		if errors.Is(err, store.ErrConflict) {
			log.WarnContext(ctx, "attempt already recorded by another worker", "error", err)
			return nil
		}
		return err
	}
	d.observe(ctx, log, leased.Delivery, at, rec, res)
	if rec.NextAttemptAt != nil {
		// The task's own deadline may be nearly spent by a slow receiver;
		// the next attempt deserves its own.
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), enqueueTimeout)
		err := d.enqueueAttempt(ectx, leased.Delivery, at.Number+1, store.TriggerScheduled, *rec.NextAttemptAt)
		cancel()
		if err != nil {
			log.WarnContext(ctx, "enqueue next attempt; the sweeper will retry", "error", err)
		}
	}
	return nil
}

// recordPatience is how long an attempt's outcome waits for Postgres to
// come back before the attempt is given up and, once its lease lapses, made
// again.
const recordPatience = time.Minute

// record writes an attempt's outcome, retrying while Postgres is
// unreachable (a restart, a failover): the receiver has answered, and an
// outcome that is not recorded means the attempt is made again, a
// duplicate for the receiver. Retrying past the lease is safe: if another
// worker made the attempt meanwhile, the store refuses the second record of
// one attempt number (ErrConflict).
func (d *Dispatcher) record(ctx context.Context, rec store.AttemptRecord, log *slog.Logger) error {
	deadline := time.Now().Add(recordPatience)
	wait := 50 * time.Millisecond
	for {
		err := d.recorder.RecordAttempt(ctx, rec)
		if err == nil || errors.Is(err, store.ErrConflict) || errors.Is(err, errBatcherClosed) || time.Now().Add(wait).After(deadline) {
			return err
		}
		log.WarnContext(ctx, "record attempt; retrying", "error", err, "retry_in", wait)
		time.Sleep(wait)
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// releaseLease gives the delivery back after an internal error, so that
// asynq's retry of the task can lease it at once.
func (d *Dispatcher) releaseLease(ctx context.Context, l store.LeasedDelivery, log *slog.Logger) {
	if err := d.store.ReleaseLease(context.WithoutCancel(ctx), l.Delivery, l.LeaseUntil); err != nil {
		log.WarnContext(ctx, "release lease", "error", err)
	}
}

// decide applies the retry policy to an attempt's result: the attempt row
// and the state it leaves the delivery in.
func (d *Dispatcher) decide(del store.Delivery, at attemptTask, res result) store.AttemptRecord {
	status := store.AttemptFailed
	if res.ok() {
		status = store.AttemptSucceeded
	}
	rec := store.AttemptRecord{
		Delivery: del,
		Attempt: store.Attempt{DeliveryID: del.ID, Number: at.Number, Status: status, Trigger: at.Trigger,
			HTTPStatus: res.httpStatus, Error: res.errCode, DurationMS: int(res.duration.Milliseconds()),
			ResponseBody: res.body, AttemptedAt: res.started},
	}
	switch {
	case res.ok():
		rec.Status = store.DeliverySucceeded
	case res.gone():
		// 410 Gone: the receiver asks for no more webhooks (Standard
		// Webhooks); the subscription is disabled, the delivery ends.
		rec.Status = store.DeliveryFailed
		rec.DisableSubscription = true
	case at.Trigger == store.TriggerManual:
		// A manual attempt is one attempt; it does not restart the schedule.
		rec.Status = store.DeliveryFailed
	default:
		next, ok := d.cfg.Schedule.NextAttempt(at.Number, res.finished, retry.RandomJitter())
		if !ok {
			rec.Status = store.DeliveryFailed
			break
		}
		next = pushBack(res.finished, next, res.retryAfter)
		rec.Status = store.DeliveryPending
		rec.NextAttemptAt = &next
	}
	return rec
}

// pushBack honours a receiver's Retry-After (429, 503): the next attempt
// moves back by that much, but never beyond twice the scheduled delay, so
// a receiver cannot park its deliveries for days.
func pushBack(now, next time.Time, retryAfter time.Duration) time.Time {
	scheduled := next.Sub(now)
	if retryAfter <= scheduled {
		return next
	}
	return now.Add(min(retryAfter, 2*scheduled))
}

// observe updates the metrics and logs the attempt's outcome, and tells the
// Notifier of a real delivery that failed for good.
func (d *Dispatcher) observe(ctx context.Context, log *slog.Logger, del store.Delivery, at attemptTask, rec store.AttemptRecord, res result) {
	attrs := []any{"outcome", res.outcome, "duration_ms", rec.Attempt.DurationMS, "trigger", at.Trigger}
	if res.httpStatus != nil {
		attrs = append(attrs, "http_status", *res.httpStatus)
	}
	if res.errCode != nil {
		attrs = append(attrs, "error", *res.errCode)
	}
	switch rec.Status {
	case store.DeliverySucceeded:
		if at.Trigger == store.TriggerScheduled {
			d.metrics.deliveryLatency.Observe(res.finished.Sub(del.EventCreatedAt).Seconds())
		}
		log.InfoContext(ctx, "delivery succeeded", attrs...)
	case store.DeliveryPending:
		d.metrics.retriesScheduled.Inc()
		log.InfoContext(ctx, "attempt failed; retry scheduled", append(attrs, "next_attempt_at", rec.NextAttemptAt)...)
	case store.DeliveryFailed:
		if rec.DisableSubscription && !del.Test {
			attrs = append(attrs, "subscription_disabled", true)
		}
		log.WarnContext(ctx, "delivery failed", attrs...)
		if !del.Test {
			d.metrics.deliveriesFailed.Inc()
			if d.cfg.Notifier != nil {
				del.Status, del.AttemptCount, del.NextAttemptAt = store.DeliveryFailed, at.Number, nil
				d.cfg.Notifier.DeliveryFailed(context.WithoutCancel(ctx), del)
			}
		}
	}
}
