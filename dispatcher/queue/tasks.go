// Package queue is the contract between the pipeline's roles: the asynq
// task types, their payloads and ids (tasks.go), the Enqueuer that every
// role parks attempts and enqueues tasks with, and the schedule (lanes.go,
// lanes.lua) where each attempt waits under its merchant and subscription
// until it is due and its turn comes. Publishers write it, workers read it;
// neither imports the other.
package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/producer"
)

// The asynq task types the workers serve (producer.TaskIngest is the
// fifth); dispatcher/worker.go registers each on the one ServeMux.
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
	// TaskCertExpiry is the periodic job that warns merchants of mtls
	// client certificates about to expire.
	TaskCertExpiry = "webhookd:cert_expiry"
	// TaskReplay is the periodic job that moves bulk replays on.
	TaskReplay = "webhookd:replay"
)

// Queue names. Attempts weigh most so that a burst of ingestion cannot
// starve deliveries; maintenance is tiny and rare.
const (
	QueueDeliveries  = "deliveries"
	QueueMaintenance = "maintenance"
)

// MaxTaskRetry bounds asynq's own retries of a task whose handler failed
// for an internal reason (Postgres unreachable); past it the give-up
// policy (dispatcher/worker.go) enqueues the task afresh.
const MaxTaskRetry = 8

// EnqueueTimeout bounds one enqueue of a follow-up task; past it the
// sweeper takes over.
const EnqueueTimeout = 5 * time.Second

// Attempt is the payload of TaskAttempt: which attempt of which
// delivery, and when it is due. Everything else is read from Postgres when
// it runs.
type Attempt struct {
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
	// BatchSize and BatchWaitMS are the subscription's batch as the
	// fan-out or the last lease read it (0: none), so that the schedule
	// hands its due attempts over together (batch.go).
	BatchSize   int `json:"bs,omitempty"`
	BatchWaitMS int `json:"bw,omitempty"`
	// Retries counts the times the attempt could not run for an internal
	// reason (Postgres unreachable), for its backoff.
	Retries int `json:"y,omitempty"`
	// Handover is the lease the publish that stored the delivery took for
	// its own pool, which then refused the attempt: the first taker may
	// take that lease over (store.LeaseRequest.Handover). Zero: none.
	Handover time.Time `json:"h,omitzero"`
	// Leased is the delivery as the publish leased it for this attempt,
	// handed to the publishing process's own pool in memory (never
	// stored: a parked attempt has none), so that the attempt runs on
	// that lease without a statement of its own.
	Leased *store.LeasedDelivery `json:"-"`
}

// Parked is the attempt as the schedule keeps it: the lease a publish
// took for its own pool, which did not run the attempt, becomes a Handover
// its first taker may take over (a lease is never stored in the schedule).
func (a Attempt) Parked() Attempt {
	if a.Leased != nil {
		a.Handover, a.Leased = a.Leased.LeaseUntil, nil
	}
	return a
}

// ScheduledAttempt is the task of attempt number of del, due at due.
func ScheduledAttempt(del store.Delivery, number int, due time.Time) Attempt {
	a := Attempt{DeliveryID: del.ID, CreatedAt: del.CreatedAt, SubscriptionID: del.SubscriptionID,
		MerchantID: del.MerchantID, Number: number, Trigger: store.TriggerScheduled, Due: due, RateLimit: del.RateLimit}
	withBatch(&a, del.Batch)
	return a
}

// ManualAttempt is the task of one manual attempt of del, due at once:
// its number is taken when it leases the delivery.
func ManualAttempt(merchantID string, del store.Delivery) Attempt {
	return Attempt{DeliveryID: del.ID, CreatedAt: del.CreatedAt, SubscriptionID: del.SubscriptionID,
		Trigger: store.TriggerManual, MerchantID: merchantID}
}

// FirstAttempts is the payload of TaskFirstAttempts.
type FirstAttempts struct {
	// EventID is the event whose first attempts these are; zero for a
	// commit group's task, which holds several events'.
	EventID  uuid.UUID `json:"e"`
	Attempts []Attempt `json:"a"`
}

