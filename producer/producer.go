// Package producer is how the core API publishes events to webhookd from
// Go: Publish enqueues an asynq task on webhookd's Redis, and a webhookd
// worker turns it into a stored event and its deliveries, exactly as
// POST /internal/v1/events does. NewFromURL connects with the URL webhookd
// itself is given as WEBHOOKD_REDIS_URL, read by the same parser.
//
// Publishing is idempotent on the event id: give each event a UUID of its
// own, keep it with the business fact it reports, and a retried Publish
// makes one event, never two.
//
// Publish checks only what it needs to build the task (a UUID id, a
// payload that is JSON) and refuses what breaks that at once, with a
// *Refused naming the field, rule and message HTTP ingest would. Every
// other rule of a published event (a known type, never the reserved
// ping.test, a payload that is a JSON object within the size limit, a
// usable api_version…) is webhookd's, applied by its worker with the
// catalogue webhookd is configured with, the same rules as the HTTP
// ingest. An event that breaks one is never stored nor delivered: the
// worker logs it, counts it in webhookd_events_refused_total{rule}, and
// keeps the refusal for a week, which Refusal returns.
package producer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/invalid"
)

// TaskIngest is the asynq task type of a published event.
const TaskIngest = "webhookd:ingest"

// Queue is the asynq queue ingest tasks go to; webhookd's workers serve it.
const Queue = "ingest"

// maxRetry bounds asynq's retries of an ingest task while Postgres is
// unreachable; past it webhookd's worker enqueues the task afresh rather
// than let asynq archive it, so the budget delays an event, never loses it.
const maxRetry = 25

// RefusalTTL is how long webhookd keeps why it refused an event.
const RefusalTTL = 7 * 24 * time.Hour

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
	// DeliverAt, when set, schedules the event: it is stored at once and
	// its deliveries make their first attempt at that instant (to the
	// second), unless cancelled before. It must be in the future and at
	// most MaxDeliverAhead away; nil delivers at once. Should the worker
	// store the event after DeliverAt passed (a backlog), it is delivered
	// at once.
	DeliverAt *time.Time `json:"deliver_at,omitempty"`
}

// MaxDeliverAhead is how far ahead an event may be scheduled (DeliverAt).
const MaxDeliverAhead = 30 * 24 * time.Hour

// The rules Publish applies itself, as they name themselves in a Refused
// and in webhookd_events_refused_total{rule}; webhookd's worker applies
// them too, under the same names.
const (
	RuleMissing        = "missing"
	RuleIDNotUUID      = "id_not_uuid"
	RulePayloadNotJSON = "payload_not_json"
	// RuleTextNUL and RuleTextNotUTF8 refuse a NUL character (\u0000), and
	// text that is not UTF-8, in any string field or anywhere in the payload.
	RuleTextNUL     = invalid.RuleNUL
	RuleTextNotUTF8 = invalid.RuleNotUTF8
	// RuleDeliverAtPast and RuleDeliverAtTooFar refuse a DeliverAt not in
	// the future, or more than MaxDeliverAhead ahead.
	RuleDeliverAtPast   = "deliver_at_past"
	RuleDeliverAtTooFar = "deliver_at_too_far"
)

// CheckDeliverAt applies the rules of a scheduled event's deliver_at at
// now, as the HTTP ingest and Publish do: nil is no schedule and passes.
func CheckDeliverAt(at *time.Time, now time.Time) *invalid.Error {
	switch {
	case at == nil:
		return nil
	case !at.After(now):
		return invalid.Value("deliver_at", RuleDeliverAtPast, "deliver_at must be in the future; omit it to deliver at once.")
	case at.Sub(now) > MaxDeliverAhead:
		return invalid.Value("deliver_at", RuleDeliverAtTooFar, "deliver_at must be at most 30 days ahead.")
	}
	return nil
}

// Refused is why a published event was refused: by Publish itself, or by
// webhookd's worker (then Refusal returns it).
type Refused struct {
	// Param is the field at fault, as the HTTP ingest names it.
	Param string `json:"param"`
	// Rule names the rule broken, as in the metric label.
	Rule string `json:"rule"`
	// Message says what is wrong and what is allowed.
	Message string `json:"message"`
}

// Error implements error.
func (r *Refused) Error() string { return "event refused: " + r.Param + ": " + r.Message }

// refusalKey is the Redis key of an event's refusal.
func refusalKey(eventID string) string { return "webhookd:refused:" + eventID }

// KeepRefusal records why an event was refused, for Refusal to read. It is
// webhookd's worker that calls it.
func KeepRefusal(ctx context.Context, rdb redis.Cmdable, eventID string, r Refused) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode refusal of %s: %w", eventID, err)
	}
	if err := rdb.Set(ctx, refusalKey(eventID), b, RefusalTTL).Err(); err != nil {
		return fmt.Errorf("keep refusal of %s: %w", eventID, err)
	}
	return nil
}

// ClearRefusal forgets an event's refusal. It is webhookd's worker that
// calls it, once it has stored the event (a corrected re-publish).
func ClearRefusal(ctx context.Context, rdb redis.Cmdable, eventID string) error {
	if err := rdb.Del(ctx, refusalKey(eventID)).Err(); err != nil {
		return fmt.Errorf("clear refusal of %s: %w", eventID, err)
	}
	return nil
}

// Producer enqueues events. It is safe for concurrent use.
type Producer struct {
	client    *asynq.Client
	inspector *asynq.Inspector
	redis     redis.UniversalClient
	// now is the core API's clock, which deliver_at is checked against.
	now func() time.Time
}

