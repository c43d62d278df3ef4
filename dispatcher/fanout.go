package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/store"
)

// TaskFirstAttempts is the asynq task type that carries the first attempts
// of an event's deliveries. One task per event instead of one per delivery
// divides the queue's work (an enqueue, a dequeue and an acknowledgement,
// each a Redis script) by the event's fan-out; the attempts themselves run
// concurrently inside it, each with its own lease and record as if it had
// its own task. Retries and manual attempts keep one task per attempt.
const TaskFirstAttempts = "webhookd:first_attempts"

// firstAttemptsTask is the payload of TaskFirstAttempts.
type firstAttemptsTask struct {
	EventID  uuid.UUID     `json:"e"`
	Attempts []attemptTask `json:"a"`
}

// firstAttemptsTaskID names an event's first-attempts task, so that the
// sweeper's re-enqueue is refused while the task exists.
func firstAttemptsTaskID(eventID uuid.UUID) string { return "f:" + eventID.String() }

// firstAttemptsTaskIDOf is the id enqueueFirstAttempts gives the task of
// these deliveries: a lone delivery's first attempt is an ordinary attempt
// task.
func firstAttemptsTaskIDOf(eventID uuid.UUID, deliveries []store.Delivery) string {
	if len(deliveries) == 1 {
		return attemptTaskID(deliveries[0].ID, 1)
	}
	return firstAttemptsTaskID(eventID)
}

// enqueueFirstAttempts enqueues the first attempts of an event's
// deliveries, due at at. A failure is logged, not returned: the deliveries
// are durable and the sweeper enqueues what is missing.
func (d *Dispatcher) enqueueFirstAttempts(ctx context.Context, eventID uuid.UUID, deliveries []store.Delivery, at time.Time) (bool, error) {
	switch len(deliveries) {
	case 0:
		return false, nil
	case 1:
		return d.enqueue(ctx, deliveries[0], 1, store.TriggerScheduled, at)
	}
	t := firstAttemptsTask{EventID: eventID, Attempts: make([]attemptTask, len(deliveries))}
	for i, del := range deliveries {
		t.Attempts[i] = attemptTask{DeliveryID: del.ID, CreatedAt: del.CreatedAt, SubscriptionID: del.SubscriptionID,
			Number: 1, Trigger: store.TriggerScheduled}
	}
	payload, err := json.Marshal(t)
	if err != nil {
		return false, fmt.Errorf("encode first attempts of event %s: %w", eventID, err)
	}
	_, err = d.client.EnqueueContext(ctx, asynq.NewTask(TaskFirstAttempts, payload,
		asynq.TaskID(firstAttemptsTaskID(eventID)),
		asynq.Queue(queueDeliveries),
		asynq.ProcessAt(at),
		// Failures inside are handed to per-attempt tasks, so the handler
		// never fails; retries are asynq's recovery of a task whose worker
		// died, which must run it again rather than archive it.
		asynq.MaxRetry(maxTaskRetry),
		asynq.Timeout(d.cfg.DeliveryTimeout+d.leaseMargin())))
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("enqueue first attempts of event %s: %w", eventID, err)
	}
	return true, nil
}

// handleFirstAttempts runs an event's first attempts concurrently. An
// attempt whose subscription is at its concurrency cap, or that fails for
// an internal reason, is handed to a task of its own, which waits its turn
// or is retried like any attempt.
func (d *Dispatcher) handleFirstAttempts(ctx context.Context, t *asynq.Task) error {
	var ft firstAttemptsTask
	if err := json.Unmarshal(t.Payload(), &ft); err != nil {
		d.logger.ErrorContext(ctx, "first-attempts task unreadable; dropped (the sweeper will find its deliveries)", "error", err)
		return asynq.RevokeTask
	}
	var wg sync.WaitGroup
	for _, at := range ft.Attempts {
		wg.Go(func() {
			if !d.limiter.acquireWithin(ctx, at.SubscriptionID, throttleWait) {
				d.handOff(ctx, ft.EventID, at, nil)
				return
			}
			defer d.limiter.release(at.SubscriptionID)
			if err := d.attempt(ctx, at); err != nil {
				d.handOff(ctx, ft.EventID, at, err)
			}
		})
	}
	wg.Wait()
	return nil
}

// handOff gives one first attempt a task of its own, due now.
func (d *Dispatcher) handOff(ctx context.Context, eventID uuid.UUID, at attemptTask, cause error) {
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), enqueueTimeout)
	defer cancel()
	_, err := d.enqueueTask(ectx, at, attemptTaskID(at.DeliveryID, at.Number), d.cfg.Now())
	if err != nil || cause != nil {
		d.logger.WarnContext(ctx, "first attempt handed to a task of its own", "event_id", eventID,
			"delivery_id", at.DeliveryID, "attempt", at.Number, "cause", errString(cause), "error", errString(err))
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
