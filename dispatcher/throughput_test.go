package dispatcher_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/store"
)

// TestThroughputReport is the same measurement as a test, so that its
// figure shows in a verbose test run: 200 events × 10 subscriptions.
func TestThroughputReport(t *testing.T) {
	if testing.Short() {
		return
	}
	t.Parallel()
	e := newEnv(t)
	rcv := newReceiver(t, answer(http.StatusOK))
	const subs, events = 10, 200
	for range subs {
		e.subscribe("m1", rcv.URL, "*")
	}
	d, _ := e.dispatcher(func(c *dispatcher.Config) { c.Concurrency = 64; c.SubscriptionConcurrency = 16 })
	e.run(d)
	start := time.Now()
	for range events {
		if _, _, err := d.Publish(context.Background(), store.NewEvent{MerchantID: "m1", Type: "payout.paid",
			Payload: json.RawMessage(`{"id":"po_1"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	published := time.Since(start)
	e.waitFor("every delivery", 60*time.Second, func() bool { return len(rcv.got()) >= subs*events })
	took := time.Since(start)
	t.Logf("%d events published in %v (%.0f/s); %d deliveries done in %v (%.0f/s)", events, published.Round(time.Millisecond),
		float64(events)/published.Seconds(), subs*events, took.Round(time.Millisecond), float64(subs*events)/took.Seconds())
}
