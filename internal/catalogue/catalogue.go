// Package catalogue describes the event types webhookd delivers: what each
// one means and an example of its payload. The portal's event catalogue,
// GET /v1/event_types and `webhookd trigger` all read it, so a merchant sees
// one description and one example wherever they look.
//
// It is also the one authority on event types: a Catalogue, built from a
// deployment's vocabulary, tells which types may be published, subscribed
// to, triggered or filtered by, and words every refusal.
package catalogue

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/webhookd/webhookd/internal/invalid"
)

// TestType is the event type of send_test_event and of the endpoint check
// (spec 6.1). It is reserved: no vocabulary holds it, producers cannot
// publish it and subscriptions cannot name it, yet stored events have it.
const TestType = "ping.test"

// The rules of an event type, as they name themselves in an *invalid.Error
// (and in the publisher's webhookd_events_refused_total{rule}).
const (
	// RuleTypeReserved refuses a published event of TestType.
	RuleTypeReserved = "type_reserved"
	// RuleTypeUnknown refuses an event type not in the vocabulary.
	RuleTypeUnknown = "type_unknown"
	// RuleEventsTestType refuses TestType in a subscription's events.
	RuleEventsTestType = "events_test_type"
	// RuleEventTypeUnknown refuses an unknown type in a subscription's
	// events.
	RuleEventTypeUnknown = "event_type_unknown"
)

// Catalogue is the event vocabulary of one deployment: the types of
// Default plus those the operator configured (WEBHOOKD_EVENT_TYPES). Every
// check of an event type asks it. The zero Catalogue knows no type.
type Catalogue struct {
	names []string
}

// New is the catalogue of the vocabulary names, copied; Validate says
// whether an engine can serve it.
func New(names []string) Catalogue { return Catalogue{names: slices.Clone(names)} }

// Validate refuses a vocabulary that is empty or holds TestType.
func (c Catalogue) Validate() error {
	switch {
	case len(c.names) == 0:
		return errors.New("EventTypes is required")
	case slices.Contains(c.names, TestType):
		return fmt.Errorf("%s is reserved for send_test_event", TestType)
	case slices.ContainsFunc(c.names, IsOperational):
		return errors.New("the operational event types (webhook_endpoint.*, webhook_delivery.*) are webhookd's own: the vocabulary cannot hold them")
	}
	return nil
}

// Names returns the vocabulary, in order, a fresh slice.
func (c Catalogue) Names() []string { return slices.Clone(c.names) }

// Publishable tells whether producers may publish events of type t: a type
// of the vocabulary other than TestType.
func (c Catalogue) Publishable(t string) bool { return t != TestType && slices.Contains(c.names, t) }

// Subscribable tells whether a subscription may name type t: every
// publishable type and every operational one is, TestType never (its
// events reach their subscription whatever it names).
func (c Catalogue) Subscribable(t string) bool { return c.Publishable(t) || IsOperational(t) }

// IsTest tells whether t is TestType, which only webhookd itself sends.
func IsTest(t string) bool { return t == TestType }

// Stored tells whether an event of type t can be stored: a publishable type,
// an operational one or TestType.
func (c Catalogue) Stored(t string) bool { return IsTest(t) || IsOperational(t) || c.Publishable(t) }

// Entries returns the entries of the vocabulary (For), then the
// operational types, then Test: what merchants are shown.
func (c Catalogue) Entries() []EventType {
	return append(append(For(c.names), Operational()...), Test())
}

// Example is the example payload of type t (see For).
func (c Catalogue) Example(t string) json.RawMessage { return For([]string{t})[0].Example }

// CheckPublish is the refusal of a published event's type, under param, or
// nil when producers may publish it.
func (c Catalogue) CheckPublish(param, t string) *invalid.Error {
	switch {
	case t == "":
		return invalid.Missing(param)
	case IsTest(t):
		return invalid.Value(param, RuleTypeReserved, unknownReserved(t))
	case IsOperational(t):
		return invalid.Value(param, RuleTypeOperational, operationalOnly(t))
	case !c.Publishable(t):
		return invalid.Value(param, RuleTypeUnknown, unknownReserved(t))
	}
	return nil
}

// unknownReserved is the message of a type a producer may not publish.
func unknownReserved(t string) string {
	return fmt.Sprintf("Unknown event type %s; %s is reserved for send_test_event.", invalid.Quote(t), TestType)
}

// operationalOnly is the message of an operational type published or
// triggered.
func operationalOnly(t string) string {
	return fmt.Sprintf("%s is an operational event type: only webhookd sends it, about a subscription.", t)
}

