package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/webhookd/webhookd/receiver"
)

// broker is single's workload to a broker destination (issue 27) of the
// kind -broker-kind names: each subscription publishes to a target of its
// own on that broker (a RabbitMQ exchange, a NATS subject, an MQTT topic),
// which the bench sets up as a merchant would and consumes, verifying each
// message's signature from its headers with package receiver and timing
// its arrival against its publish instant as single's receivers do. What
// the bench set up is deleted at the end. The broker's own CPU is in
// cpu_unattributed_s.
func broker(ctx context.Context, l *lab) (*report, error) {
	kind, ok := brokerKindOf(l.cfg.brokerKind)
	if !ok { // parseFlags refuses any other
		return nil, fmt.Errorf("broker: unknown -broker-kind %q", l.cfg.brokerKind)
	}
	subs := orDefault(l.cfg.subscriptions, 1)
	b, err := kind.open(ctx, l.cfg, l.cfg.merchant+"-broker", subs)
	if err != nil {
		return nil, err
	}
	defer b.close(l.logf)
	r, _, _, err := singleShaped(ctx, l, "broker", " to "+kind.shape, endpointShape{
		fields: func(i int, _ string) map[string]any {
			return map[string]any{"destination": b.destination(i)}
		},
	}, func(f *fleet) error { return b.consume(f.rcv) })
	return r, err
}

// brokerTarget is what one broker scenario run delivers to: the targets
// the bench set up on one broker, one a subscription, and its consumers of
// them. The three kinds are in broker_rabbitmq.go, broker_nats.go and
// broker_mqtt.go.
type brokerTarget interface {
	// destination is subscription i's destination, as the subscriptions
	// API takes it (its type and the kind's fields).
	destination(i int) map[string]any
	// consume starts consuming every target, noting a message of target
	// i at the endpoint of the same index of rcv. Messages published
	// after it returns are received.
	consume(rcv *receivers) error
	// close stops the consumers, deletes what the bench set up and
	// disconnects, logging to logf (when set) what could not be deleted.
	close(logf progress)
}

// brokerKind is one of -broker-kind's values.
type brokerKind struct {
	// name is the flag's value and the destination's type.
	name string
	// shape describes the subscriptions in the report's parameters.
	shape string
	// open connects to the broker cfg names and sets up n targets named
	// after run.
	open func(ctx context.Context, cfg config, run string, n int) (brokerTarget, error)
}

// brokerKinds are -broker-kind's values, the default first.
func brokerKinds() []brokerKind {
	return []brokerKind{
		{"rabbitmq", "RabbitMQ destinations (an exchange and a durable queue each)", openRabbitMQ},
		{"nats", "NATS JetStream destinations (a subject each, one file stream for the run)", openNATS},
		{"mqtt", "MQTT destinations (a topic each, subscribed at QoS 1)", openMQTT},
	}
}

// brokerKindNames are brokerKinds' names, for the flag's help.
func brokerKindNames() []string {
	var names []string
	for _, k := range brokerKinds() {
		names = append(names, k.name)
	}
	return names
}

// brokerKindOf is the kind named name.
func brokerKindOf(name string) (brokerKind, bool) {
	for _, k := range brokerKinds() {
		if k.name == name {
			return k, true
		}
	}
	return brokerKind{}, false
}

// brokerToken is run made a name every broker takes as one part of a
// name (a NATS stream name or subject token, an MQTT topic level): ASCII
// letters, digits, - and _, anything else replaced by _. -merchant is the
// operator's, and may hold dots or slashes that would split it.
func brokerToken(run string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '_'
	}, run)
}

// noteMessage verifies one message consumed from the target of endpoint
// i, its Standard Webhooks headers among headers (names in lowercase),
// and notes its arrival as an HTTP delivery's would be.
func (rs *receivers) noteMessage(i int, headers map[string]string, body []byte) {
	arrived := time.Now()
	ep := rs.endpoints[i]
	v := ep.verifier.Load()
	if v == nil || v.VerifyMessage(headers, body) != nil {
		rs.bad.Add(1)
		return
	}
	rs.note(ep, headers[receiver.HeaderID], arrived, true)
}
