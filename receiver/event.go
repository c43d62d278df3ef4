package receiver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrMalformedEvent reports a body that is correctly signed but is not an
// event envelope: not JSON, a field missing or of the wrong type, or an id
// other than the webhook-id header.
var ErrMalformedEvent = errors.New("receiver: malformed event")

// Event is one delivered event: the envelope webhookd sends as the body of
// every delivery.
type Event struct {
	// ID is the event id, equal to the webhook-id header; the same on every
	// attempt and redelivery. Deduplicate on it.
	ID string `json:"id"`
	// Type is the event type, such as "payout.paid".
	Type string `json:"type"`
	// APIVersion is the API version Payload was written at; fixed when the
	// event was created.
	APIVersion string `json:"api_version"`
	// Payload is the resource as it was when the event happened, as raw
	// JSON: decode it into the type of your API version. Empty in a thin
	// delivery, which carries Object instead.
	Payload json.RawMessage `json:"payload"`
	// Object is what a thin delivery (a subscription with payload_style
	// "thin") carries in place of Payload: the resource the event is
	// about, to be read through the API. nil in a full delivery.
	Object *Object `json:"data"`
	// Date is when the event was created.
	Date time.Time `json:"date"`
	// Attempted is the webhook-timestamp of the delivery attempt that
	// carried the event: a retry or redelivery has a later one.
	Attempted time.Time `json:"-"`
}

// ParseEvent decodes a verified delivery body into an Event. Unknown
// envelope fields are ignored, so that a field added later breaks nothing.
func ParseEvent(body []byte) (*Event, error) {
	var ev Event
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&ev); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedEvent, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the envelope", ErrMalformedEvent)
	}
	switch {
	case ev.ID == "":
		return nil, fmt.Errorf("%w: no id", ErrMalformedEvent)
	case ev.Type == "":
		return nil, fmt.Errorf("%w: no type", ErrMalformedEvent)
	case (len(ev.Payload) == 0 || string(ev.Payload) == "null") && ev.Object == nil:
		return nil, fmt.Errorf("%w: no payload", ErrMalformedEvent)
	}
	return &ev, nil
}

// Object is the resource a thin delivery names. Both fields are empty when
// the event names no object (ping.test, say).
type Object struct {
	// ID is the resource's id, such as a payout's.
	ID string `json:"object_id"`
	// Type is the resource's kind, such as "payout".
	Type string `json:"object_type"`
}

// Resource is what an event's payload says about the resource it
// describes: enough to order events about one resource.
type Resource struct {
	// Kind is the payload's "type" ("payout", "return"), or the event
	// type's part before the dot when the payload has none.
	Kind string
	// ID is the payload's "id".
	ID string
	// Status is the payload's "status"; empty when it has none.
	Status string
}

// Key identifies the resource across kinds: "payout:3f1c…".
func (r Resource) Key() string { return r.Kind + ":" + r.ID }

// Resource reads the kind, id and status of the resource in the event's
// payload. It fails when the payload is not an object with a string "id".
func (e *Event) Resource() (Resource, error) {
	if len(e.Payload) == 0 && e.Object != nil {
		// A thin delivery carries no status: the resource read through
		// the API is current whatever order its events arrive in.
		if e.Object.ID == "" {
			return Resource{}, fmt.Errorf("resource of event %s: %w: no object", e.ID, ErrMalformedEvent)
		}
		return Resource{Kind: e.Object.Type, ID: e.Object.ID}, nil
	}
	var p struct {
		Type   string `json:"type"`
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(e.Payload, &p); err != nil {
		return Resource{}, fmt.Errorf("resource of event %s: %w: %w", e.ID, ErrMalformedEvent, err)
	}
	if p.ID == "" {
		return Resource{}, fmt.Errorf("resource of event %s: %w: payload has no id", e.ID, ErrMalformedEvent)
	}
	kind := p.Type
	if kind == "" {
		kind, _, _ = strings.Cut(e.Type, ".")
	}
	return Resource{Kind: kind, ID: p.ID, Status: p.Status}, nil
}
