package admin

import (
	"bytes"
	"context"
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

// subscriptionView is the Banking resource with its headers masked.
func (s *Server) subscriptionView(ctx context.Context, sub store.Subscription) subscriptionJSON {
	v := subscriptionView(sub)
	v.Headers = s.maskedHeaders(ctx, sub)
	return v
}

// maskedHeaders shows a subscription's header names with masked values,
// or nil when it has none. Headers that cannot be opened (a master key
// changed without re-sealing) are logged, without their values, and shown
// as none rather than failing the read of the rest of the subscription.
func (s *Server) maskedHeaders(ctx context.Context, sub store.Subscription) map[string]string {
	h, err := s.subscriptions.MaskedHeaders(sub)
	if err != nil {
		s.logger.ErrorContext(ctx, "open subscription headers", "subscription_id", sub.ID, "error", err)
		return nil
	}
	return h
}
