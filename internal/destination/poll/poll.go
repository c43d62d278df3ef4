// Package poll is the poll subscription as a kind of the destination
// registry ({"type": "poll"}): its deliveries are never sent; the
// merchant reads them, signed as an HTTP attempt would be, from
// GET /v1/webhook_subscriptions/{id}/poll (dispatcher/poll). The kind
// exists so that the registry chooses for it as for every other: a send
// it is asked for (none is, the worker never attempts a poll delivery)
// fails as destination_invalid. Its conformance run is dispatcher/poll's
// TestPollConformance: what a poller reads verifies with package
// receiver.
package poll

import "github.com/webhookd/webhookd/internal/destination"

// Type is the kind's type, as stored.
const Type = "poll"

// Metadata describes the kind.
func Metadata() destination.Metadata {
	return destination.Metadata{Type: Type, Label: "Poll", Short: "Poll",
		Delivers: "nothing is sent: the merchant reads the deliveries, signed, with GET …/poll", Ordered: true, Builtin: true}
}

// New is the kind.
func New() destination.Kind { return destination.Builtin(Metadata(), nil) }
