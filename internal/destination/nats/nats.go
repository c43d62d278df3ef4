// Package nats is the nats destination kind: each delivery is one
// message published to a subject of a NATS system, taken when a
// JetStream stream acknowledges it (a PubAck). The connection is the
// client library's (github.com/nats-io/nats.go) over webhookd's dialer,
// one a publisher, opened on the first Send and again after a failure,
// never reconnecting nor buffering by itself.
package nats

import (
	"encoding/json"
	"fmt"

	"github.com/webhookd/webhookd/internal/destination"
)

// Kind is the nats kind.
type Kind struct{}

// New returns the nats kind.
func New() Kind { return Kind{} }

// Metadata implements destination.Kind.
func (Kind) Metadata() destination.Metadata {
	return destination.Metadata{
		Type:     "nats",
		Label:    "NATS JetStream",
		Short:    "NATS",
		Delivers: "one message per delivery on the subject, acknowledged by the JetStream stream that takes it, deduplicated by delivery id (Nats-Msg-Id)",
		Fields:   fields,
		// One publisher's messages on one subject are stored in the
		// order they were acknowledged, and the engine sends an ordering
		// key's deliveries one at a time: the test's ordered row checks
		// it against a real server.
		Ordered: true,
	}
}

// Parse implements destination.Kind.
func (Kind) Parse(param string, raw json.RawMessage) (destination.Config, error) {
	c, err := parse(param, raw)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Open implements destination.Kind: the publisher connects on its first
// Send.
func (Kind) Open(cfg destination.Config, env destination.Env) (destination.Publisher, error) {
	c, err := destination.ConfigOf[Config]("nats", cfg)
	if err != nil {
		return nil, err
	}
	if env.Dial == nil {
		return nil, fmt.Errorf("nats: open: the environment has no dialer")
	}
	return newPublisher(c, env), nil
}
