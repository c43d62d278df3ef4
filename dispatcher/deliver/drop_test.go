package deliver_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
)

// TestWorkThatCanNeverRunIsDropped: a rate-limited subscription (1/s) with
// a backlog parked in the schedule is deleted or disabled. Its waiting
// attempts leave the schedule and its pending deliveries end failed, at
// once, whether the API says so (DropSubscription) or the first attempt
// to come up finds out; none reaches the receiver, and none cycles
// through the schedule waiting for its turn.
func TestWorkThatCanNeverRunIsDropped(t *testing.T) {
	t.Parallel()
	const backlog = 20
	for _, tc := range []struct {
		name string
		end  func(ctx context.Context, e *dispatchertest.Env, sub store.Subscription) error
		// api: the API drops the work; else the worker's first attempt.
		api bool
	}{
		{"deleted, the API drops it", func(ctx context.Context, e *dispatchertest.Env, sub store.Subscription) error {
			return e.Store.Subscriptions.DeleteSubscription(ctx, "m1", sub.ID)
		}, true},
		{"disabled, the API drops it", func(ctx context.Context, e *dispatchertest.Env, sub store.Subscription) error {
			off := store.SubscriptionDisabled
			_, err := e.Store.Subscriptions.UpdateSubscription(ctx, "m1", sub.ID, store.SubscriptionUpdate{Status: &off})
			return err
		}, true},
		{"deleted, the first attempt finds out", func(ctx context.Context, e *dispatchertest.Env, sub store.Subscription) error {
			return e.Store.Subscriptions.DeleteSubscription(ctx, "m1", sub.ID)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := dispatchertest.New(t)
			ctx := context.Background()
			rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusOK))
			sub, _ := e.Subscribe("m1", rcv.URL, "*")
			one := 1
			if _, err := e.Store.Subscriptions.UpdateSubscription(ctx, "m1", sub.ID, store.SubscriptionUpdate{RateLimit: &one}); err != nil {
				t.Fatal(err)
			}
			d, reg := e.Dispatcher()
			var events []store.Event
			for range backlog {
				events = append(events, e.Publish(d, "m1", "payout.paid"))
			}
			if n, err := dispatchertest.ScheduleParked(ctx, e.RC); err != nil || n != backlog {
				t.Fatalf("%d attempts parked (%v), want %d", n, err, backlog)
			}
			if err := tc.end(ctx, e, sub); err != nil {
				t.Fatal(err)
			}
			if tc.api {
				if err := d.Dropper.DropSubscription(ctx, "m1", sub.ID); err != nil {
					t.Fatal(err)
				}
				if n, err := dispatchertest.ScheduleParked(ctx, e.RC); err != nil || n != 0 {
					t.Fatalf("%d attempts parked after the drop (%v), want none", n, err)
				}
			}
			e.Run(d)
			for _, ev := range events {
				if got := e.WaitSettled(e.Deliveries(ev.ID)[0].ID, 10*time.Second); got.Status != store.DeliveryFailed {
					t.Fatalf("delivery %s: %s, want failed", got.ID, got.Status)
				}
			}
			e.WaitSwept(reg) // what the sweeper would find has been found
			if n := len(rcv.Got()); n != 0 {
				t.Errorf("the receiver got %d deliveries of a subscription gone", n)
			}
			if n := dispatchertest.CounterWith(t, reg, "webhookd_attempts_deferred_total", "", ""); n != 0 {
				t.Errorf("%v attempts were deferred: dropped work cycled through the schedule", n)
			}
		})
	}
}