// CheckSubscribe is the refusal of type t in a subscription's events,
// under param, or nil when it may be subscribed to.
func (c Catalogue) CheckSubscribe(param, t string) *invalid.Error {
	switch {
	case IsTest(t):
		return invalid.Value(param, RuleEventsTestType,
			TestType+" cannot be subscribed to: send_test_event delivers it to its subscription whatever the events list.")
	case !c.Subscribable(t):
		return invalid.Value(param, RuleEventTypeUnknown, fmt.Sprintf("Unknown event type %s; see the event catalogue.", invalid.Quote(t)))
	}
	return nil
}

// CheckTrigger is the refusal of type t for an event triggered by hand in
// the sandbox, under param, or nil when it is publishable.
func (c Catalogue) CheckTrigger(param, t string) *invalid.Error {
	if IsTest(t) {
		// GET /v1/event_types lists it (the portal sends it), so "unknown"
		// would be wrong: it goes to one endpoint, by its own route.
		return invalid.Value(param, RuleTypeReserved, TestType+" is sent to one endpoint at a time: "+
			"POST /v1/webhook_subscriptions/{id}/send_test_event. Trigger any other type GET /v1/event_types lists.")
	}
	if IsOperational(t) {
		return invalid.Value(param, RuleTypeOperational, operationalOnly(t))
	}
	if !c.Publishable(t) {
		return invalid.Value(param, RuleTypeUnknown, "Unknown event type "+invalid.Quote(t)+"; GET /v1/event_types lists them.")
	}
	return nil
}

// CheckFilter is the refusal of type t as a filter of stored events, under
// param, or nil when events of it can be stored (Stored).
func (c Catalogue) CheckFilter(param, t string) *invalid.Error {
	if !c.Stored(t) {
		return invalid.Value(param, RuleTypeUnknown, fmt.Sprintf("Unknown %s %q.", param, t))
	}
	return nil
}

// EventType is one entry of the catalogue.
type EventType struct {
	// Name is the type as it appears in an envelope, e.g. "payout.paid".
	Name string `json:"name"`
	// Description says when the event fires.
	Description string `json:"description"`
	// Example is a payload of this type, as the envelope's data carries it.
	Example json.RawMessage `json:"example"`
	// Subscribable is false for ping.test alone: webhookd sends it to one
	// subscription on request, and no subscription may name it.
	Subscribable bool `json:"subscribable"`
	// Schema is the JSON Schema (SchemaDialect) of Example's shape: the
	// payload of every event of this type. GET /v1/event_types/{name}
	// shows it; the list leaves it out (the AsyncAPI document has them
	// all).
	Schema json.RawMessage `json:"schema,omitempty"`
}

// payout is the example payout snapshot of the payout events, as
// docs/events.md shows it; status and failure follow the event.
func payout(status string) json.RawMessage {
	p := map[string]any{
		"id": "3f1c9a52-2b7e-4d0a-9a51-0c6f7e2d8b14", "type": "payout", "status": status,
		"amount": "1250.00", "currency": "EUR", "reference": "Invoice 2026-118",
		"source_account_id": "8d2e4f10-6a3b-4c5d-9e7f-1a2b3c4d5e6f",
		"destination": map[string]any{"type": "iban", "iban": "DE89370400440532013000", "bic": "COBADEFFXXX",
			"account_holder_name": "Example GmbH"},
		"failure": failure(status), "metadata": map[string]string{"order_id": "A-1009"},
		"created_at": "2026-11-23T09:12:41Z", "updated_at": "2026-11-23T09:14:05Z",
	}
	return object(p)
}

// refund is the example return of an earlier deposit, for the return
// events.
func refund(status string) json.RawMessage {
	return object(map[string]any{
		"id": "b7a0d3e1-5c2f-4e8a-8b19-2d3e4f5a6b7c", "type": "return", "status": status,
		"deposit_id": "5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9", "amount": "80.00", "currency": "GBP",
		"reason": "requested_by_customer", "failure": failure(status), "metadata": map[string]string{},
		"created_at": "2026-11-23T10:02:00Z", "updated_at": "2026-11-23T10:02:00Z",
	})
}

// failure is the failure object of a failed resource, null otherwise.
func failure(status string) any {
	if status != "failed" {
		return nil
	}
	return map[string]any{"code": "account_closed", "message": "The destination account is closed.", "retry": false}
}

// object marshals an example payload.
func object(v map[string]any) json.RawMessage {
	b, _ := json.Marshal(v) // a map of JSON values always marshals
	return b
}

