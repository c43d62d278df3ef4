package maintain_test

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/dispatcher/deliver"
	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
	"github.com/webhookd/webhookd/receiver"
	"github.com/webhookd/webhookd/retry"
)

// TestRedisFlushLosesNothing fails every first attempt, flushes Redis while
// the retries wait in it, and expects the sweeper to deliver everything
// from what Postgres holds.
func TestRedisFlushLosesNothing(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	var healthy atomic.Bool
	rcv := dispatchertest.NewReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		if healthy.Load() {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	const subs = 5
	for range subs {
		e.Subscribe("m1", rcv.URL, "*")
	}
	// A retry delay long enough that the retry tasks are still waiting in
	// Redis when it is flushed.
	d, reg := e.Dispatcher(func(c *dispatcher.Config) {
		c.Schedule = retry.Schedule{Delays: []time.Duration{2 * time.Second, 2 * time.Second}}
	})
	e.Run(d)
	var ids []store.Delivery
	for range 4 {
		ev := e.Publish(d, "m1", "payout.paid")
		ids = append(ids, e.Deliveries(ev.ID)...)
	}
	e.WaitFor("every first attempt to fail", 10*time.Second, func() bool {
		for _, del := range ids {
			if e.Delivery(del.ID).AttemptCount < 1 {
				return false
			}
		}
		return true
	})
	if err := e.RC.FlushDB(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	healthy.Store(true)
	start := time.Now()
	for _, del := range ids {
		got := e.WaitSettled(del.ID, 15*time.Second)
		if got.Status != store.DeliverySucceeded || got.AttemptCount != 2 {
			t.Fatalf("delivery %s: %s after %d attempts, want succeeded after 2", del.ID, got.Status, got.AttemptCount)
		}
	}
	t.Logf("%d deliveries whose tasks were flushed all succeeded %v after the flush", len(ids), time.Since(start).Round(time.Millisecond))
	if n := dispatchertest.Counter(t, reg, "webhookd_sweeper_requeued_total"); n < float64(len(ids)) {
		t.Errorf("webhookd_sweeper_requeued_total = %v, want at least %d", n, len(ids))
	}
	// The queues are back in asynq's registry, so the queue metrics and
	// the backlog alert see them again.
	queues, err := e.RC.SMembers(context.Background(), "asynq:queues").Result()
	if err != nil || !slices.Contains(queues, "deliveries") {
		t.Errorf("asynq's queue registry after the flush = %v, %v; want it to list deliveries", queues, err)
	}
}

// failFirstAttempt records a failed first attempt of del whose retry is
// due at once, and returns the delivery as it leaves it.
func failFirstAttempt(e *dispatchertest.Env, del store.Delivery) store.Delivery {
	e.T.Helper()
	ctx := context.Background()
	now := time.Now()
	leased, err := e.Store.Deliveries.LeaseDelivery(ctx, del.ID, del.CreatedAt, 1, now, time.Minute)
	if err != nil {
		e.T.Fatal(err)
	}
	status := http.StatusServiceUnavailable
	if err := e.Store.Deliveries.RecordAttempt(ctx, store.AttemptRecord{Delivery: leased.Delivery, Status: store.DeliveryPending,
		NextAttemptAt: &now, Attempt: store.Attempt{DeliveryID: del.ID, Number: 1, Status: store.AttemptFailed,
			Trigger: store.TriggerScheduled, HTTPStatus: &status, AttemptedAt: now}}); err != nil {
		e.T.Fatal(err)
	}
	return e.Delivery(del.ID)
}

// TestBacklogIsNotSweptAsLost is the bench's throughput scenario in small:
// one merchant with ten subscriptions and a backlog many times its share
// of the workers, so that its attempts wait in every state asynq has
// (pending, deferred over the merchant's share, active in a worker waiting
// for a slot) for longer than a lease and the grace. The sweeper, every
// second meanwhile, re-enqueues none of them, and every delivery is made
// once.
func TestBacklogIsNotSweptAsLost(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	rcv := dispatchertest.NewReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		time.Sleep(20 * time.Millisecond) // a receiver's own time, not a wait of the test
		w.WriteHeader(http.StatusOK)
	})
	const subs, events = 10, 40
	for range subs {
		e.Subscribe("m1", rcv.URL, "*")
	}
	// The grace is what a worker may take between taking an attempt from
	// the schedule and leasing its delivery: a second (the default is
	// ten), so that a loaded machine's pause (the race detector, every
	// package's tests at once) is not mistaken for a lost attempt; a
	// backlog still waits several times the lease and the grace. (Half a
	// second once failed in CI: 3 of 400 swept in a drain of 15 s that
	// takes 4 s alone.)
	var waitsAtMost time.Duration
	d, reg := e.Dispatcher(func(c *dispatcher.Config) {
		c.Concurrency, c.MerchantShare = 4, 0.25 // one attempt of m1 at a time
		// (The grace is at most the interval: both a second.)
		c.SweepInterval, c.SweepGrace = time.Second, time.Second
		waitsAtMost = deliver.LeaseFor(c.DeliveryTimeout) + c.SweepGrace
	})
	var dels []store.Delivery
	for range events {
		dels = append(dels, e.Deliveries(e.Publish(d, "m1", "payout.paid").ID)...)
	}
	start := time.Now()
	e.Run(d)
	for _, del := range dels {
		if got := e.WaitSettled(del.ID, 60*time.Second); got.Status != store.DeliverySucceeded || got.AttemptCount != 1 {
			t.Fatalf("delivery %s: %s after %d attempts, want succeeded after 1", del.ID, got.Status, got.AttemptCount)
		}
	}
	took := time.Since(start)
	if took <= waitsAtMost {
		// The last deliveries waited the whole drain: it must outlast a
		// lease and the grace for the sweeper to have been tempted.
		t.Fatalf("the backlog drained in %v: no longer than a lease and the grace (%v), which tests nothing", took, waitsAtMost)
	}
	e.WaitSwept(reg)
	sweeps := dispatchertest.CounterWith(t, reg, "webhookd_tasks_total", "task", queue.TaskSweep)
	t.Logf("%d deliveries of one merchant at one attempt at a time drained in %v, over %v sweeps",
		len(dels), took.Round(time.Millisecond), sweeps)
	if n := dispatchertest.Counter(t, reg, "webhookd_sweeper_requeued_total"); n != 0 {
		t.Errorf("the sweeper re-enqueued %v deliveries of a backlog", n)
	}
	if n := len(rcv.Got()); n != len(dels) {
		t.Errorf("the receiver got %d requests for %d deliveries", n, len(dels))
	}
}

