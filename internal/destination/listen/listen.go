// Package listen is the listener of `webhookd listen` as a kind of the
// destination registry: a listener subscription's attempts are relayed
// to the API process holding the command's WebSocket, never dialled,
// and the command's local answer is the attempt's; a listener that has
// ended fails its delivery for good (listener_closed). Its sending is
// dispatcher/deliver's relay, which the worker gives New; its
// conformance run is dispatcher/deliver's TestListenerConformance.
package listen

import "github.com/webhookd/webhookd/internal/destination"

// Type is the kind's type.
const Type = "listener"

// ChosenBy is the subscription kind it sends for.
const ChosenBy = "listener"

// Metadata describes the kind.
func Metadata() destination.Metadata {
	return destination.Metadata{Type: Type, Label: "Listener (webhookd listen)", Short: "Listener",
		Delivers: "the signed request, relayed down the command's WebSocket to a local URL; the local answer is the attempt's",
		Builtin:  true, ChosenBy: ChosenBy}
}

// New is the kind, relaying with the engine's relay s.
func New(s destination.Sender) destination.Kind { return destination.Builtin(Metadata(), s) }
