package admin

import (
	"bytes"
	"encoding/json"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
)

// optionalInt tells a field that is absent from one that is null, so that
// an update can clear a rate limit.
type optionalInt struct {
	Set   bool
	Value *int
}

// UnmarshalJSON records that the field was present; null clears it.
func (o *optionalInt) UnmarshalJSON(b []byte) error {
	o.Set = true
	if string(bytes.TrimSpace(b)) == "null" {
		o.Value = nil
		return nil
	}
	var v int
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	o.Value = &v
	return nil
}

// rawField keeps a field's JSON as sent, for a rule of the domain to read
// (the ordering, "none" or an object): the domain names what is wrong
// with it, which a type error could not.
type rawField struct {
	Set bool
	Raw json.RawMessage
}

// UnmarshalJSON keeps the value.
func (f *rawField) UnmarshalJSON(b []byte) error {
	f.Set, f.Raw = true, append(json.RawMessage(nil), b...)
	return nil
}

// bytes is the value sent, nil when absent.
func (f rawField) bytes() []byte {
	if !f.Set {
		return nil
	}
	return f.Raw
}

// controlsView is the delivery controls as both surfaces show them.
func controlsView(sub store.Subscription) (rateLimit *int, ordering any) {
	return sub.RateLimit, subscriptions.OrderingView(sub.OrderingKey)
}

// optionalHeaders tells a headers field that is absent from one that is
// null (clear every header) or an object (replace them all).
type optionalHeaders struct {
	Set   bool
	Value map[string]string
}

// UnmarshalJSON records that the field was present; null clears it.
func (o *optionalHeaders) UnmarshalJSON(b []byte) error {
	o.Set = true
	if string(b) == "null" {
		o.Value = nil
		return nil
	}
	return json.Unmarshal(b, &o.Value)
}
