package kinesis_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
	"github.com/webhookd/webhookd/internal/testfixtures/kinesistest"
)

// TestEveryNewKindThroughTheEngine: kinesis, a kind added as a plug-in,
// through the engine (dispatchertest.ThroughTheEngine): an event arrives
// once, its signature verified, its delivery confirmed on one attempt; an
// event of a type the subscription does not take makes no delivery; the
// target down, failed attempts in words a merchant may read, and back,
// the event, once; send_test_event arrives, verified.
func TestEveryNewKindThroughTheEngine(t *testing.T) {
	dispatchertest.ThroughTheEngine(t, "kinesis", reachKinesis)
}

// reachKinesis: kinesalite (kinesistest) with a stream of one shard, so
// that its records come back in the order put.
func reachKinesis(t *testing.T) dispatchertest.KindTarget {
	k := kinesistest.Start(t)
	const stream = "webhookd-engine"
	k.CreateStream(t, stream, 1)
	r := kinesistest.NewReader(k, stream)
	proxy, down, up := dispatchertest.Proxied(t, strings.TrimPrefix(k.URL, "http://"))
	return dispatchertest.KindTarget{
		// kinesalite checks no credentials.
		Destination: map[string]any{"type": "kinesis", "stream_name": stream, "region": "eu-west-1",
			"access_key_id": "AKIDEXAMPLE", "secret_access_key": "kinesalite-checks-no-secret", "endpoint": "http://" + proxy.Addr},
		Answer:  regexp.MustCompile(`^confirmed by Kinesis \(sequence number [0-9]+, shard shardId-000000000000\)$`),
		Receive: r.Receive,
		Unread: func(t testing.TB) int {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return r.Unread(ctx, t)
		},
		Down: down, Up: up,
	}
}
