package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/producer"
)

// Publisher is what the HTTP surfaces need of the delivery pipeline.
type Publisher interface {
	// Check applies every rule of a published event without publishing
	// it; a broken rule is an *invalid.Error.
	Check(e producer.Event) error
	// Publish checks the event, stores it and its deliveries in one
	// transaction and schedules them; created is false when the event id
	// already existed.
	Publish(ctx context.Context, e producer.Event) (ev store.Event, created bool, err error)
	// PublishAll is Publish for a batch, in its order, written together:
	// every event is checked first, and if any breaks a rule none is
	// published; one event, created flag and error per event.
	PublishAll(ctx context.Context, es []producer.Event) (evs []store.Event, created []bool, errs []error)
	// Redeliver enqueues one immediate manual attempt of a delivery, which
	// a worker makes and appends to its attempts.
	Redeliver(ctx context.Context, merchantID string, deliveryID uuid.UUID) (store.Delivery, error)
	// Recover replays the subscription's deliveries that failed for good
	// since a time, one manual attempt each, and says how many.
	Recover(ctx context.Context, merchantID string, subscriptionID uuid.UUID, since time.Time) (int, error)
	// SendTestEvent stores a ping.test event for one subscription and
	// schedules its delivery.
	SendTestEvent(ctx context.Context, merchantID string, subscriptionID uuid.UUID) (store.Delivery, error)
	// DropSubscription ends the waiting work of a subscription just
	// deleted or disabled (its pending deliveries end failed, its parked
	// attempts leave the schedule); a failure is no loss, each attempt
	// then ends when it comes up.
	DropSubscription(ctx context.Context, merchantID string, subscriptionID uuid.UUID) error
}

// maxBatchEvents bounds one batch publish, so that one request stays well
// inside the request timeout.
const maxBatchEvents = 100

// batchPublisher publishes events one at a time or in a batch (the
// Publisher is one).
type batchPublisher interface {
	eventPublisher
	PublishAll(ctx context.Context, es []producer.Event) (evs []store.Event, created []bool, errs []error)
}

// ingestHandlers serve the core API's publishing routes, POST
// /internal/v1/events and /events/batch. They are separate from the
// merchant's event routes because they publish for any merchant, on the
// ingest token, and answer whether each event was new.
type ingestHandlers struct {
	publisher batchPublisher
}

// ingestRequest is the body of POST /internal/v1/events, one element of a
// batch. Pointers tell a missing field from an empty one.
type ingestRequest struct {
	ID         *string         `json:"id"`
	MerchantID *string         `json:"merchant_id"`
	Type       *string         `json:"type"`
	Payload    json.RawMessage `json:"payload"`
	APIVersion *string         `json:"api_version"`
	// DeliverAt schedules the event (scheduled.go).
	DeliverAt *string `json:"deliver_at"`
}

// ingestBatchRequest is the body of POST /internal/v1/events/batch.
type ingestBatchRequest struct {
	Events []ingestRequest `json:"events"`
}

// event is the request as the publisher reads it. The rules are the
// publisher's; this only keeps an id or api_version sent empty from
// meaning "absent", which they mean to the publisher.
func (req ingestRequest) event() (producer.Event, error) {
	e := producer.Event{MerchantID: deref(req.MerchantID), Type: deref(req.Type), Payload: req.Payload,
		ID: deref(req.ID), APIVersion: deref(req.APIVersion)}
	if req.ID != nil && *req.ID == "" {
		return e, invalid.NotUUID("id", producer.RuleIDNotUUID)
	}
	if req.APIVersion != nil && *req.APIVersion == "" {
		return e, invalid.Value("api_version", "api_version_unknown", `Unknown or sunset api_version "".`)
	}
	at, err := parseDeliverAt(req.DeliverAt)
	e.DeliverAt = at
	return e, err
}

// deref is *s, or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// publish publishes one event: 202 once it is durable, 200 when the id
// was already published (nothing changes).
func (h ingestHandlers) publish(w http.ResponseWriter, r *http.Request) error {
	var req ingestRequest
	if err := decodeJSONOnePass(r, &req); err != nil {
		return err
	}
	e, err := req.event()
	if err != nil {
		return err
	}
	ev, created, err := h.publisher.Publish(r.Context(), e)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusAccepted
	}
	writeJSON(w, status, eventView(ev))
	return nil
}

// publishBatch publishes up to maxBatchEvents events: all are checked
// before any is published, then all are published together, in order (one
// group commit). The answer is 202 if any event was new and 200 if all were
// already published; data lists the events in request order. A failure
// answers the first event's error: the other events may be stored, and
// retrying the batch is safe because publishing is idempotent on the id.
func (h ingestHandlers) publishBatch(w http.ResponseWriter, r *http.Request) error {
	var req ingestBatchRequest
	if err := decodeJSONOnePass(r, &req); err != nil {
		return err
	}
	switch {
	case req.Events == nil:
		return errMissing("events")
	case len(req.Events) == 0 || len(req.Events) > maxBatchEvents:
		return errInvalid("events", fmt.Sprintf("events must hold 1 to %d events.", maxBatchEvents))
	}
	events := make([]producer.Event, len(req.Events))
	for i, in := range req.Events {
		e, err := in.event()
		if bad := invalid.As(err); bad != nil {
			return bad.Within(fmt.Sprintf("events[%d].", i))
		}
		events[i] = e
	}
	// PublishAll checks every event before it publishes any.
	status := http.StatusOK
	data := make([]eventJSON, 0, len(events))
	evs, created, errs := h.publisher.PublishAll(r.Context(), events)
	for i, err := range errs {
		if bad := invalid.As(err); bad != nil {
			return bad.Within(fmt.Sprintf("events[%d].", i))
		}
		if err != nil {
			return err
		}
	}
	for i, ev := range evs {
		if created[i] {
			status = http.StatusAccepted
		}
		data = append(data, eventView(ev))
	}
	writeJSON(w, status, map[string]any{"data": data})
	return nil
}
