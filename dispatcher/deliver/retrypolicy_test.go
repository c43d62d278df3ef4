package deliver_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
	"github.com/webhookd/webhookd/retry"
)

// TestRunnerFollowsTheSubscriptionsRetryPolicy: a subscription with its
// own policy (one delay of 1 s, a 1 s timeout) against a receiver that
// hangs is attempted twice, each attempt cut at the policy's timeout (not
// the engine's 5 s) and the second a jittered second after the first (not
// the engine's hour): the Runner's deadline and decide read the policy
// the lease brought.
func TestRunnerFollowsTheSubscriptionsRetryPolicy(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	done := make(chan struct{})
	rcv := dispatchertest.NewReceiver(t, func(int, http.ResponseWriter, *http.Request) {
		// The receiver under test never answers: it waits for the test's
		// end, not for the request's context, whose cancel (the attempt
		// giving up) would let it answer 200 in the same instant, an
		// answer the engine may read before its own deadline.
		<-done
	})
	t.Cleanup(func() { close(done) }) // before the receiver closes
	sub, _ := e.Subscribe("m1", rcv.URL, "*")
	if _, err := e.Store.Subscriptions.UpdateSubscription(context.Background(), "m1", sub.ID, store.SubscriptionUpdate{
		SetRetryPolicy: true, RetryPolicy: &store.RetryPolicy{Schedule: []int64{1}, TimeoutSeconds: 1}}); err != nil {
		t.Fatal(err)
	}
	d, _ := e.Dispatcher(func(c *dispatcher.Config) {
		c.Schedule = retry.Schedule{Delays: []time.Duration{time.Hour, time.Hour}}
		c.DeliveryTimeout = 5 * time.Second
	})
	e.Run(d)
	ev := e.Publish(d, "m1", "payout.paid")
	del := e.WaitSettled(e.Deliveries(ev.ID)[0].ID, 15*time.Second)
	if del.Status != store.DeliveryFailed || len(del.Attempts) != 2 {
		t.Fatalf("delivery %s after %d attempts, want failed after the policy's 2", del.Status, len(del.Attempts))
	}
	for _, a := range del.Attempts {
		took := time.Duration(a.DurationMS) * time.Millisecond
		if a.Error == nil || *a.Error != "timeout" || took < 900*time.Millisecond || took > 2500*time.Millisecond {
			t.Errorf("attempt %d: error %v after %v, want a timeout after the policy's 1 s", a.Number, a.Error, took)
		}
	}
	first, second := del.Attempts[0], del.Attempts[1]
	gap := second.AttemptedAt.Sub(first.AttemptedAt.Add(time.Duration(first.DurationMS) * time.Millisecond))
	if gap < 890*time.Millisecond || gap > 2100*time.Millisecond {
		t.Errorf("the second attempt came %v after the first ended, want the policy's 1 s ±10 %%", gap)
	}
}
