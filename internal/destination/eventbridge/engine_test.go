package eventbridge_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
	"github.com/webhookd/webhookd/internal/testfixtures/eventbridgetest"
)

// TestEveryNewKindThroughTheEngine: eventbridge, a kind added as a plug-in,
// through the engine (dispatchertest.ThroughTheEngine): an event arrives
// once, its signature verified, its delivery confirmed on one attempt; an
// event of a type the subscription does not take makes no delivery; the
// target down, failed attempts in words a merchant may read, and back,
// the event, once; send_test_event arrives, verified.
func TestEveryNewKindThroughTheEngine(t *testing.T) {
	dispatchertest.ThroughTheEngine(t, "eventbridge", reachEventBridge)
}

// reachEventBridge: the PutEvents stand-in (eventbridgetest); no
// EventBridge emulator is packaged where the project installs from.
func reachEventBridge(t *testing.T) dispatchertest.KindTarget {
	s := eventbridgetest.New(t)
	proxy, down, up := dispatchertest.Proxied(t, strings.TrimPrefix(s.URL(), "http://"))
	return dispatchertest.KindTarget{
		Destination: map[string]any{"type": "eventbridge", "event_bus": eventbridgetest.Bus, "region": eventbridgetest.Region,
			"access_key_id": eventbridgetest.Key, "secret_access_key": eventbridgetest.Secret, "endpoint": "http://" + proxy.Addr},
		Answer:  regexp.MustCompile(`^confirmed by EventBridge \(event id [0-9a-f-]+\)$`),
		Receive: s.Receive,
		Unread:  func(testing.TB) int { return s.Waiting() },
		Down:    down, Up: up,
	}
}