// AttemptTaskID names the task of attempt number of a delivery. The
// sweeper's re-enqueue of an attempt whose task still exists is refused by
// asynq on this id; a finished task is deleted at once (no retention), so a
// legitimate re-enqueue is never blocked.
func AttemptTaskID(id uuid.UUID, number int) string {
	return "d:" + id.String() + ":" + strconv.Itoa(number)
}

// ManualTaskID names the task of one redeliver call: unique per call, so
// that two calls make two attempts.
func ManualTaskID(deliveryID, call uuid.UUID) string {
	return "m:" + deliveryID.String() + ":" + call.String()
}

// SweptManualTaskID names the sweeper's task for the manual attempts still
// asked of a delivery in one state (attempts made, requests left): sweeping
// again while it waits adds nothing.
func SweptManualTaskID(r store.ManualRequest) string {
	return fmt.Sprintf("m:%s:s%d.%d", r.ID, r.AttemptCount, r.Requested)
}

// Enqueuer puts the pipeline's tasks on asynq. Every service that enqueues
// shares one; it holds the only asynq client of the process.
type Enqueuer struct {
	client *asynq.Client
	// Lanes is the schedule every attempt is parked in until it runs.
	Lanes *Lanes
	// Redis is the same Redis, for what asynq has no verb for (refusals).
	Redis redis.UniversalClient
	// attemptTimeout bounds an attempt task's handler: it never outlives
	// its lease in Postgres.
	attemptTimeout time.Duration
	clock          clock.Clock
}

// NewEnqueuer connects the asynq client and the schedule, spread over
// shards shards (NewLanes), on opt's Redis; attemptTimeout bounds an
// attempt task's handler.
func NewEnqueuer(opt asynq.RedisConnOpt, attemptTimeout time.Duration, shards int, clock clock.Clock) (*Enqueuer, error) {
	rdb, ok := opt.MakeRedisClient().(redis.UniversalClient)
	if !ok {
		return nil, errors.New("queue: Redis options make no go-redis client")
	}
	return &Enqueuer{client: asynq.NewClient(opt), Lanes: NewLanes(rdb, shards), Redis: rdb, attemptTimeout: attemptTimeout, clock: clock}, nil
}

// Refusal keeps why a producer's event was refused, where the producer
// reads it.
func (q *Enqueuer) Refusal(ctx context.Context, eventID string, r producer.Refused) error {
	return producer.KeepRefusal(ctx, q.Redis, eventID, r)
}

// ClearRefusal forgets a producer's event's refusal once it is stored.
func (q *Enqueuer) ClearRefusal(ctx context.Context, eventID string) error {
	return producer.ClearRefusal(ctx, q.Redis, eventID)
}

// Schedule parks t in the schedule under id until its Due time (at once
// when unset), reporting whether it was added (false: an Schedule of that
// id is parked).
func (q *Enqueuer) Schedule(ctx context.Context, t Attempt, id string) (bool, error) {
	n, err := q.Lanes.Push(ctx, LaneItem{ID: id, Task: t})
	return n > 0, err
}

// renewedMark separates a renewed task's id from the id it renews.
const renewedMark = "~r"

// Again enqueues afresh a task that used up its retries: same type,
// payload, queue and retry budget, under a new id (the old one is held
// until its handler returns): the original id and a renewal stamp, however
// often it was renewed. It is due after wait.
func (q *Enqueuer) Again(ctx context.Context, t *asynq.Task, queue, id string, maxRetry int, wait time.Duration) (string, error) {
	base, _, _ := strings.Cut(id, renewedMark)
	fresh := base + renewedMark + strconv.FormatInt(q.clock.Now().UnixMilli(), 36)
	opts := []asynq.Option{asynq.TaskID(fresh), asynq.Queue(queue), asynq.ProcessIn(wait), asynq.MaxRetry(maxRetry)}
	if queue == QueueDeliveries {
		opts = append(opts, asynq.Timeout(q.attemptTimeout))
	}
	if _, err := q.client.EnqueueContext(ctx, asynq.NewTask(t.Type(), t.Payload()), opts...); err != nil {
		return "", fmt.Errorf("enqueue %s afresh: %w", id, err)
	}
	return fresh, nil
}

// Close releases the Redis connections.
func (q *Enqueuer) Close() error { return errors.Join(q.client.Close(), q.Redis.Close()) }
