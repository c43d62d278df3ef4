package catalogue

import (
	"encoding/json"
)

// The operational event types: webhookd itself publishes them, to the
// merchant's other subscriptions, about one of its subscriptions
// (dispatcher/notify.Emitter; docs/events.md, Operational events).
// Merchants subscribe to them like any type; producers cannot publish them.
const (
	// EndpointDisabled: a subscription was disabled.
	EndpointDisabled = "webhook_endpoint.disabled"
	// EndpointEnabled: a disabled subscription was enabled again.
	EndpointEnabled = "webhook_endpoint.enabled"
	// DeliveryExhausted: a delivery failed for good.
	DeliveryExhausted = "webhook_delivery.exhausted"
	// CertificateExpiring: an mtls endpoint's client certificate expires
	// soon.
	CertificateExpiring = "webhook_endpoint.certificate_expiring"
	// TokenFailing: an OAuth2 endpoint's token endpoint has been failing
	// for a while.
	TokenFailing = "webhook_endpoint.token_failing"
)

// RuleTypeOperational refuses a published event of an operational type:
// only webhookd sends them.
const RuleTypeOperational = "type_operational"

// IsOperational tells whether t is one of the operational event types.
// It runs on every publish, so it compares names and builds no schema
// (Operational parses the schema file for each type).
func IsOperational(t string) bool {
	switch t {
	case EndpointDisabled, EndpointEnabled, DeliveryExhausted, CertificateExpiring, TokenFailing:
		return true
	}
	return false
}

// Operational returns the operational event types, in the order
// docs/events.md lists them, each subscribable, with its example and
// schema.
func Operational() []EventType {
	const sub = "0193a5e0-2222-7a2b-8c3d-4e5f6a7b8c9d"
	lastError := map[string]any{"code": nil, "http_status": 503, "at": "2026-11-23T09:14:05Z"}
	entry := func(name, description string, example map[string]any) EventType {
		example["subscription_id"] = sub
		return EventType{Name: name, Description: description, Example: object(example), Subscribable: true,
			Schema: operationalSchema(name)}
	}
	return []EventType{
		entry(EndpointDisabled, "A subscription was disabled: by the merchant, an operator, auto-disable or its endpoint answering 410 Gone.",
			map[string]any{"disabled_by": "auto_disable", "reason": "Every attempt failed for 5 days.", "last_error": lastError}),
		entry(EndpointEnabled, "A disabled subscription was enabled again.", map[string]any{"enabled_by": "merchant"}),
		entry(DeliveryExhausted, "A delivery failed for good: its last scheduled attempt failed (at most one per subscription per hour).",
			map[string]any{"delivery_id": "0193a5e0-3333-7a2b-8c3d-4e5f6a7b8c9d", "event_id": "0193a5e0-4444-7a2b-8c3d-4e5f6a7b8c9d",
				"event_type": "payout.paid", "attempts": 8, "last_error": nil, "last_http_status": 503}),
		entry(CertificateExpiring, "The client certificate of an mtls endpoint expires soon.",
			map[string]any{"not_after": "2026-12-07T00:00:00Z", "days_left": 10}),
		entry(TokenFailing, "The OAuth2 token endpoint of a subscription has failed for 10 minutes.",
			map[string]any{"token_host": "auth.example.com", "failing_since": "2026-11-23T09:04:05Z",
				"last_error": "token endpoint answered 500"}),
	}
}

// operationalSchema is the schema of operational type name: its entry of
// schemas/operational.json with the shared definitions written in place,
// so that it refers to nothing outside itself (an AsyncAPI document
// embeds it as it is). It is nil when the file lacks it, which the tests
// catch.
func operationalSchema(name string) json.RawMessage {
	file, err := familySchema("operational")
	if err != nil {
		return nil
	}
	s, ok := file[name].(map[string]any)
	if !ok {
		return nil
	}
	defs, _ := file["$defs"].(map[string]any)
	props, _ := s["properties"].(map[string]any)
	for k, v := range props {
		// A member written {} takes the shared definition of its name.
		if empty, _ := v.(map[string]any); len(empty) == 0 && defs[k] != nil {
			props[k] = defs[k]
		}
	}
	s["$schema"], s["title"] = SchemaDialect, name
	s["description"] = file["description"]
	return marshalSchema(s)
}
