package publish_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/dispatcher/publish"
	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
	"github.com/webhookd/webhookd/retry"
)

// switchable answers whatever status it currently holds.
func switchable(status *atomic.Int32) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(int(status.Load())) }
}

// TestRedeliverOutcomes covers the states a manual attempt leaves a
// delivery in, whatever its status before.
func TestRedeliverOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// before is the delivery's status when redeliver is called.
		before store.DeliveryStatus
		// manual is what the receiver answers the manual attempt.
		manual int
		// after is the delivery's status once the manual attempt is in;
		// pending keeps the scheduled next attempt where it was.
		after store.DeliveryStatus
	}{
		{"failed, manual success", store.DeliveryFailed, 200, store.DeliverySucceeded},
		{"failed, manual failure", store.DeliveryFailed, 500, store.DeliveryFailed},
		{"succeeded, manual success", store.DeliverySucceeded, 204, store.DeliverySucceeded},
		{"succeeded, manual failure", store.DeliverySucceeded, 503, store.DeliveryFailed},
		{"pending, manual success ends the schedule", store.DeliveryPending, 200, store.DeliverySucceeded},
		{"pending, manual failure keeps the schedule", store.DeliveryPending, 500, store.DeliveryPending},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := dispatchertest.New(t)
			ctx := context.Background()
			var status atomic.Int32
			status.Store(500)
			if tt.before == store.DeliverySucceeded {
				status.Store(200)
			}
			rcv := dispatchertest.NewReceiver(t, switchable(&status))
			_, secret := e.Subscribe("m1", rcv.URL, "*")
			// failed: one retry 50 ms later; pending: the retry is an hour
			// away, so the delivery stays pending during the test.
			schedule := retry.Schedule{Delays: []time.Duration{50 * time.Millisecond}}
			if tt.before == store.DeliveryPending {
				// An hour away: the manual attempt never races it (a retry
				// 2 s after the clock's jump ran first under load).
				schedule = retry.Schedule{Delays: []time.Duration{time.Hour, time.Hour}}
			}
			// The dispatcher's clock jumps a minute ahead before the manual
			// attempt, so that its webhook-timestamp is visibly fresh.
			var offset atomic.Int64
			d, _ := e.Dispatcher(func(c *dispatcher.Config) {
				c.Schedule = schedule
				c.Clock = clock.Func(func() time.Time { return time.Now().Add(time.Duration(offset.Load())) })
			})
			e.Run(d)
			ev := e.Publish(d, "m1", "payout.paid")
			del := e.Deliveries(ev.ID)[0]
			want := tt.before
			e.WaitFor("the delivery to become "+string(want), 5*time.Second, func() bool {
				del = e.Delivery(del.ID)
				return del.Status == want && del.AttemptCount >= 1
			})
			before := del
			offset.Store(int64(time.Minute))
			status.Store(int32(tt.manual))

			accepted, err := d.Redeliverer.Redeliver(ctx, "m1", del.ID)
			if err != nil {
				t.Fatal(err)
			}
			// Accepted: the delivery as it was, the attempt still to come.
			if accepted.ID != del.ID || accepted.Status != before.Status || accepted.AttemptCount != before.AttemptCount {
				t.Fatalf("redeliver answered %s with %d attempts; want the delivery as it was (%s, %d)",
					accepted.Status, accepted.AttemptCount, before.Status, before.AttemptCount)
			}
			got := waitAttempts(e, "m1", del.ID, before.AttemptCount+1)
			if got.Status != tt.after || got.AttemptCount != before.AttemptCount+1 || len(got.Attempts) != got.AttemptCount {
				t.Fatalf("after redeliver: status %s, %d attempts (%d rows); want %s, %d", got.Status, got.AttemptCount,
					len(got.Attempts), tt.after, before.AttemptCount+1)
			}
			last := got.Attempts[len(got.Attempts)-1]
			if last.Trigger != store.TriggerManual || last.Number != got.AttemptCount || *last.HTTPStatus != tt.manual {
				t.Fatalf("manual attempt recorded as %+v", last)
			}
			switch tt.after {
			case store.DeliveryPending:
				if got.NextAttemptAt == nil || !got.NextAttemptAt.Equal(*before.NextAttemptAt) {
					t.Fatalf("next attempt %v, want it kept at %v", got.NextAttemptAt, before.NextAttemptAt)
				}
			default:
				if got.NextAttemptAt != nil {
					t.Fatalf("next attempt %v on a %s delivery", got.NextAttemptAt, got.Status)
				}
			}

			// The receiver saw the same webhook-id and body bytes, with a
			// fresh timestamp, signed by the subscription's secret.
			reqs := rcv.Got()
			first, manual := reqs[0], reqs[len(reqs)-1]
			if manual.Header.Get("webhook-id") != first.Header.Get("webhook-id") || string(manual.Body) != string(first.Body) {
				t.Fatalf("manual attempt sent id %q body %s; first sent %q %s", manual.Header.Get("webhook-id"), manual.Body,
					first.Header.Get("webhook-id"), first.Body)
			}
			t1, _ := strconv.ParseInt(first.Header.Get("webhook-timestamp"), 10, 64)
			t2, _ := strconv.ParseInt(manual.Header.Get("webhook-timestamp"), 10, 64)
			if t2-t1 < 50 {
				t.Fatalf("manual timestamp %d is not fresh (first %d)", t2, t1)
			}
			wh, err := standardwebhooks.NewWebhook(secret)
			if err != nil {
				t.Fatal(err)
			}
			if err := wh.Verify(manual.Body, manual.Header); err != nil {
				t.Fatalf("manual attempt does not verify: %v", err)
			}

			if tt.before == store.DeliveryPending && tt.after == store.DeliverySucceeded {
				// The stale scheduled attempt of that number finds nothing
				// to do when it comes: the clock jumps past it, a worker
				// takes it from the schedule, and no request follows.
				n := len(rcv.Got())
				if parked, err := dispatchertest.Parked(ctx, e.RC, before, before.AttemptCount+1); err != nil || !parked {
					t.Fatalf("the scheduled attempt is not parked before its time (%v)", err)
				}
				offset.Store(int64(2 * time.Hour))
				e.WaitFor("a worker to take the scheduled attempt", 10*time.Second, func() bool {
					parked, err := dispatchertest.Parked(ctx, e.RC, before, before.AttemptCount+1)
					if err != nil {
						t.Fatal(err)
					}
					return !parked
				})
				if len(rcv.Got()) != n || e.Delivery(del.ID).Status != store.DeliverySucceeded {
					t.Fatal("an attempt ran after a manual success ended the schedule")
				}
			}
		})
	}
}

