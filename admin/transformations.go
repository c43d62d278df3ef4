package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher/deliver"
	"github.com/webhookd/webhookd/dispatcher/publish"
	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/internal/transform"
)

// Transformations compile and run merchants' transformations
// (internal/transform): when one is saved, and for the simulate route.
type Transformations interface {
	subscriptions.TransformationChecker
	// Simulate compiles code and runs it on in, sending nothing; it
	// returns what the handler made and how long the run took. A
	// *transform.Error is the code failing, told to the merchant.
	Simulate(ctx context.Context, code string, in transform.Input) (transform.Output, time.Duration, error)
}

// transformationChecker is t as the registry's checker: nil (no
// transformations) stays a nil interface.
func transformationChecker(t Transformations) subscriptions.TransformationChecker {
	if t == nil {
		return nil
	}
	return t
}

// simulationReads is what the simulate route reads.
type simulationReads interface {
	// GetSubscription reads the merchant's subscription.
	GetSubscription(ctx context.Context, merchantID string, id uuid.UUID) (store.Subscription, error)
	// GetEvent reads the merchant's event.
	GetEvent(ctx context.Context, merchantID string, id uuid.UUID) (store.Event, error)
}

// transformationHandlers serve the simulation of a subscription's
// transformation: what it would send for an event, nothing sent.
type transformationHandlers struct {
	reads           simulationReads
	transformations Transformations
	eventTypes      catalogue.Catalogue
	// changes shows the subscription's custom headers, masked: a
	// simulation never reveals their values.
	changes subscriptionChanges
	clock   clock.Clock
}

// simulationInput is the body of a simulation: code to run in place of
// the saved one (absent: the saved one), and the event to run it on, one
// of the merchant's (event_id) or the catalogue's example of a type
// (event_type).
type simulationInput struct {
	Code      *string `json:"code"`
	EventID   *string `json:"event_id"`
	EventType *string `json:"event_type"`
}

// simulationJSON is a simulation's answer: the input the handler got and
// what it returned, or where it failed.
type simulationJSON struct {
	Input      simulatedJSON  `json:"input"`
	Output     *simulatedJSON `json:"output"`
	Cancelled  bool           `json:"cancelled"`
	DurationMS float64        `json:"duration_ms"`
	// Error is where the code failed; null when it ran.
	Error *simulationErrorJSON `json:"error"`
}

// simulatedJSON is one side of a simulation: body, url and headers.
type simulatedJSON struct {
	Payload json.RawMessage   `json:"payload"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

// simulationErrorJSON is a transformation's failure: what, and where.
type simulationErrorJSON struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
}

// simulate answers what the subscription's transformation (or the code
// sent) makes of an event. A failure of the code is an answer, 200 with
// its error; a bad request is 400.
func (h transformationHandlers) simulate(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var in simulationInput
	if err := decodeJSON(r, &in); err != nil {
		return err
	}
	ctx := r.Context()
	merchant := principalOf(ctx).Merchant
	sub, err := h.reads.GetSubscription(ctx, merchant.ID, id)
	if err != nil {
		return err
	}
	if h.transformations == nil {
		return errInvalid("code", "Transformations are turned off on this server.")
	}
	code, err := simulatedCode(in, sub)
	if err != nil {
		return err
	}
	if err := h.transformations.Check(code); err != nil {
		var failed *transform.Error
		if errors.As(err, &failed) {
			writeJSON(w, http.StatusOK, simulationJSON{Error: simulationError(failed)})
			return nil
		}
		return err
	}
	body, err := h.simulatedBody(ctx, in, sub, merchant.ID)
	if err != nil {
		return err
	}
	input := transform.Input{EventType: body.eventType, Payload: body.payload, Headers: h.changes.maskedHeaders(ctx, sub)}
	if sub.Destination == nil {
		input.URL = sub.URL
	}
	out, took, err := h.transformations.Simulate(ctx, code, input)
	answer := simulationJSON{Input: simulatedJSON{Payload: input.Payload, URL: input.URL, Headers: nonNilHeaders(input.Headers)},
		DurationMS: float64(took.Microseconds()) / 1000}
	var failed *transform.Error
	switch {
	case errors.As(err, &failed):
		answer.Error = simulationError(failed)
	case err != nil:
		return err
	default:
		answer.Cancelled = out.Cancel
		answer.Output = &simulatedJSON{Payload: out.Payload, URL: out.URL, Headers: nonNilHeaders(out.Headers)}
	}
	writeJSON(w, http.StatusOK, answer)
	return nil
}

// simulatedCode is the code a simulation runs: the body's, else the
// subscription's saved one.
func simulatedCode(in simulationInput, sub store.Subscription) (string, error) {
	switch {
	case in.Code != nil:
		if len(*in.Code) > subscriptions.MaxTransformationBytes {
			return "", errInvalid("code", "code must be at most 65536 bytes.")
		}
		return *in.Code, nil
	case sub.Transformation != nil:
		return sub.Transformation.Code, nil
	default:
		return "", errInvalid("code", "The subscription has no transformation: send code to simulate one.")
	}
}

// simulatedEvent is the event a simulation runs on: its type and the
// body the subscription would send of it.
type simulatedEvent struct {
	eventType string
	payload   json.RawMessage
}

// simulatedBody is the body the subscription would send of the event the
// simulation names: one of the merchant's, or the catalogue's example.
func (h transformationHandlers) simulatedBody(ctx context.Context, in simulationInput, sub store.Subscription, merchantID string) (simulatedEvent, error) {
	var ev store.Event
	switch {
	case (in.EventID == nil) == (in.EventType == nil):
		return simulatedEvent{}, errInvalid("event_id", "Name the event to simulate with: event_id (one of yours) or event_type (its example), one of the two.")
	case in.EventID != nil:
		id, err := uuid.Parse(*in.EventID)
		if err != nil {
			return simulatedEvent{}, errInvalid("event_id", "event_id must be the id of one of your events.")
		}
		if ev, err = h.reads.GetEvent(ctx, merchantID, id); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return simulatedEvent{}, errInvalid("event_id", "event_id names no event of yours.")
			}
			return simulatedEvent{}, err
		}
	default:
		if !h.eventTypes.Stored(*in.EventType) {
			return simulatedEvent{}, errInvalid("event_type", "event_type must be a type of the event catalogue (GET /v1/event_types).")
		}
		now := h.clock.Now()
		body, err := publish.Envelope(uuid.New(), *in.EventType, principalOf(ctx).Merchant.APIVersion, h.eventTypes.Example(*in.EventType), now)
		if err != nil {
			return simulatedEvent{}, err
		}
		ev = store.Event{Type: *in.EventType, Body: body}
	}
	body, err := deliver.BodyFor(store.LeasedDelivery{Body: ev.Body, PayloadStyle: sub.PayloadStyle})
	if err != nil {
		return simulatedEvent{}, err
	}
	return simulatedEvent{eventType: ev.Type, payload: body}, nil
}

// simulationError is a failed run as the answer shows it.
func simulationError(e *transform.Error) *simulationErrorJSON {
	return &simulationErrorJSON{Code: "transformation_error", Message: e.Message, Line: e.Line, Column: e.Column}
}

// nonNilHeaders shows no headers as {}.
func nonNilHeaders(h map[string]string) map[string]string {
	if h == nil {
		return map[string]string{}
	}
	return h
}
