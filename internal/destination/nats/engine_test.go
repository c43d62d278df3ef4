package nats_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
)

// TestEveryNewKindThroughTheEngine: nats, a kind added as a plug-in,
// through the engine (dispatchertest.ThroughTheEngine): an event arrives
// once, its signature verified, its delivery confirmed on one attempt; an
// event of a type the subscription does not take makes no delivery; the
// target down, failed attempts in words a merchant may read, and back,
// the event, once; send_test_event arrives, verified.
func TestEveryNewKindThroughTheEngine(t *testing.T) {
	dispatchertest.ThroughTheEngine(t, "nats", reachNATS)
}

// reachNATS: a JetStream stream of the test's own on the machine's NATS
// (newStream), read by its durable consumer from its start.
func reachNATS(t *testing.T) dispatchertest.KindTarget {
	dispatchertest.NeedService(t, "NATS", machineServer)
	s := newStream(t, machineServer)
	proxy, down, up := dispatchertest.Proxied(t, machineServer)
	return dispatchertest.KindTarget{
		Destination: map[string]any{"type": "nats", "servers": []string{proxy.Addr}, "subject": s.subject},
		Answer:      regexp.MustCompile(`^acknowledged by JetStream stream ` + s.name + `, sequence [0-9]+$`),
		Receive:     s.receive,
		Unread:      s.unread,
		Down:        down, Up: up,
	}
}

// unread is how many of the stream's messages its consumer has not seen
// acknowledged: waiting, or delivered and not acknowledged.
func (s *stream) unread(t testing.TB) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cons, err := s.js.Consumer(ctx, s.name, "receiver")
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return int(info.NumPending) + info.NumAckPending
}