// waitAttempts polls the merchant's delivery (as the API reads it) until it
// has n attempts recorded, and returns it.
func waitAttempts(e *dispatchertest.Env, merchant string, id uuid.UUID, n int) store.Delivery {
	e.T.Helper()
	var d store.Delivery
	e.WaitFor(fmt.Sprintf("delivery %s to hold %d attempts", id, n), 5*time.Second, func() bool {
		var err error
		if d, err = e.Store.Views.GetDelivery(context.Background(), merchant, id); err != nil {
			e.T.Fatal(err)
		}
		// The count first: GetDelivery reads the row before its attempts.
		return d.AttemptCount >= n && len(d.Attempts) >= n
	})
	return d
}

// TestRedeliverTwice: each call appends a manual attempt of its own.
func TestRedeliverTwice(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	ctx := context.Background()
	rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(200))
	d, _, del := settledDelivery(e, rcv)

	for range 2 {
		if _, err := d.Redeliverer.Redeliver(ctx, "m1", del.ID); err != nil {
			t.Fatal(err)
		}
	}
	got := waitAttempts(e, "m1", del.ID, 3)
	for i, a := range got.Attempts {
		want := store.TriggerManual
		if i == 0 {
			want = store.TriggerScheduled
		}
		if a.Number != i+1 || a.Trigger != want || a.Status != store.AttemptSucceeded {
			t.Fatalf("attempt %d: %+v, want number %d %s succeeded", i, a, i+1, want)
		}
	}
	if n := len(rcv.Got()); n != 3 {
		t.Fatalf("receiver got %d requests, want 3", n)
	}
}

// settledDelivery subscribes rcv to every event of m1, runs a dispatcher,
// publishes one event and waits until its delivery settles. It returns the
// dispatcher, the function that stops it, and the delivery.
func settledDelivery(e *dispatchertest.Env, rcv *dispatchertest.Receiver) (*dispatcher.Dispatcher, func(), store.Delivery) {
	e.T.Helper()
	e.Subscribe("m1", rcv.URL, "*")
	d, _ := e.Dispatcher()
	stop := e.Run(d)
	ev := e.Publish(d, "m1", "payout.paid")
	return d, stop, e.WaitSettled(e.Deliveries(ev.ID)[0].ID, 5*time.Second)
}

