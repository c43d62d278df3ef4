package dispatcher

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/producer"
	"github.com/webhookd/webhookd/store"
)

// The asynq task types the workers serve (producer.TaskIngest is the
// fifth); worker.go registers each on the one ServeMux.
const (
	// TaskAttempt is one due delivery attempt.
	TaskAttempt = "webhookd:attempt"
	// TaskFirstAttempts carries the first attempts of an event's
	// deliveries. One task per event instead of one per delivery divides
	// the queue's work (an enqueue, a dequeue and an acknowledgement, each
	// a Redis script) by the event's fan-out; the attempts run inside it,
	// each with its own lease and record as if it had its own task.
	// Retries and manual attempts keep one task per attempt. The events
	// of one commit group (several publishes written in one transaction)
	// share one such task too: what one event's fan-out saves, a group
	// saves at fan-out 1.
	TaskFirstAttempts = "webhookd:first_attempts"
	// TaskSweep is the periodic sweep.
	TaskSweep = "webhookd:sweep"
	// TaskMaintenance is the periodic partition and retention job.
	TaskMaintenance = "webhookd:maintenance"
	// TaskAutoDisable is the periodic job that disables subscriptions
	// failing for too long.
	TaskAutoDisable = "webhookd:auto_disable"
)

// Queue names. Attempts weigh most so that a burst of ingestion cannot
// starve deliveries; maintenance is tiny and rare.
const (
	queueDeliveries  = "deliveries"
	queueMaintenance = "maintenance"
)

// maxTaskRetry bounds asynq's own retries of a task whose handler failed
// for an internal reason (Postgres unreachable); past it the give-up
// policy (worker.go) enqueues the task afresh.
const maxTaskRetry = 8

// attemptTask is the payload of TaskAttempt: which attempt of which
// delivery, and when it is due. Everything else is read from Postgres when
// it runs.
type attemptTask struct {
	DeliveryID     uuid.UUID     `json:"d"`
	CreatedAt      time.Time     `json:"c"`
	SubscriptionID uuid.UUID     `json:"s"`
	Number         int           `json:"n"`
	Trigger        store.Trigger `json:"t"`
	// Due is the attempt's next_attempt_at to the millisecond: asynq keeps
	// a task's time in whole seconds and may hand it over up to a second
	// early, and the attempt waits for it (never before the time its
	// delivery records).
	Due time.Time `json:"a,omitzero"`
	// MerchantID is the delivery's merchant, whose share of the workers
	// the attempt counts against. A manual attempt (redeliver), whose
	// Number is 0 in the task, takes its number when it leases the
	// delivery of this merchant.
	MerchantID string `json:"m,omitempty"`
	// RateLimit is the subscription's deliveries per second as the fan-out
	// or the last lease read it (0: none), so that an attempt over it is
	// put back before it takes a worker or a lease.
	RateLimit int `json:"r,omitempty"`
}

// scheduledAttempt is the task of attempt number of del, due at due.
func scheduledAttempt(del store.Delivery, number int, due time.Time) attemptTask {
	return attemptTask{DeliveryID: del.ID, CreatedAt: del.CreatedAt, SubscriptionID: del.SubscriptionID,
		MerchantID: del.MerchantID, Number: number, Trigger: store.TriggerScheduled, Due: due, RateLimit: del.RateLimit}
}

// firstAttemptsTask is the payload of TaskFirstAttempts.
type firstAttemptsTask struct {
	// EventID is the event whose first attempts these are; zero for a
	// commit group's task, which holds several events'.
	EventID  uuid.UUID     `json:"e"`
	Attempts []attemptTask `json:"a"`
}

// attemptTaskID names the task of attempt number of a delivery. The
// sweeper's re-enqueue of an attempt whose task still exists is refused by
// asynq on this id; a finished task is deleted at once (no retention), so a
// legitimate re-enqueue is never blocked.
func attemptTaskID(id uuid.UUID, number int) string {
	return "d:" + id.String() + ":" + strconv.Itoa(number)
}

// firstAttemptsTaskID names an event's first-attempts task, so that the
// sweeper's re-enqueue is refused while the task exists.
func firstAttemptsTaskID(eventID uuid.UUID) string { return "f:" + eventID.String() }

