package admin

import (
	"context"
	"encoding/json"

	"github.com/webhookd/webhookd/store"
)

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