// TestRedeliverSurvivesRedisFlush: two redeliver calls are answered, then
// Redis loses their tasks before any worker runs them. The requests are in
// Postgres: the sweeper makes exactly the two attempts asked for.
func TestRedeliverSurvivesRedisFlush(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	ctx := context.Background()
	rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(200))
	d, stop, del := settledDelivery(e, rcv)
	stop() // no worker runs while the requests wait

	for range 2 {
		if _, err := d.Redeliverer.Redeliver(ctx, "m1", del.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.RC.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	d2, reg := e.Dispatcher()
	e.Run(d2)
	got := waitAttempts(e, "m1", del.ID, 3)
	e.WaitSwept(reg) // a third manual attempt, if any, would have come from the sweeper
	if n := len(rcv.Got()); n != 3 {
		t.Fatalf("receiver got %d requests, want 3 (the first attempt and the two asked for)", n)
	}
	for i, a := range got.Attempts[1:] {
		if a.Trigger != store.TriggerManual || a.Status != store.AttemptSucceeded {
			t.Errorf("attempt %d: %+v, want a successful manual attempt", i+2, a)
		}
	}
}

// TestRedeliverDuringRunningAttempt: a redeliver while an attempt of the
// delivery is in flight is not lost nor run alongside it: it runs after.
func TestRedeliverDuringRunningAttempt(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	ctx := context.Background()
	release := make(chan struct{})
	var released atomic.Int64
	rcv := dispatchertest.NewReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		w.WriteHeader(200)
	})
	e.Subscribe("m1", rcv.URL, "*")
	// A subscription cap above one: the manual attempt is taken while the
	// first runs, and the delivery's lease is what holds it back.
	d, reg := e.Dispatcher(func(c *dispatcher.Config) {
		c.DeliveryTimeout, c.MerchantShare, c.SubscriptionConcurrency = 5*time.Second, 1, 4
	})
	e.Run(d)
	ev := e.Publish(d, "m1", "payout.paid")
	del := e.Deliveries(ev.ID)[0]
	e.WaitFor("the first attempt to reach the receiver", 5*time.Second, func() bool { return len(rcv.Got()) == 1 })

	// Put back on the queue, whether for its endpoint's concurrency cap or
	// for the running attempt's lease.
	deferred := func() float64 {
		return dispatchertest.CounterWith(t, reg, "webhookd_attempts_deferred_total", "", "")
	}
	before := deferred()
	accepted, err := d.Redeliverer.Redeliver(ctx, "m1", del.ID)
	if err != nil {
		t.Fatal(err)
	}
	if accepted.Status != store.DeliveryPending || accepted.AttemptCount != 0 {
		t.Fatalf("redeliver answered %s with %d attempts; want pending with none yet", accepted.Status, accepted.AttemptCount)
	}
	// The manual task has been tried against the lease, and put back.
	e.WaitFor("the manual attempt to wait for the running one", 5*time.Second, func() bool { return deferred() > before })
	if n := len(rcv.Got()); n != 1 {
		t.Fatalf("receiver got %d requests while the first attempt was running, want 1", n)
	}
	released.Store(time.Now().UnixNano())
	close(release)

	got := waitAttempts(e, "m1", del.ID, 2)
	if got.Status != store.DeliverySucceeded || got.Attempts[0].Trigger != store.TriggerScheduled ||
		got.Attempts[1].Trigger != store.TriggerManual || got.Attempts[1].Number != 2 {
		t.Fatalf("delivery %s with attempts %+v; want succeeded, scheduled 1 then manual 2", got.Status, got.Attempts)
	}
	if reqs := rcv.Got(); len(reqs) != 2 || reqs[1].At.UnixNano() < released.Load() {
		t.Fatalf("receiver got %d requests; the manual one must come after the first finished", len(reqs))
	}
}