// TestSweepLeavesParkedAttemptsAlone: a delivery overdue because its
// attempt waits its turn in the schedule (a backlog, a merchant over its
// share, a rate limit's turn) is not lost work: sweeping parks nothing
// again for it. Once the schedule is gone (Redis flushed), the same sweep
// finds every one of those deliveries and parks its attempt, once.
func TestSweepLeavesParkedAttemptsAlone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		subs int // the event's fan-out
		// arrange changes what the publish left parked, and returns the
		// deliveries left overdue.
		arrange func(e *dispatchertest.Env, d *dispatcher.Dispatcher, dels []store.Delivery) []store.Delivery
	}{
		{"a first attempt parked", 1, nil},
		{"a fan-out's first attempts parked", 3, nil},
		{"the event's other deliveries leased", 3, func(e *dispatchertest.Env, _ *dispatcher.Dispatcher, dels []store.Delivery) []store.Delivery {
			for _, del := range dels[1:] {
				if _, err := e.Store.Deliveries.LeaseDelivery(context.Background(), del.ID, del.CreatedAt, 1, time.Now(), time.Hour); err != nil {
					e.T.Fatal(err)
				}
			}
			return dels[:1]
		}},
		{"a second attempt parked", 1, func(e *dispatchertest.Env, d *dispatcher.Dispatcher, dels []store.Delivery) []store.Delivery {
			del := failFirstAttempt(e, dels[0])
			if err := dispatchertest.ParkAttempt(context.Background(), e.RC, del, 2, time.Now()); err != nil {
				e.T.Fatal(err)
			}
			return []store.Delivery{del}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := dispatchertest.New(t)
			rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusOK))
			for range tc.subs {
				e.Subscribe("m1", rcv.URL, "*")
			}
			// The dispatcher's clock jumps a minute once the event is
			// published: its deliveries have waited that long in the
			// backlog, longer than any lease and the grace.
			var offset atomic.Int64
			d, _ := e.Dispatcher(func(c *dispatcher.Config) {
				c.Clock = clock.Func(func() time.Time { return time.Now().Add(time.Duration(offset.Load())) })
			})
			ev := e.Publish(d, "m1", "payout.paid")
			due := e.Deliveries(ev.ID)
			if tc.arrange != nil {
				due = tc.arrange(e, d, due)
			}
			offset.Store(int64(time.Minute))
			ctx := context.Background()

			if n, err := dispatcher.SweepOnce(ctx, d); err != nil || n != 0 {
				t.Fatalf("the sweeper parked again %d of %d deliveries whose attempts wait their turn (%v)", n, len(due), err)
			}
			if err := e.RC.FlushDB(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if n, err := dispatcher.SweepOnce(ctx, d); err != nil || n != len(due) {
				t.Fatalf("after the schedule was lost the sweeper parked %d deliveries (%v), want %d", n, err, len(due))
			}
			for _, del := range due {
				if ok, err := dispatchertest.Parked(ctx, e.RC, del, del.AttemptCount+1); err != nil || !ok {
					t.Errorf("delivery %s (attempt %d) is not parked after the sweep (%v)", del.ID, del.AttemptCount+1, err)
				}
			}
			if n, err := dispatcher.SweepOnce(ctx, d); err != nil || n != 0 {
				t.Errorf("the sweep after it parked %d deliveries (%v), want none", n, err)
			}
		})
	}
}