// ProducerOption adjusts the Producer New makes.
type ProducerOption func(*Producer)

// WithClock makes the Producer read the time from now (a test's clock)
// instead of the system's: deliver_at is checked against it.
func WithClock(now func() time.Time) ProducerOption {
	return func(p *Producer) { p.now = now }
}

// New returns a Producer that enqueues on the given Redis (the one
// webhookd's workers use).
func New(opt asynq.RedisConnOpt, opts ...ProducerOption) *Producer {
	rdb, _ := opt.MakeRedisClient().(redis.UniversalClient) // every asynq option makes one
	p := &Producer{client: asynq.NewClient(opt), inspector: asynq.NewInspector(opt), redis: rdb, now: time.Now}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Close releases the Redis connections.
func (p *Producer) Close() error {
	return errors.Join(p.client.Close(), p.inspector.Close(), p.redis.Close())
}

// Publish enqueues one event. It returns once Redis holds the task; the
// worker stores the event moments later. The asynq TaskID is derived from
// the event id, so that publishing the same id again while the first task
// waits is a no-op, and once it ran, the stored event id makes it one. A
// task of that id that asynq archived is run again: a re-publish is never
// swallowed by a task that will not run.
func (p *Producer) Publish(ctx context.Context, e Event) error {
	task, err := newTask(ctx, &e, p.now())
	if err != nil {
		return err
	}
	_, err = p.client.EnqueueContext(ctx, task)
	if !errors.Is(err, asynq.ErrTaskIDConflict) {
		if err != nil {
			return fmt.Errorf("publish event %s: %w", e.ID, err)
		}
		return nil
	}
	info, err := p.inspector.GetTaskInfo(Queue, taskID(e.ID))
	switch {
	case errors.Is(err, asynq.ErrTaskNotFound):
		// Finished between the enqueue and the look: the event is stored.
		return nil
	case err != nil:
		return fmt.Errorf("publish event %s: look at its task: %w", e.ID, err)
	case info.State == asynq.TaskStateArchived:
		if err := p.inspector.RunTask(Queue, taskID(e.ID)); err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
			return fmt.Errorf("publish event %s: run its archived task again: %w", e.ID, err)
		}
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

// Refusal says why webhookd refused the event, or nil when it did not (it
// was stored, is still on its way, or was refused more than RefusalTTL
// ago).
func (p *Producer) Refusal(ctx context.Context, eventID string) (*Refused, error) {
	b, err := p.redis.Get(ctx, refusalKey(eventID)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("refusal of %s: %w", eventID, err)
	}
	var r Refused
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("refusal of %s: %w", eventID, err)
	}
	return &r, nil
}

// textRule is the first field of e holding text webhookd cannot store (a
// NUL, or text that is not UTF-8, which encoding the task would replace
// with U+FFFD for a string and keep for the payload), as HTTP ingest names
// it: merchant_id, type, api_version, or the payload's member at fault
// (payload.customer.name). Refused here, it never reaches a worker.
func textRule(e *Event) *invalid.Error {
	for _, f := range []struct{ param, value string }{
		{"merchant_id", e.MerchantID}, {"type", e.Type}, {"api_version", e.APIVersion},
	} {
		if bad := invalid.Text(f.param, f.value); bad != nil {
			return bad
		}
	}
	return invalid.JSON("payload", e.Payload)
}

// taskID is the asynq TaskID of an event's ingest task.
func taskID(eventID string) string { return "e:" + eventID }

// newTask builds the ingest task of e at now (the core API's clock),
// giving it an id if it has none, with ctx's trace context (TaskTrace).
func newTask(ctx context.Context, e *Event, now time.Time) (*asynq.Task, error) {
	if e.ID == "" {
		id, err := uuid.NewV7()
		if err != nil {
			return nil, fmt.Errorf("publish event: %w", err)
		}
		e.ID = id.String()
	} else if _, bad := invalid.UUID("id", RuleIDNotUUID, e.ID); bad != nil {
		// Only the hyphenated form: the id is the webhook-id receivers see.
		return nil, &Refused{Param: bad.Param, Rule: bad.Rule, Message: bad.Message}
	}
	switch payload := bytes.TrimSpace(e.Payload); {
	case len(payload) == 0:
		return nil, &Refused{Param: "payload", Rule: RuleMissing, Message: "payload is required."}
	case !json.Valid(payload):
		return nil, &Refused{Param: "payload", Rule: RulePayloadNotJSON, Message: "payload is not valid JSON."}
	}
	if bad := textRule(e); bad != nil {
		return nil, &Refused{Param: bad.Param, Rule: bad.Rule, Message: bad.Message}
	}
	// The core API's clock: the worker stores the event moments later, and
	// delivers it at once if deliver_at passed meanwhile.
	if bad := CheckDeliverAt(e.DeliverAt, now); bad != nil {
		return nil, &Refused{Param: bad.Param, Rule: bad.Rule, Message: bad.Message}
	}
	b, err := json.Marshal(taskPayload{Event: e, TaskTrace: traceOf(ctx)})
	if err != nil {
		return nil, fmt.Errorf("publish event %s: %w", e.ID, err)
	}
	return asynq.NewTask(TaskIngest, b, asynq.Queue(Queue), asynq.TaskID(taskID(e.ID)), asynq.MaxRetry(maxRetry)), nil
}