// TestRedeliverDroppedWhenSubscriptionDisabled: a subscription disabled
// between the redeliver call and the worker picking the attempt up sends
// and records nothing.
func TestRedeliverDroppedWhenSubscriptionDisabled(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	ctx := context.Background()
	rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(200))
	sub, _ := e.Subscribe("m1", rcv.URL, "*")
	d, reg := e.Dispatcher()
	stop := e.Run(d)
	ev := e.Publish(d, "m1", "payout.paid")
	del := e.WaitSettled(e.Deliveries(ev.ID)[0].ID, 5*time.Second)
	stop()
	worked := func() float64 {
		return dispatchertest.CounterWith(t, reg, "webhookd_tasks_total", "task", queue.TaskAttempt)
	}
	before := worked()

	if _, err := d.Redeliverer.Redeliver(ctx, "m1", del.ID); err != nil {
		t.Fatal(err)
	}
	off := store.SubscriptionDisabled
	if _, err := e.Store.Subscriptions.UpdateSubscription(ctx, "m1", sub.ID, store.SubscriptionUpdate{Status: &off}); err != nil {
		t.Fatal(err)
	}
	e.Run(d)
	e.WaitFor("the manual attempt to be worked", 5*time.Second, func() bool { return worked() > before })
	got := e.Delivery(del.ID)
	if got.AttemptCount != 1 || got.Status != store.DeliverySucceeded || len(rcv.Got()) != 1 {
		t.Fatalf("after a dropped manual attempt: %s with %d attempts, receiver got %d; want it as it was",
			got.Status, got.AttemptCount, len(rcv.Got()))
	}
	// The lease was given back: a redeliver once re-enabled runs at once.
	on := store.SubscriptionEnabled
	if _, err := e.Store.Subscriptions.UpdateSubscription(ctx, "m1", sub.ID, store.SubscriptionUpdate{Status: &on}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Redeliverer.Redeliver(ctx, "m1", del.ID); err != nil {
		t.Fatal(err)
	}
	if got := waitAttempts(e, "m1", del.ID, 2); got.Attempts[1].Trigger != store.TriggerManual {
		t.Fatalf("attempt 2 is %+v, want manual", got.Attempts[1])
	}
}

func TestRedeliverRefuses(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	ctx := context.Background()
	rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(200))
	sub, _ := e.Subscribe("m1", rcv.URL, "*")
	d, _ := e.Dispatcher()
	e.Run(d)
	ev := e.Publish(d, "m1", "payout.paid")
	del := e.WaitSettled(e.Deliveries(ev.ID)[0].ID, 5*time.Second)

	if _, err := d.Redeliverer.Redeliver(ctx, "m2", del.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another merchant's delivery: %v, want ErrNotFound", err)
	}
	if _, err := d.Redeliverer.Redeliver(ctx, "m1", uuid.Must(uuid.NewV7())); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown delivery: %v, want ErrNotFound", err)
	}
	if _, err := d.Redeliverer.Redeliver(ctx, "m1", uuid.New()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("non-v7 id: %v, want ErrNotFound", err)
	}
	off := store.SubscriptionDisabled
	if _, err := e.Store.Subscriptions.UpdateSubscription(ctx, "m1", sub.ID, store.SubscriptionUpdate{Status: &off}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Redeliverer.Redeliver(ctx, "m1", del.ID); !errors.Is(err, store.ErrConflict) {
		t.Errorf("disabled subscription: %v, want ErrConflict", err)
	}
	if n := len(rcv.Got()); n != 1 {
		t.Errorf("receiver got %d requests, want only the first attempt", n)
	}
}

// TestTestDeliveryLeavesHealthAlone: a test delivery that fails for good
// changes no health counter; a real one that fails does.
func TestTestDeliveryLeavesHealthAlone(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	ctx := context.Background()
	rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(500))
	sub, _ := e.Subscribe("m1", rcv.URL, "payout.paid")
	d, _ := e.Dispatcher()
	e.Run(d)

	td, err := d.Publisher.SendTestEvent(ctx, "m1", sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !td.Test || td.EventType != publish.TestEventType || td.SubscriptionID != sub.ID {
		t.Fatalf("test delivery %+v", td)
	}
	got := e.WaitSettled(td.ID, 5*time.Second)
	if got.Status != store.DeliveryFailed || got.AttemptCount != len(dispatchertest.FastSchedule.Delays)+1 {
		t.Fatalf("test delivery %s after %d attempts; want failed after the whole schedule", got.Status, got.AttemptCount)
	}
	s, err := e.Store.Subscriptions.GetSubscription(ctx, "m1", sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	if s.Health.ConsecutiveFailures != 0 || s.Health.LastFailureAt != nil {
		t.Fatalf("health after a failing test delivery: %+v", s.Health)
	}

	ev := e.Publish(d, "m1", "payout.paid")
	e.WaitSettled(e.Deliveries(ev.ID)[0].ID, 5*time.Second)
	s, err = e.Store.Subscriptions.GetSubscription(ctx, "m1", sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	if s.Health.ConsecutiveFailures != len(dispatchertest.FastSchedule.Delays)+1 || s.Health.LastFailureAt == nil {
		t.Fatalf("health after a failing real delivery: %+v", s.Health)
	}

	if _, err := d.Publisher.SendTestEvent(ctx, "m2", sub.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("test event to another merchant's subscription: %v", err)
	}
}
