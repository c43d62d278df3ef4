package deliver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/webhookd/webhookd/internal/store"
)

// Thin deliveries are shaped here, at the attempt, from the stored
// envelope, and not at fan-out: an event is stored once, one envelope for
// every subscription it reaches, and its bytes are never rewritten; an
// attempt reads the subscription's payload style when it leases, so that a
// subscription switched to thin (or back) sends its retries and
// redeliveries in the new style too, and a thin body costs one small JSON
// read per attempt of a thin subscription only. The signature is made over
// the body as sent, whichever it is.

// thinEnvelope is the body of a thin delivery: the envelope's fields, in
// its order, with a reference to the event's object (data) in place of its
// payload. The raw fields are copied from the stored envelope, never
// re-serialised.
type thinEnvelope struct {
	ID         json.RawMessage `json:"id"`
	Type       json.RawMessage `json:"type"`
	APIVersion json.RawMessage `json:"api_version"`
	Data       thinObject      `json:"data"`
	Date       json.RawMessage `json:"date"`
}

// thinObject names the resource an event is about: object_id is the
// payload's "id" and object_type its "type", or the event type's part
// before the dot when the payload has none ("payout" for payout.paid).
// Both are null when the payload names no object (its "id" is not a
// non-empty string): ping.test, or a type a deployment added whose
// payloads carry no id.
type thinObject struct {
	ObjectID   *string `json:"object_id"`
	ObjectType *string `json:"object_type"`
}

// BodyFor is what an attempt of leased sends: the stored envelope, or its
// thin form when the subscription asks for thin payloads. The endpoint
// check sends its deliveries by it too.
func BodyFor(leased store.LeasedDelivery) ([]byte, error) {
	if leased.PayloadStyle != store.PayloadThin {
		return leased.Body, nil
	}
	return thinBody(leased.Body)
}

// thinBody is the thin form of a stored envelope.
func thinBody(envelope []byte) ([]byte, error) {
	var env struct {
		ID         json.RawMessage `json:"id"`
		Type       json.RawMessage `json:"type"`
		APIVersion json.RawMessage `json:"api_version"`
		Payload    json.RawMessage `json:"payload"`
		Date       json.RawMessage `json:"date"`
	}
	if err := json.Unmarshal(envelope, &env); err != nil {
		return nil, fmt.Errorf("thin body: read envelope: %w", err)
	}
	var eventType string
	_ = json.Unmarshal(env.Type, &eventType) // a stored type is a string
	out := thinEnvelope{ID: env.ID, Type: env.Type, APIVersion: env.APIVersion, Date: env.Date,
		Data: objectOf(eventType, env.Payload)}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, fmt.Errorf("thin body: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// objectOf reads the object a payload describes (see thinObject).
func objectOf(eventType string, payload json.RawMessage) thinObject {
	var p struct {
		ID   any `json:"id"`
		Type any `json:"type"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return thinObject{}
	}
	id, ok := p.ID.(string)
	if !ok || id == "" {
		return thinObject{}
	}
	kind, ok := p.Type.(string)
	if !ok || kind == "" {
		kind, _, _ = strings.Cut(eventType, ".")
	}
	return thinObject{ObjectID: &id, ObjectType: &kind}
}
