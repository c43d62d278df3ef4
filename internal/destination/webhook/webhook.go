// Package webhook is the HTTP endpoint as a kind of the destination
// registry: a subscription with a url and no stored destination is sent
// by it. Its sending is the engine's HTTP sender (dispatcher/deliver:
// the shared client, the address-checked dialer, the egress proxy,
// client certificates, OAuth2 tokens, Retry-After and 410), which the
// worker gives New; the registry chooses it (destination.Pool.For). Its
// conformance run is dispatcher/deliver's TestWebhookConformance, where
// that sender is built.
package webhook

import "github.com/webhookd/webhookd/internal/destination"

// Type is the kind's type, as a destination object may name it
// ({"type": "webhook"}, the same as no destination).
const Type = "webhook"

// ChosenBy is the subscription kind it sends for.
const ChosenBy = "endpoint"

// Metadata describes the kind.
func Metadata() destination.Metadata {
	return destination.Metadata{Type: Type, Label: "HTTP endpoint", Short: "HTTP",
		Delivers: "one signed POST per delivery (or per batch) to the subscription's url; its answer is the attempt's",
		Ordered:  true, Builtin: true, ChosenBy: ChosenBy, Batches: true}
}

// New is the kind, sending with the engine's HTTP sender s.
func New(s destination.Sender) destination.Kind { return destination.Builtin(Metadata(), s) }
