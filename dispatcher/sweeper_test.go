package dispatcher_test

import (
	"context"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/dispatcher/deliver"
	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
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

// TestStoppedWorkerMidAttempt stops the dispatcher while a receiver holds
// the first attempt, then starts a new one: the delivery completes.
func TestStoppedWorkerMidAttempt(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	inFlight := make(chan struct{}, 1)
	rcv := dispatchertest.NewReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			inFlight <- struct{}{}
			<-r.Context().Done() // hangs until the client gives up
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	e.Subscribe("m1", rcv.URL, "*")
	first, _ := e.Dispatcher()
	stop := e.Run(first)
	ev := e.Publish(first, "m1", "payout.paid")
	<-inFlight
	stop() // drains: the attempt in flight ends (timeout) and is recorded
	second, _ := e.Dispatcher()
	e.Run(second)
	del := e.WaitSettled(e.Deliveries(ev.ID)[0].ID, 10*time.Second)
	if del.Status != store.DeliverySucceeded || del.AttemptCount != 2 || *del.Attempts[0].Error != "timeout" {
		t.Fatalf("delivery %s after %d attempts (%+v), want succeeded on attempt 2 after a timeout", del.Status, del.AttemptCount, del.Attempts)
	}
}

// TestCrashedWorkerLeaseExpires simulates a worker that leased an attempt
// and died: its lease blocks the attempt (the task that comes to run it is
// a duplicate and is dropped) until the lease lapses, then the sweeper
// brings it back and the delivery completes.
func TestCrashedWorkerLeaseExpires(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusOK))
	e.Subscribe("m1", rcv.URL, "*")
	d, _ := e.Dispatcher()
	ev := e.Publish(d, "m1", "payout.paid") // not running yet: the task waits in Redis
	del := e.Deliveries(ev.ID)[0]
	const lease = 1500 * time.Millisecond
	leased, err := e.Store.LeaseDelivery(context.Background(), del.ID, del.CreatedAt, 1, time.Now(), lease)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	e.Run(d)
	got := e.WaitSettled(del.ID, 10*time.Second)
	took := time.Since(start)
	if got.Status != store.DeliverySucceeded || got.AttemptCount != 1 {
		t.Fatalf("delivery %s after %d attempts, want succeeded after 1", got.Status, got.AttemptCount)
	}
	if arrived := rcv.Got()[0].At; arrived.Before(leased.LeaseUntil) {
		t.Fatalf("attempt ran at %v while the dead worker's lease held until %v", arrived, leased.LeaseUntil)
	}
	t.Logf("delivered %v after start, after the dead worker's lease of %v lapsed", took.Round(time.Millisecond), lease)
}

// TestHangingReceiverDoesNotStallOthers queues many deliveries to a
// receiver that hangs until the timeout ahead of deliveries to healthy
// receivers, and expects the healthy ones delivered promptly.
func TestHangingReceiverDoesNotStallOthers(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	hang := dispatchertest.NewReceiver(t, func(_ int, _ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	fast := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusOK))
	e.Subscribe("slow-merchant", hang.URL, "*")
	const healthySubs = 20
	for range healthySubs {
		e.Subscribe("fast-merchant", fast.URL, "*")
	}
	d, _ := e.Dispatcher(func(c *dispatcher.Config) {
		c.Concurrency = 8
		c.SubscriptionConcurrency = 2
		c.DeliveryTimeout = time.Second
	})
	// Queue the slow ones first, so that they are ahead in the queue.
	const slowEvents = 40
	for range slowEvents {
		e.Publish(d, "slow-merchant", "payout.paid")
	}
	ev := e.Publish(d, "fast-merchant", "payout.paid")
	start := time.Now()
	e.Run(d)
	e.WaitFor("the healthy deliveries", 10*time.Second, func() bool { return len(fast.Got()) >= healthySubs })
	took := time.Since(start)
	var slowest time.Duration
	for _, r := range fast.Got() {
		slowest = max(slowest, r.At.Sub(start))
	}
	t.Logf("%d slow deliveries (receiver hangs %v) queued ahead of %d healthy ones, 8 workers, cap 2 per subscription: "+
		"all healthy delivered %v after start (slowest %v); the hanging receiver had %d requests by then",
		slowEvents, time.Second, healthySubs, took.Round(time.Millisecond), slowest.Round(time.Millisecond), len(hang.Got()))
	// Without the cap the 8 workers would each hang a full second per slow
	// delivery: 40/8 = 5 s before the first healthy one. With it, about
	// 0.2 s; on a loaded machine a healthy attempt over its merchant's share
	// of 2 may be deferred, and asynq keeps a deferred task's time in whole
	// seconds, so it can come back up to a second later, once or twice (2 s
	// seen in CI).
	if took > 3*time.Second {
		t.Fatalf("healthy deliveries took %v behind a hanging receiver", took)
	}
	// The receiver answers before the attempt is recorded: the outcomes
	// follow within moments.
	e.WaitFor("every healthy delivery recorded as succeeded", 10*time.Second, func() bool {
		for _, del := range e.Deliveries(ev.ID) {
			if e.Delivery(del.ID).Status != store.DeliverySucceeded {
				return false
			}
		}
		return true
	})
}

