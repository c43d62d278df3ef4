package sns_test

import (
	"regexp"
	"testing"

	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
)

// TestEveryNewKindThroughTheEngine: sns, a kind added as a plug-in,
// through the engine (dispatchertest.ThroughTheEngine): an event arrives
// once, its signature verified, its delivery confirmed on one attempt; an
// event of a type the subscription does not take makes no delivery; the
// target down, failed attempts in words a merchant may read, and back,
// the event, once; send_test_event arrives, verified.
func TestEveryNewKindThroughTheEngine(t *testing.T) {
	dispatchertest.ThroughTheEngine(t, "sns", reachSNS)
}

// reachSNS: a topic of the test's own on the test's goaws (server), with
// a queue subscribed to it by raw delivery, which keeps the Publish's
// message attributes on the queue's message.
func reachSNS(t *testing.T) dispatchertest.KindTarget {
	srv := newServer(t)
	topicARN, sub := srv.topic(t, false)
	proxy, down, up := dispatchertest.Proxied(t, srv.Addr())
	return dispatchertest.KindTarget{
		Destination: map[string]any{"type": "sns", "topic_arn": topicARN, "region": region,
			"access_key_id": accessKey, "secret_access_key": secretKey, "endpoint": "http://" + proxy.Addr},
		Answer:  regexp.MustCompile(`^confirmed by SNS \(message id [^)]+\)$`),
		Receive: sub.Receive,
		Unread:  sub.unread,
		Down:    down, Up: up,
	}
}
