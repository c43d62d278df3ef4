package s3_test

import (
	"regexp"
	"testing"

	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
)

// TestEveryNewKindThroughTheEngine: s3, a kind added as a plug-in,
// through the engine (dispatchertest.ThroughTheEngine): an event arrives
// once, its signature verified, its delivery confirmed on one attempt; an
// event of a type the subscription does not take makes no delivery; the
// target down, failed attempts in words a merchant may read, and back,
// the event, once; send_test_event arrives, verified.
func TestEveryNewKindThroughTheEngine(t *testing.T) {
	dispatchertest.ThroughTheEngine(t, "s3", reachS3)
}

// reachS3: the test's gofakes3 (newFakeS3), its bucket read by a
// consumer that lists it and reads each object it has not read yet.
func reachS3(t *testing.T) dispatchertest.KindTarget {
	f := newFakeS3(t)
	proxy, down, up := dispatchertest.Proxied(t, f.addr)
	return dispatchertest.KindTarget{
		Destination: map[string]any{"type": "s3", "bucket": testBucket, "region": testRegion,
			"access_key_id": testKeyID, "secret_access_key": testSecret, "endpoint": "http://" + proxy.Addr},
		Answer:  regexp.MustCompile(`^stored by S3 \(key [^,]+, ETag [0-9a-f]+\)$`),
		Receive: f.receive,
		Unread:  f.unread,
		Down:    down, Up: up,
	}
}