// TestOutcomeWaitsForPostgres: Postgres goes away while the receiver holds
// the attempt, and comes back two seconds later, within the attempt's
// lease. The outcome is recorded when it is back; the receiver is not asked
// again.
func TestOutcomeWaitsForPostgres(t *testing.T) {
	t.Parallel()
	pg := storetest.NewPostgres(t)
	st, err := store.Open(context.Background(), storetest.NewDatabaseOn(t, pg.AdminURL()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	e := dispatchertest.NewOn(t, st)
	known := make(chan struct{}) // the test has read the delivery's id
	rcv := dispatchertest.NewReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			<-known
			pg.Stop()
			go func() {
				time.Sleep(2 * time.Second)
				pg.Start()
			}()
		}
		w.WriteHeader(http.StatusOK)
	})
	e.Subscribe("m1", rcv.URL, "*")
	// The outcome waits for Postgres while the attempt's lease holds (the
	// delivery timeout plus a margin, 7.5 s here); an outage longer than
	// the lease lets another worker make the attempt again, at least once
	// being the guarantee past it. The outage below is 2 s plus a restart.
	d, reg := e.Dispatcher(func(c *dispatcher.Config) { c.DeliveryTimeout = 5 * time.Second })
	e.Run(d)
	ev := e.Publish(d, "m1", "payout.paid")
	del := e.Deliveries(ev.ID)[0]
	close(known)
	var got store.Delivery
	e.WaitFor("the delivery to settle once Postgres is back", 20*time.Second, func() bool {
		got, err = st.DeliveryByID(context.Background(), del.ID)
		return err == nil && got.Status != store.DeliveryPending
	})
	if got.Status != store.DeliverySucceeded || got.AttemptCount != 1 {
		t.Fatalf("delivery: %s after %d attempts, want succeeded after 1", got.Status, got.AttemptCount)
	}
	e.WaitSwept(reg) // a duplicate attempt, if any, would have been made
	if n := len(rcv.Got()); n != 1 {
		t.Errorf("the receiver was asked %d times, want once", n)
	}
}

// failFirstAttempt records a failed first attempt of del whose retry is
// due at once, and returns the delivery as it leaves it.
func failFirstAttempt(e *dispatchertest.Env, del store.Delivery) store.Delivery {
	e.T.Helper()
	ctx := context.Background()
	now := time.Now()
	leased, err := e.Store.LeaseDelivery(ctx, del.ID, del.CreatedAt, 1, now, time.Minute)
	if err != nil {
		e.T.Fatal(err)
	}
	status := http.StatusServiceUnavailable
	if err := e.Store.RecordAttempt(ctx, store.AttemptRecord{Delivery: leased.Delivery, Status: store.DeliveryPending,
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
// 500 ms meanwhile, re-enqueues none of them, and every delivery is made
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
	// the schedule and leasing its delivery: half a second, so that a
	// loaded machine's pause (the race detector, every package's tests at
	// once) is not mistaken for a lost attempt; a backlog still waits
	// many times the lease and the grace.
	var waitsAtMost time.Duration
	d, reg := e.Dispatcher(func(c *dispatcher.Config) {
		c.Concurrency, c.MerchantShare = 4, 0.25 // one attempt of m1 at a time
		// (The grace is at most the interval: both half a second.)
		c.SweepInterval, c.SweepGrace = 500*time.Millisecond, 500*time.Millisecond
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
				if _, err := e.Store.LeaseDelivery(context.Background(), del.ID, del.CreatedAt, 1, time.Now(), time.Hour); err != nil {
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
