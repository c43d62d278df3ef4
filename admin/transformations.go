package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

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
// (internal/transform's Sandbox, or its Lazy): when one is saved, and
// for the simulate route. A *transform.Error is the code failing, told to the
// merchant.
type Transformations interface {
	subscriptions.TransformationCompiler
	// Run runs p's handler on in.
	Run(ctx context.Context, p *transform.Program, in transform.Input) (transform.Output, error)
}

// transformationCompiler is t as the registry's compiler: nil (no
// transformations) stays a nil interface.
func transformationCompiler(t Transformations) subscriptions.TransformationCompiler {
	if t == nil {
		return nil
	}
	return t
}

// simulatedSubscriptions is where the simulate route reads the
// subscription.
type simulatedSubscriptions interface {
	// GetSubscription reads the merchant's subscription.
	GetSubscription(ctx context.Context, merchantID string, id uuid.UUID) (store.Subscription, error)
}

// simulatedEvents is where the simulate route reads an event of the
// merchant's.
type simulatedEvents interface {
	// GetEvent reads the merchant's event.
	GetEvent(ctx context.Context, merchantID string, id uuid.UUID) (store.Event, error)
}

// transformationHandlers serve the simulation of a subscription's
// transformation: what it would send for an event, nothing sent.
type transformationHandlers struct {
	subscriptions   simulatedSubscriptions
	events          simulatedEvents
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

// simulationJSON is a simulation's answer (docs/transformations.md,
// "Simulate"): the webhook the handler got and what it returned, or
// where it failed.
type simulationJSON struct {
	// Outcome is transformed, cancelled or failed.
	Outcome string        `json:"outcome"`
	Input   simulatedJSON `json:"input"`
	// Output is what the handler returned; nil when it failed.
	Output    *simulatedJSON `json:"output"`
	RunTimeMS float64        `json:"run_time_ms"`
	// Error is where the code failed; nil when it ran.
	Error *simulationErrorJSON `json:"error"`
}

// simulatedJSON is the webhook on one side of a simulation.
type simulatedJSON struct {
	EventType string            `json:"event_type,omitempty"`
	Payload   json.RawMessage   `json:"payload"`
	URL       string            `json:"url"`
	Headers   map[string]string `json:"headers"`
	Cancel    *bool             `json:"cancel,omitempty"`
}

// simulationErrorJSON is a transformation's failure: what, and where
// (line and column null where it has no place in the code).
type simulationErrorJSON struct {
	Code    string         `json:"code"`
	Kind    transform.Kind `json:"kind"`
	Message string         `json:"message"`
	Line    *int           `json:"line"`
	Column  *int           `json:"column"`
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
	sub, err := h.subscriptions.GetSubscription(ctx, merchant.ID, id)
	if err != nil {
		return err
	}
	body, err := h.simulatedBody(ctx, in, sub, merchant.ID)
	if err != nil {
		return err
	}
	code, err := simulatedCode(in, sub)
	if err != nil {
		return err
	}
	if h.transformations == nil {
		return errInvalid("code", "Transformations are turned off on this server.")
	}
	input := transform.Input{EventType: body.eventType, Payload: body.payload, Headers: h.changes.maskedHeaders(ctx, sub)}
	if sub.Destination == nil {
		input.URL = sub.URL
	}
	started := h.clock.Now()
	out, err := h.simulated(ctx, code, input)
	answer := simulationJSON{Outcome: "transformed",
		Input:     simulatedJSON{EventType: input.EventType, Payload: input.Payload, URL: input.URL, Headers: nonNilHeaders(input.Headers)},
		RunTimeMS: float64(h.clock.Now().Sub(started).Microseconds()) / 1000}
	var failed *transform.Error
	switch {
	case errors.As(err, &failed):
		answer.Outcome, answer.Error = "failed", simulationError(failed)
	case err != nil:
		return err
	default:
		if out.Cancel {
			answer.Outcome = "cancelled"
		}
		answer.Output = &simulatedJSON{Payload: out.Payload, URL: out.URL, Headers: nonNilHeaders(out.Headers), Cancel: &out.Cancel}
	}
	writeJSON(w, http.StatusOK, answer)
	return nil
}

// simulated compiles code and runs it on in.
func (h transformationHandlers) simulated(ctx context.Context, code string, in transform.Input) (transform.Output, error) {
	p, err := h.transformations.Compile(ctx, code)
	if err != nil {
		return transform.Output{}, err
	}
	return h.transformations.Run(ctx, p, in)
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
	case in.EventID == nil && in.EventType == nil:
		return simulatedEvent{}, errMissing("event_id")
	case in.EventID != nil && in.EventType != nil:
		return simulatedEvent{}, errInvalid("event_type", "Name the event to simulate with one of event_id (one of yours) and event_type (its example), not both.")
	case in.EventID != nil:
		id, err := parseID(*in.EventID)
		if err != nil {
			return simulatedEvent{}, err
		}
		if ev, err = h.events.GetEvent(ctx, merchantID, id); err != nil {
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
	payload, err := deliver.TransformedPayload(store.LeasedDelivery{Body: ev.Body, PayloadStyle: sub.PayloadStyle})
	if err != nil {
		return simulatedEvent{}, err
	}
	return simulatedEvent{eventType: ev.Type, payload: payload}, nil
}

// simulationError is a failed run as the answer shows it.
func simulationError(e *transform.Error) *simulationErrorJSON {
	out := &simulationErrorJSON{Code: transform.ErrorCode, Kind: e.Kind, Message: e.Message}
	if e.Line > 0 {
		out.Line, out.Column = &e.Line, &e.Column
	}
	return out
}

// nonNilHeaders shows no headers as {}.
func nonNilHeaders(h map[string]string) map[string]string {
	if h == nil {
		return map[string]string{}
	}
	return h
}
