package dispatcher_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/internal/store"
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
		end  func(ctx context.Context, e *env, sub store.Subscription) error
		// api: the API drops the work; else the worker's first attempt.
		api bool
	}{
		{"deleted, the API drops it", func(ctx context.Context, e *env, sub store.Subscription) error {
			return e.store.Subscriptions.DeleteSubscription(ctx, "m1", sub.ID)
		}, true},
		{"disabled, the API drops it", func(ctx context.Context, e *env, sub store.Subscription) error {
			off := store.SubscriptionDisabled
			_, err := e.store.Subscriptions.UpdateSubscription(ctx, "m1", sub.ID, store.SubscriptionUpdate{Status: &off})
			return err
		}, true},
		{"deleted, the first attempt finds out", func(ctx context.Context, e *env, sub store.Subscription) error {
			return e.store.Subscriptions.DeleteSubscription(ctx, "m1", sub.ID)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ctx := context.Background()
			rcv := newReceiver(t, answer(http.StatusOK))
			sub, _ := e.subscribe("m1", rcv.URL, "*")
			one := 1
			if _, err := e.store.Subscriptions.UpdateSubscription(ctx, "m1", sub.ID, store.SubscriptionUpdate{RateLimit: &one}); err != nil {
				t.Fatal(err)
			}
			d, reg := e.dispatcher()
			var events []store.Event
			for range backlog {
				events = append(events, e.publish(d, "m1", "payout.paid"))
			}
			if n, err := dispatcher.ScheduleParked(ctx, e.rc); err != nil || n != backlog {
				t.Fatalf("%d attempts parked (%v), want %d", n, err, backlog)
			}
			if err := tc.end(ctx, e, sub); err != nil {
				t.Fatal(err)
			}
			if tc.api {
				if err := d.Dropper.DropSubscription(ctx, "m1", sub.ID); err != nil {
					t.Fatal(err)
				}
				if n, err := dispatcher.ScheduleParked(ctx, e.rc); err != nil || n != 0 {
					t.Fatalf("%d attempts parked after the drop (%v), want none", n, err)
				}
			}
			e.run(d)
			for _, ev := range events {
				if got := e.waitSettled(e.deliveries(ev.ID)[0].ID, 10*time.Second); got.Status != store.DeliveryFailed {
					t.Fatalf("delivery %s: %s, want failed", got.ID, got.Status)
				}
			}
			e.waitSwept(reg) // what the sweeper would find has been found
			if n := len(rcv.got()); n != 0 {
				t.Errorf("the receiver got %d deliveries of a subscription gone", n)
			}
			if n := counterWith(t, reg, "webhookd_attempts_deferred_total", "", ""); n != 0 {
				t.Errorf("%v attempts were deferred: dropped work cycled through the schedule", n)
			}
		})
	}
}
