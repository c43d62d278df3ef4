// Package producer is how the core API publishes events to webhookd from
// Go: Publish enqueues an asynq task on webhookd's Redis, and a webhookd
// worker turns it into a stored event and its deliveries, exactly as
// POST /internal/v1/events does.
//
// Publishing is idempotent on the event id: give each event a UUID of its
// own, keep it with the business fact it reports, and a retried Publish
// makes one event, never two.
package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
)

// TaskIngest is the asynq task type of a published event.
const TaskIngest = "webhookd:ingest"

// Queue is the asynq queue ingest tasks go to; webhookd's workers serve it.
const Queue = "ingest"

// maxRetry bounds the worker's retries of an ingest task while Postgres is
// unreachable; each retry backs off up to a minute.
const maxRetry = 25

// Event is one event to deliver to the merchant's subscriptions.
type Event struct {
	// ID is the event's UUID, the webhook-id receivers deduplicate on.
	// Empty lets Publish make a UUIDv7, but then a retried Publish makes a
	// second event: set it for idempotent publishing.
	ID string `json:"id,omitempty"`
	// MerchantID is the merchant whose subscriptions receive the event.
	MerchantID string `json:"merchant_id"`
	// Type is the event kind, e.g. "payout.paid" (spec 6.1).
	Type string `json:"type"`
	// Payload is the resource snapshot, a JSON object, serialised at the
	// event's api_version.
	Payload json.RawMessage `json:"payload"`
	// APIVersion is the version Payload was serialised at; empty means the
	// merchant's pinned version.
	APIVersion string `json:"api_version,omitempty"`
}

// Producer enqueues events. It is safe for concurrent use.
type Producer struct {
	client *asynq.Client
}

// New returns a Producer that enqueues on the given Redis (the one
// webhookd's workers use).
func New(redis asynq.RedisConnOpt) *Producer {
	return &Producer{client: asynq.NewClient(redis)}
}

// Close releases the Redis connection.
func (p *Producer) Close() error { return p.client.Close() }

// Publish enqueues one event. It returns once Redis holds the task; the
// worker stores the event moments later. The asynq TaskID is derived from
// the event id, so that publishing the same id again while the first task
// waits is a no-op, and once it ran, the stored event id makes it one.
func (p *Producer) Publish(ctx context.Context, e Event) error {
	task, err := newTask(e)
	if err != nil {
		return err
	}
	if _, err := p.client.EnqueueContext(ctx, task); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("publish event %s: %w", e.ID, err)
	}
	return nil
}

// PublishBatch enqueues many events. It stops at the first error, which
// names the event; the events before it are enqueued, so a caller may
// retry the whole batch safely (publishing is idempotent on the id).
func (p *Producer) PublishBatch(ctx context.Context, es []Event) error {
	for i := range es {
		if err := p.Publish(ctx, es[i]); err != nil {
			return fmt.Errorf("batch event %d: %w", i, err)
		}
	}
	return nil
}

func newTask(e Event) (*asynq.Task, error) {
	if e.ID == "" {
		id, err := uuid.NewV7()
		if err != nil {
			return nil, fmt.Errorf("publish event: %w", err)
		}
		e.ID = id.String()
	} else if _, err := uuid.Parse(e.ID); err != nil {
		return nil, fmt.Errorf("publish event: id %q is not a UUID", e.ID)
	}
	if e.MerchantID == "" || e.Type == "" {
		return nil, fmt.Errorf("publish event %s: merchant_id and type are required", e.ID)
	}
	if !json.Valid(e.Payload) {
		return nil, fmt.Errorf("publish event %s: payload is not valid JSON", e.ID)
	}
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("publish event %s: %w", e.ID, err)
	}
	return asynq.NewTask(TaskIngest, b, asynq.Queue(Queue), asynq.TaskID("e:"+e.ID), asynq.MaxRetry(maxRetry)), nil
}