// TestLostFirstAttemptsAreSwept loses an event's first attempts before any
// worker made them, in each way the schedule can lose them: the sweeper
// finds the deliveries in Postgres and parks them again, and each is made
// once.
func TestLostFirstAttemptsAreSwept(t *testing.T) {
	t.Parallel()
	const subs = 3
	for _, tc := range []struct {
		name string
		lose func(e *dispatchertest.Env, d *dispatcher.Dispatcher)
	}{
		{"the schedule flushed (Redis lost its data)", func(e *dispatchertest.Env, _ *dispatcher.Dispatcher) {
			if err := e.RC.FlushDB(context.Background()).Err(); err != nil {
				e.T.Fatal(err)
			}
		}},
		{"taken by a worker that died before it leased them", func(e *dispatchertest.Env, d *dispatcher.Dispatcher) {
			if n, err := dispatchertest.TakeAndLose(context.Background(), e.RC, time.Now()); err != nil || n != subs {
				e.T.Fatalf("the doomed worker took %d attempts (%v), want %d", n, err, subs)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := dispatchertest.New(t)
			rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusOK))
			d, reg, ev := e.UnworkedEvent(rcv, subs)
			tc.lose(e, d)
			e.Run(d)
			for _, del := range e.Deliveries(ev.ID) {
				if got := e.WaitSettled(del.ID, 10*time.Second); got.Status != store.DeliverySucceeded || got.AttemptCount != 1 {
					t.Fatalf("delivery %s: %s after %d attempts, want succeeded after 1", del.ID, got.Status, got.AttemptCount)
				}
			}
			if n := len(rcv.Got()); n != subs {
				t.Errorf("receiver got %d requests, want %d", n, subs)
			}
			if n := dispatchertest.Counter(t, reg, "webhookd_sweeper_requeued_total"); n != subs {
				t.Errorf("webhookd_sweeper_requeued_total = %v, want %d", n, subs)
			}
		})
	}
}

// TestSweptAttemptsStayBatched: the attempts of a batched subscription
// that the schedule lost (Redis flushed) are parked again in their lane
// with the subscription's batch, so they still go in batches; a swept
// attempt that set no batch on its lane sent every delivery of the
// subscription alone.
func TestSweptAttemptsStayBatched(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusOK))
	const size, events = 5, 10
	url, rate := rcv.URL, 1000
	// The wait is long: a batch goes only once it is full.
	e.SubscribeDraft("m1", subscriptions.Draft{URL: &url, Events: []string{"*"}, RateLimit: &rate,
		Batch: &store.Batch{MaxSize: size, MaxWaitMS: 10_000}})
	// The clock jumps a minute once the events are published: their
	// deliveries are overdue by more than any lease and the grace.
	var offset atomic.Int64
	d, _ := e.Dispatcher(func(c *dispatcher.Config) {
		c.Clock = clock.Func(func() time.Time { return time.Now().Add(time.Duration(offset.Load())) })
	})
	var dels []store.Delivery
	for range events {
		dels = append(dels, e.Deliveries(e.Publish(d, "m1", "payout.paid").ID)...)
	}
	ctx := context.Background()
	if err := e.RC.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	offset.Store(int64(time.Minute))
	if n, err := dispatcher.SweepOnce(ctx, d); err != nil || n != events {
		t.Fatalf("the sweep parked %d attempts (%v), want %d", n, err, events)
	}
	e.Run(d)
	for _, del := range dels {
		if got := e.WaitSettled(del.ID, 15*time.Second); got.Status != store.DeliverySucceeded {
			t.Fatalf("delivery %s: %s, want succeeded", del.ID, got.Status)
		}
	}
	got := rcv.Got()
	for _, r := range got {
		if n := r.Header.Get(receiver.HeaderBatchSize); n != strconv.Itoa(size) {
			t.Errorf("a request with %s %q (webhook-id %s), want every one a batch of %d", receiver.HeaderBatchSize, n,
				r.Header.Get("webhook-id"), size)
		}
	}
	if len(got) != events/size {
		t.Errorf("the receiver got %d requests for %d swept deliveries, want %d batches", len(got), events, events/size)
	}
}
