package mqtt_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
)

// TestEveryNewKindThroughTheEngine: mqtt, a kind added as a plug-in,
// through the engine (dispatchertest.ThroughTheEngine): an event arrives
// once, its signature verified, its delivery confirmed on one attempt; an
// event of a type the subscription does not take makes no delivery; the
// target down, failed attempts in words a merchant may read, and back,
// the event, once; send_test_event arrives, verified.
func TestEveryNewKindThroughTheEngine(t *testing.T) {
	dispatchertest.ThroughTheEngine(t, "mqtt", reachMQTT)
}

// reachMQTT: a topic of the test's own on the machine's Mosquitto, with a
// subscriber at QoS 1 from before anything is sent.
func reachMQTT(t *testing.T) dispatchertest.KindTarget {
	dispatchertest.NeedService(t, "Mosquitto", machineBroker)
	topic := uniqueTopic(t)
	sub := subscribe(t, machineBroker, "", "", topic)
	proxy, down, up := dispatchertest.Proxied(t, machineBroker)
	return dispatchertest.KindTarget{
		Destination: map[string]any{"type": "mqtt", "broker": proxy.Addr, "topic": topic, "tls": false},
		Answer:      regexp.MustCompile(`^confirmed by the broker \(PUBACK [^)]+\)$`),
		Receive:     sub.Receive,
		Unread:      sub.unread,
		Down:        down, Up: up,
	}
}

// unread publishes a marker to the topic and counts the messages that
// arrive before it. MQTT keeps no count of what a subscriber has not
// read; but Mosquitto forwards a topic's messages to a subscriber in the
// order it took them, and every message the engine sent was acknowledged
// (PUBACK) before the marker is published: any of them the subscriber
// has not read comes before the marker.
func (s *subscriber) unread(t testing.TB) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	marker := "marker-" + randomHex(t, 6)
	s.mu.Lock()
	client := s.client
	s.mu.Unlock()
	if _, err := client.Publish(ctx, &paho.Publish{Topic: s.topic, QoS: 1, Payload: []byte(marker)}); err != nil {
		t.Fatalf("publish the marker: %v", err)
	}
	n := 0
	for {
		if got := s.Receive(ctx, t); string(got.Body) == marker {
			return n
		}
		n++
	}
}