// Default returns the catalogue, in the order docs/events.md lists it; its
// examples are the ones docs/events.md shows. ping.test, the
// synthetic event of send_test_event, is not in it: merchants cannot
// publish or subscribe to it by name.
func Default() []EventType {
	deposit := object(map[string]any{
		"id": "5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9", "type": "deposit", "status": "received",
		"account_id": "8d2e4f10-6a3b-4c5d-9e7f-1a2b3c4d5e6f", "amount": "80.00", "currency": "GBP",
		"rail":                   "faster_payments",
		"sender":                 map[string]any{"name": "Jane Doe", "sort_code": "040004", "account_number": "12345678"},
		"remittance_information": "Order A-1009", "metadata": map[string]string{},
		"created_at": "2026-11-23T08:30:12Z", "updated_at": "2026-11-23T08:30:12Z",
	})
	conversion := func(status string) json.RawMessage {
		return object(map[string]any{
			"id": "c2d3e4f5-a6b7-4c8d-9e0f-1a2b3c4d5e6f", "type": "conversion", "status": status,
			"source_account_id": "8d2e4f10-6a3b-4c5d-9e7f-1a2b3c4d5e6f", "target_account_id": "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
			"source_amount": "1000.00", "source_currency": "EUR", "target_amount": "1084.20", "target_currency": "USD",
			"rate": "1.0842", "failure": failure(status), "metadata": map[string]string{},
			"created_at": "2026-11-23T11:00:00Z", "updated_at": "2026-11-23T11:00:03Z",
		})
	}
	return []EventType{
		{"payout.created", "A payout is created and queued.", payout("created"), true, schemaOf("payout", "created")},
		{"payout.initiated", "The payout was sent to the payment rail.", payout("initiated"), true, schemaOf("payout", "initiated")},
		{"payout.paid", "The payout settled at the destination.", payout("paid"), true, schemaOf("payout", "paid")},
		{"payout.failed", "The payout could not be completed; payload.failure holds the details.", payout("failed"), true, schemaOf("payout", "failed")},
		{"return.initiated", "A return of a previous deposit is queued.", refund("initiated"), true, schemaOf("return", "initiated")},
		{"return.paid", "The return settled at the destination.", refund("paid"), true, schemaOf("return", "paid")},
		{"return.failed", "The return could not be completed.", refund("failed"), true, schemaOf("return", "failed")},
		{"return.returned", "A paid return was reversed and the funds were credited back.", refund("returned"), true, schemaOf("return", "returned")},
		{"deposit.received", "An incoming transfer was credited to an account.", deposit, true, schemaOf("deposit", "received")},
		{"conversion.created", "A currency conversion is queued.", conversion("created"), true, schemaOf("conversion", "created")},
		{"conversion.succeeded", "The conversion completed and the funds are available in the target account.", conversion("succeeded"), true, schemaOf("conversion", "succeeded")},
		{"conversion.failed", "The conversion could not be completed.", conversion("failed"), true, schemaOf("conversion", "failed")},
	}
}

// Test is ping.test, the synthetic event of send_test_event and of the
// endpoint check: listed so merchants know its shape, never subscribable.
func Test() EventType {
	return EventType{Name: TestType, Subscribable: false,
		Description: "A test event sent on request to one subscription (send_test_event, Check my endpoint); handlers may ignore it.",
		Example: object(map[string]any{"subscription_id": "0193a5e0-1111-7a2b-8c3d-4e5f6a7b8c9d",
			"message": "This is a test event sent by webhookd. Handlers may ignore it."}),
		Schema: schemaOf("ping", "")}
}

// Names returns the names of Default, in order.
func Names() []string {
	var names []string
	for _, t := range Default() {
		names = append(names, t.Name)
	}
	return names
}

// For returns the entries of the given types, in the order given: those
// of Default and Operational as they are, and a type the operator added
// (WEBHOOKD_EVENT_TYPES) with a generic description, an empty example and
// a schema of any object.
func For(names []string) []EventType {
	known := append(Default(), Operational()...)
	out := make([]EventType, 0, len(names))
	for _, n := range names {
		i := slices.IndexFunc(known, func(t EventType) bool { return t.Name == n })
		if i >= 0 {
			out = append(out, known[i])
			continue
		}
		out = append(out, EventType{Name: n, Description: "An event type this deployment adds to the standard catalogue.",
			Example: json.RawMessage(`{}`), Subscribable: true, Schema: addedSchema()})
	}
	return out
}