// groupTaskID names the first-attempts task of the commit group whose
// deliveries' ids end like deliveryID (store.DeliveryGroup): "g:" and
// those bytes in hex. The sweeper finds from any of its deliveries whether
// a group's task still exists; a delivery written outside a group names a
// task that never exists.
func groupTaskID(deliveryID uuid.UUID) string {
	return "g:" + hex.EncodeToString(store.DeliveryGroup(deliveryID))
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

// enqueuer puts the pipeline's tasks on asynq. Every service that enqueues
// shares one; it holds the only asynq client of the process.
type enqueuer struct {
	client *asynq.Client
	// redis is the same Redis, for what asynq has no verb for (refusals).
	redis redis.UniversalClient
	// attemptTimeout bounds an attempt task's handler: it never outlives
	// its lease in Postgres.
	attemptTimeout time.Duration
	clock          Clock
}

func newEnqueuer(opt asynq.RedisConnOpt, attemptTimeout time.Duration, clock Clock) (*enqueuer, error) {
	rdb, ok := opt.MakeRedisClient().(redis.UniversalClient)
	if !ok {
		return nil, errors.New("dispatcher: Redis options make no go-redis client")
	}
	return &enqueuer{client: asynq.NewClient(opt), redis: rdb, attemptTimeout: attemptTimeout, clock: clock}, nil
}

// refusal keeps why a producer's event was refused, where the producer
// reads it.
func (q *enqueuer) refusal(ctx context.Context, eventID string, r producer.Refused) error {
	return producer.KeepRefusal(ctx, q.redis, eventID, r)
}

// clearRefusal forgets a producer's event's refusal once it is stored.
func (q *enqueuer) clearRefusal(ctx context.Context, eventID string) error {
	return producer.ClearRefusal(ctx, q.redis, eventID)
}

// attempt enqueues t under the given TaskID, due at its Due time (at once
// when unset), reporting whether it was added (false: a task of that id
// exists).
func (q *enqueuer) attempt(ctx context.Context, t attemptTask, id string) (bool, error) {
	payload, err := json.Marshal(t)
	if err != nil {
		return false, fmt.Errorf("encode attempt task: %w", err)
	}
	return q.enqueue(ctx, asynq.NewTask(TaskAttempt, payload), id, t.Due,
		fmt.Sprintf("attempt %d (%s) of delivery %s", t.Number, t.Trigger, t.DeliveryID))
}

// firstAttempts enqueues the first attempts of an event's deliveries, due
// at due: one TaskFirstAttempts, or a lone delivery's ordinary attempt
// task.
func (q *enqueuer) firstAttempts(ctx context.Context, eventID uuid.UUID, deliveries []store.Delivery, due time.Time) (bool, error) {
	switch len(deliveries) {
	case 0:
		return false, nil
	case 1:
		return q.attempt(ctx, scheduledAttempt(deliveries[0], 1, due), attemptTaskID(deliveries[0].ID, 1))
	}
	t := firstAttemptsTask{EventID: eventID, Attempts: make([]attemptTask, len(deliveries))}
	for i, del := range deliveries {
		t.Attempts[i] = scheduledAttempt(del, 1, due)
	}
	payload, err := json.Marshal(t)
	if err != nil {
		return false, fmt.Errorf("encode first attempts of event %s: %w", eventID, err)
	}
	return q.enqueue(ctx, asynq.NewTask(TaskFirstAttempts, payload), firstAttemptsTaskID(eventID), due,
		"first attempts of event "+eventID.String())
}

// groupFirstAttempts enqueues the first attempts of the deliveries of one
// commit group, several events', as one TaskFirstAttempts named after the
// group (groupTaskID), due at due.
func (q *enqueuer) groupFirstAttempts(ctx context.Context, attempts []attemptTask, due time.Time) (bool, error) {
	if len(attempts) == 0 {
		return false, nil
	}
	payload, err := json.Marshal(firstAttemptsTask{Attempts: attempts})
	if err != nil {
		return false, fmt.Errorf("encode first attempts of a commit group: %w", err)
	}
	id := groupTaskID(attempts[0].DeliveryID)
	return q.enqueue(ctx, asynq.NewTask(TaskFirstAttempts, payload), id, due, "first attempts of commit group "+id)
}

// enqueue puts one delivery task on the deliveries queue.
func (q *enqueuer) enqueue(ctx context.Context, task *asynq.Task, id string, due time.Time, what string) (bool, error) {
	opts := []asynq.Option{asynq.TaskID(id), asynq.Queue(queueDeliveries), asynq.MaxRetry(maxTaskRetry),
		asynq.Timeout(q.attemptTimeout)}
	if !due.IsZero() {
		// Without a time the task is ready at once, on any clock.
		opts = append(opts, asynq.ProcessAt(due))
	}
	_, err := q.client.EnqueueContext(ctx, task, opts...)
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("enqueue %s: %w", what, err)
	}
	return true, nil
}

// renewedMark separates a renewed task's id from the id it renews.
const renewedMark = "~r"

// again enqueues afresh a task that used up its retries: same type,
// payload, queue and retry budget, under a new id (the old one is held
// until its handler returns): the original id and a renewal stamp, however
// often it was renewed. It is due after wait.
func (q *enqueuer) again(ctx context.Context, t *asynq.Task, queue, id string, maxRetry int, wait time.Duration) (string, error) {
	base, _, _ := strings.Cut(id, renewedMark)
	fresh := base + renewedMark + strconv.FormatInt(q.clock.Now().UnixMilli(), 36)
	opts := []asynq.Option{asynq.TaskID(fresh), asynq.Queue(queue), asynq.ProcessIn(wait), asynq.MaxRetry(maxRetry)}
	if queue == queueDeliveries {
		opts = append(opts, asynq.Timeout(q.attemptTimeout))
	}
	if _, err := q.client.EnqueueContext(ctx, asynq.NewTask(t.Type(), t.Payload()), opts...); err != nil {
		return "", fmt.Errorf("enqueue %s afresh: %w", id, err)
	}
	return fresh, nil
}

// close releases the Redis connections.
func (q *enqueuer) close() error { return errors.Join(q.client.Close(), q.redis.Close()) }
