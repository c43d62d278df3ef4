package dispatcher_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/retry"
	"github.com/webhookd/webhookd/store"
	"github.com/webhookd/webhookd/store/storetest"
)

// TestRedisFlushLosesNothing fails every first attempt, flushes Redis while
// the retries wait in it, and expects the sweeper to deliver everything
// from what Postgres holds.
func TestRedisFlushLosesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var healthy atomic.Bool
	rcv := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		if healthy.Load() {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	const subs = 5
	for range subs {
		e.subscribe("m1", rcv.URL, "*")
	}
	// A retry delay long enough that the retry tasks are still waiting in
	// Redis when it is flushed.
	d, reg := e.dispatcher(func(c *dispatcher.Config) {
		c.Schedule = retry.Schedule{Delays: []time.Duration{2 * time.Second, 2 * time.Second}}
	})
	e.run(d)
	var ids []store.Delivery
	for range 4 {
		ev := e.publish(d, "m1", "payout.paid")
		ids = append(ids, e.deliveries(ev.ID)...)
	}
	e.waitFor("every first attempt to fail", 10*time.Second, func() bool {
		for _, del := range ids {
			if e.delivery(del.ID).AttemptCount < 1 {
				return false
			}
		}
		return true
	})
	if err := e.rc.FlushDB(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	healthy.Store(true)
	start := time.Now()
	for _, del := range ids {
		got := e.waitSettled(del.ID, 15*time.Second)
		if got.Status != store.DeliverySucceeded || got.AttemptCount != 2 {
			t.Fatalf("delivery %s: %s after %d attempts, want succeeded after 2", del.ID, got.Status, got.AttemptCount)
		}
	}
	t.Logf("%d deliveries whose tasks were flushed all succeeded %v after the flush", len(ids), time.Since(start).Round(time.Millisecond))
	if n := counter(t, reg, "webhookd_sweeper_requeued_total"); n < float64(len(ids)) {
		t.Errorf("webhookd_sweeper_requeued_total = %v, want at least %d", n, len(ids))
	}
	// The queues are back in asynq's registry, so the queue metrics and
	// the backlog alert see them again.
	queues, err := e.rc.SMembers(context.Background(), "asynq:queues").Result()
	if err != nil || !slices.Contains(queues, "deliveries") {
		t.Errorf("asynq's queue registry after the flush = %v, %v; want it to list deliveries", queues, err)
	}
}

// TestStoppedWorkerMidAttempt stops the dispatcher while a receiver holds
// the first attempt, then starts a new one: the delivery completes.
func TestStoppedWorkerMidAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inFlight := make(chan struct{}, 1)
	rcv := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			inFlight <- struct{}{}
			<-r.Context().Done() // hangs until the client gives up
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	e.subscribe("m1", rcv.URL, "*")
	first, _ := e.dispatcher()
	stop := e.run(first)
	ev := e.publish(first, "m1", "payout.paid")
	<-inFlight
	stop() // drains: the attempt in flight ends (timeout) and is recorded
	second, _ := e.dispatcher()
	e.run(second)
	del := e.waitSettled(e.deliveries(ev.ID)[0].ID, 10*time.Second)
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
	e := newEnv(t)
	rcv := newReceiver(t, answer(http.StatusOK))
	e.subscribe("m1", rcv.URL, "*")
	d, _ := e.dispatcher()
	ev := e.publish(d, "m1", "payout.paid") // not running yet: the task waits in Redis
	del := e.deliveries(ev.ID)[0]
	const lease = 1500 * time.Millisecond
	leased, err := e.store.LeaseDelivery(context.Background(), del.ID, del.CreatedAt, 1, time.Now(), lease)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	e.run(d)
	got := e.waitSettled(del.ID, 10*time.Second)
	took := time.Since(start)
	if got.Status != store.DeliverySucceeded || got.AttemptCount != 1 {
		t.Fatalf("delivery %s after %d attempts, want succeeded after 1", got.Status, got.AttemptCount)
	}
	if arrived := rcv.got()[0].At; arrived.Before(leased.LeaseUntil) {
		t.Fatalf("attempt ran at %v while the dead worker's lease held until %v", arrived, leased.LeaseUntil)
	}
	t.Logf("delivered %v after start, after the dead worker's lease of %v lapsed", took.Round(time.Millisecond), lease)
}

// TestHangingReceiverDoesNotStallOthers queues many deliveries to a
// receiver that hangs until the timeout ahead of deliveries to healthy
// receivers, and expects the healthy ones delivered promptly.
func TestHangingReceiverDoesNotStallOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	hang := newReceiver(t, func(_ int, _ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	fast := newReceiver(t, answer(http.StatusOK))
	e.subscribe("slow-merchant", hang.URL, "*")
	const healthySubs = 20
	for range healthySubs {
		e.subscribe("fast-merchant", fast.URL, "*")
	}
	d, _ := e.dispatcher(func(c *dispatcher.Config) {
		c.Concurrency = 8
		c.SubscriptionConcurrency = 2
		c.DeliveryTimeout = time.Second
	})
	// Queue the slow ones first, so that they are ahead in the queue.
	const slowEvents = 40
	for range slowEvents {
		e.publish(d, "slow-merchant", "payout.paid")
	}
	ev := e.publish(d, "fast-merchant", "payout.paid")
	start := time.Now()
	e.run(d)
	e.waitFor("the healthy deliveries", 10*time.Second, func() bool { return len(fast.got()) >= healthySubs })
	took := time.Since(start)
	var slowest time.Duration
	for _, r := range fast.got() {
		slowest = max(slowest, r.At.Sub(start))
	}
	t.Logf("%d slow deliveries (receiver hangs %v) queued ahead of %d healthy ones, 8 workers, cap 2 per subscription: "+
		"all healthy delivered %v after start (slowest %v); the hanging receiver had %d requests by then",
		slowEvents, time.Second, healthySubs, took.Round(time.Millisecond), slowest.Round(time.Millisecond), len(hang.got()))
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
	e.waitFor("every healthy delivery recorded as succeeded", 10*time.Second, func() bool {
		for _, del := range e.deliveries(ev.ID) {
			if e.delivery(del.ID).Status != store.DeliverySucceeded {
				return false
			}
		}
		return true
	})
}

// unworkedEvent subscribes rcv subs times to every event of m1, builds a
// dispatcher that sweeps every 200 ms, and publishes one event that no
// worker has run yet (the dispatcher is not running).
func (e *env) unworkedEvent(rcv *receiver, subs int) (*dispatcher.Dispatcher, *prometheus.Registry, store.Event) {
	e.t.Helper()
	for range subs {
		e.subscribe("m1", rcv.URL, "*")
	}
	d, reg := e.dispatcher(func(c *dispatcher.Config) { c.SweepInterval, c.SweepGrace = 200*time.Millisecond, 100*time.Millisecond })
	return d, reg, e.publish(d, "m1", "payout.paid")
}

// TestLostFirstAttemptsAreSwept loses the first-attempts task of an event
// with several deliveries before any worker ran it: the sweeper puts them
// back, once each.
func TestLostFirstAttemptsAreSwept(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rcv := newReceiver(t, answer(http.StatusOK))
	const subs = 3
	d, reg, ev := e.unworkedEvent(rcv, subs)
	if err := e.rc.FlushDB(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	e.run(d)
	for _, del := range e.deliveries(ev.ID) {
		if got := e.waitSettled(del.ID, 10*time.Second); got.Status != store.DeliverySucceeded || got.AttemptCount != 1 {
			t.Fatalf("delivery %s: %s after %d attempts, want succeeded after 1", del.ID, got.Status, got.AttemptCount)
		}
	}
	if n := len(rcv.got()); n != subs {
		t.Fatalf("receiver got %d requests, want %d", n, subs)
	}
	if n := counter(t, reg, "webhookd_sweeper_requeued_total"); n != subs {
		t.Fatalf("webhookd_sweeper_requeued_total = %v, want %d", n, subs)
	}
}

// TestArchivedFirstAttemptsAreSwept: asynq archives a task whose workers
// kept dying, and an archived task keeps its id taken. The sweeper must
// still get the overdue deliveries attempted.
func TestArchivedFirstAttemptsAreSwept(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rcv := newReceiver(t, answer(http.StatusOK))
	d, _, ev := e.unworkedEvent(rcv, 2)
	insp := asynq.NewInspector(e.cfg.Redis)
	defer insp.Close()
	if err := insp.ArchiveTask("deliveries", "f:"+ev.ID.String()); err != nil {
		t.Fatalf("archive the first-attempts task: %v", err)
	}
	e.run(d)
	for _, del := range e.deliveries(ev.ID) {
		if got := e.waitSettled(del.ID, 10*time.Second); got.Status != store.DeliverySucceeded {
			t.Fatalf("delivery %s: %s, want succeeded", del.ID, got.Status)
		}
	}
}

// TestHandedOverFirstAttemptsAreNotSweptAgain: a first-attempts task that
// handed its attempts to tasks of their own (its merchant at its share) has
// ended and freed its id; the attempts, overdue while they wait their turn,
// are a backlog, not a loss, and the sweeper enqueues nothing for them.
func TestHandedOverFirstAttemptsAreNotSweptAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rcv := newReceiver(t, answer(http.StatusOK))
	d, reg, ev := e.unworkedEvent(rcv, 3)
	insp := asynq.NewInspector(e.cfg.Redis)
	defer insp.Close()
	if err := insp.DeleteTask("deliveries", "f:"+ev.ID.String()); err != nil {
		t.Fatal(err)
	}
	for _, del := range e.deliveries(ev.ID) {
		// What handOff leaves: the attempt's own task, waiting its turn
		// (here, long after the test).
		e.enqueueAttempt(del, 1, asynq.ProcessIn(time.Hour))
	}
	e.run(d)
	sweeps := func() float64 { return counterWith(t, reg, "webhookd_tasks_total", "task", dispatcher.TaskSweep) }
	e.waitFor("two sweeps", 10*time.Second, func() bool { return sweeps() >= 2 })
	if n := counter(t, reg, "webhookd_sweeper_requeued_total"); n != 0 {
		t.Errorf("the sweeper re-enqueued %v attempts that were waiting in tasks of their own", n)
	}
	if _, err := insp.GetTaskInfo("deliveries", "f:"+ev.ID.String()); err == nil {
		t.Error("the sweeper enqueued the event's first attempts again")
	}
	if n := len(rcv.got()); n != 0 {
		t.Errorf("the receiver got %d requests; the attempts were not due", n)
	}
}

// TestDeadWorkersTasksAreSwept: a worker process killed mid-task leaves
// the task active in asynq, holding its id, until asynq's own lease (30 s)
// and recoverer (every minute) come round. The sweeper must see that the
// task's asynq lease is no longer renewed (a live worker's heartbeat renews
// it every 5 s; the sweeper allows 8 s), and get the attempt made under
// another id meanwhile.
func TestDeadWorkersTasksAreSwept(t *testing.T) {
	for _, subs := range []int{1, 2} { // a lone attempt task; a first-attempts task
		t.Run(fmt.Sprintf("%d subscriptions", subs), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			rcv := newReceiver(t, answer(http.StatusOK))
			d, _, ev := e.unworkedEvent(rcv, subs)

			// The doomed worker is this test binary run again as an asynq
			// server whose handler never returns; it is SIGKILLed once it
			// holds the task.
			doomed := exec.Command(os.Args[0], "-test.run=^TestDoomedWorker$")
			doomed.Env = append(os.Environ(), "WEBHOOKD_DOOMED_WORKER_SOCKET="+e.redis.Socket)
			if err := doomed.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = doomed.Process.Kill(); _ = doomed.Wait() })
			insp := asynq.NewInspector(e.cfg.Redis)
			defer insp.Close()
			taskID := "f:" + ev.ID.String()
			if subs == 1 {
				taskID = "d:" + e.deliveries(ev.ID)[0].ID.String() + ":1"
			}
			e.waitFor("the doomed worker to take the task", 10*time.Second, func() bool {
				info, err := insp.GetTaskInfo("deliveries", taskID)
				return err == nil && info.State == asynq.TaskStateActive
			})
			_ = doomed.Process.Kill()
			_ = doomed.Wait()

			e.run(d)
			for _, del := range e.deliveries(ev.ID) {
				if got := e.waitSettled(del.ID, 20*time.Second); got.Status != store.DeliverySucceeded {
					t.Fatalf("delivery %s: %s, want succeeded while the dead worker's task is active", del.ID, got.Status)
				}
			}
		})
	}
}

// TestDoomedWorker is not a test: TestDeadWorkersTasksAreSwept runs the
// test binary with it as a worker that takes one task and hangs until it is
// killed. Run alone, it returns at once.
func TestDoomedWorker(t *testing.T) {
	socket := os.Getenv("WEBHOOKD_DOOMED_WORKER_SOCKET")
	if socket == "" {
		return
	}
	srv := asynq.NewServer(asynq.RedisClientOpt{Network: "unix", Addr: socket},
		asynq.Config{Queues: map[string]int{"deliveries": 1}, Concurrency: 1, TaskCheckInterval: 10 * time.Millisecond,
			LogLevel: asynq.FatalLevel})
	hang := make(chan struct{})
	if err := srv.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
		srv.Stop() // take nothing more
		<-hang
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	<-hang
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
	e := newEnvOn(t, st)
	known := make(chan struct{}) // the test has read the delivery's id
	rcv := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
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
	e.subscribe("m1", rcv.URL, "*")
	// The outcome waits for Postgres while the attempt's lease holds (the
	// delivery timeout plus a margin, 7.5 s here); an outage longer than
	// the lease lets another worker make the attempt again, at least once
	// being the guarantee past it. The outage below is 2 s plus a restart.
	d, reg := e.dispatcher(func(c *dispatcher.Config) { c.DeliveryTimeout = 5 * time.Second })
	e.run(d)
	ev := e.publish(d, "m1", "payout.paid")
	del := e.deliveries(ev.ID)[0]
	close(known)
	var got store.Delivery
	e.waitFor("the delivery to settle once Postgres is back", 20*time.Second, func() bool {
		got, err = st.DeliveryByID(context.Background(), del.ID)
		return err == nil && got.Status != store.DeliveryPending
	})
	if got.Status != store.DeliverySucceeded || got.AttemptCount != 1 {
		t.Fatalf("delivery: %s after %d attempts, want succeeded after 1", got.Status, got.AttemptCount)
	}
	e.waitSwept(reg) // a duplicate attempt, if any, would have been made
	if n := len(rcv.got()); n != 1 {
		t.Errorf("the receiver was asked %d times, want once", n)
	}
}

// TestSweepLeavesWaitingTasksAlone: a delivery overdue because its task
// waits its turn, in whatever state asynq keeps that task, is a backlog and
// not lost work: sweeping enqueues nothing for it. Once the tasks are gone
// (Redis flushed), the same sweep finds every one of those deliveries and
// enqueues it, once.
func TestSweepLeavesWaitingTasksAlone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		subs int // the event's fan-out: 1 publishes an attempt task, more a first-attempts task
		// arrange puts the published task, named id, in the state of the
		// case, and returns the deliveries left overdue.
		arrange func(e *env, id string, dels []store.Delivery) []store.Delivery
	}{
		{"attempt task pending", 1, nil},
		{"first-attempts task pending", 3, nil},
		{"attempt task scheduled", 1, func(e *env, id string, dels []store.Delivery) []store.Delivery {
			e.rescheduleTask(id, time.Hour)
			return dels
		}},
		{"attempt task deferred (asynq's retry set)", 1, func(e *env, id string, dels []store.Delivery) []store.Delivery {
			e.deferTask(id)
			return dels
		}},
		{"attempt task active in a live worker", 1, func(e *env, id string, dels []store.Delivery) []store.Delivery {
			e.holdTask(id)
			return dels
		}},
		{"first-attempts task active in a live worker", 3, func(e *env, id string, dels []store.Delivery) []store.Delivery {
			e.holdTask(id)
			return dels
		}},
		{"first-attempts task pending, the event's other deliveries leased", 3, func(e *env, _ string, dels []store.Delivery) []store.Delivery {
			for _, del := range dels[1:] {
				if _, err := e.store.LeaseDelivery(context.Background(), del.ID, del.CreatedAt, 1, time.Now(), time.Hour); err != nil {
					e.t.Fatal(err)
				}
			}
			return dels[:1]
		}},
		{"first attempts handed to tasks of their own", 3, func(e *env, id string, dels []store.Delivery) []store.Delivery {
			e.deleteTask(id)
			for _, del := range dels {
				e.enqueueAttempt(del, 1)
			}
			return dels
		}},
		{"first attempts in their commit group's task, pending", 3, func(e *env, id string, dels []store.Delivery) []store.Delivery {
			e.moveTask(id, dispatcher.GroupTaskID(dels[0].ID))
			return dels
		}},
		{"first attempts in their commit group's task, active in a live worker", 3, func(e *env, id string, dels []store.Delivery) []store.Delivery {
			group := dispatcher.GroupTaskID(dels[0].ID)
			e.moveTask(id, group)
			e.holdTask(group)
			return dels
		}},
		{"second attempt's task deferred (asynq's retry set)", 1, func(e *env, id string, dels []store.Delivery) []store.Delivery {
			e.deleteTask(id)
			del := e.failFirstAttempt(dels[0])
			e.deferTask(e.enqueueAttempt(del, 2))
			return []store.Delivery{del}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			rcv := newReceiver(t, answer(http.StatusOK))
			for range tc.subs {
				e.subscribe("m1", rcv.URL, "*")
			}
			// The dispatcher's clock jumps a minute once the event is
			// published: its deliveries have waited that long in the backlog,
			// longer than any lease and the grace.
			var offset atomic.Int64
			d, _ := e.dispatcher(func(c *dispatcher.Config) {
				c.Clock = dispatcher.ClockFunc(func() time.Time { return time.Now().Add(time.Duration(offset.Load())) })
			})
			ev := e.publish(d, "m1", "payout.paid")
			dels := e.deliveries(ev.ID)
			id := "f:" + ev.ID.String()
			if tc.subs == 1 {
				id = "d:" + dels[0].ID.String() + ":1"
			}
			due := dels
			if tc.arrange != nil {
				due = tc.arrange(e, id, dels)
			}
			offset.Store(int64(time.Minute))
			ctx := context.Background()

			n, err := dispatcher.SweepOnce(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Fatalf("the sweeper re-enqueued %d of %d deliveries whose tasks wait their turn", n, len(due))
			}

			if err := e.rc.FlushDB(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if n, err := dispatcher.SweepOnce(ctx, d); err != nil || n != len(due) {
				t.Fatalf("after the tasks were lost the sweeper re-enqueued %d deliveries (%v), want %d", n, err, len(due))
			}
			for _, del := range due {
				if !e.hasTask("d:"+del.ID.String()+":"+strconv.Itoa(del.AttemptCount+1)) && !(del.AttemptCount == 0 && e.hasTask(id)) {
					t.Errorf("delivery %s (attempt %d) has no task after the sweep", del.ID, del.AttemptCount+1)
				}
			}
			if n, err := dispatcher.SweepOnce(ctx, d); err != nil || n != 0 {
				t.Errorf("the sweep after it re-enqueued %d deliveries (%v), want none", n, err)
			}
		})
	}
}

// hasTask tells whether the deliveries queue holds a task of that id.
func (e *env) hasTask(id string) bool {
	insp := asynq.NewInspector(e.cfg.Redis)
	defer insp.Close()
	_, err := insp.GetTaskInfo("deliveries", id)
	return err == nil
}

// deleteTask deletes the task of that id from the deliveries queue.
func (e *env) deleteTask(id string) {
	e.t.Helper()
	insp := asynq.NewInspector(e.cfg.Redis)
	defer insp.Close()
	if err := insp.DeleteTask("deliveries", id); err != nil {
		e.t.Fatalf("delete task %s: %v", id, err)
	}
}

// moveTask enqueues the task of id from again as id to, with opts: as
// when an event's first attempts were enqueued with its commit group's.
func (e *env) moveTask(from, to string, opts ...asynq.Option) {
	e.t.Helper()
	insp := asynq.NewInspector(e.cfg.Redis)
	defer insp.Close()
	info, err := insp.GetTaskInfo("deliveries", from)
	if err != nil {
		e.t.Fatal(err)
	}
	e.deleteTask(from)
	client := asynq.NewClient(e.cfg.Redis)
	defer client.Close()
	opts = append([]asynq.Option{asynq.Queue("deliveries"), asynq.TaskID(to)}, opts...)
	if _, err := client.Enqueue(asynq.NewTask(info.Type, info.Payload), opts...); err != nil {
		e.t.Fatal(err)
	}
}

// rescheduleTask puts the task of that id off until in from now, as a
// scheduled task.
func (e *env) rescheduleTask(id string, in time.Duration) {
	e.t.Helper()
	e.moveTask(id, id, asynq.ProcessIn(in))
}

// enqueueAttempt enqueues the task of attempt number of del, with opts, as
// the worker that made the attempt before it (or handed it over) does, and
// returns its id.
func (e *env) enqueueAttempt(del store.Delivery, number int, opts ...asynq.Option) string {
	e.t.Helper()
	client := asynq.NewClient(e.cfg.Redis)
	defer client.Close()
	id := "d:" + del.ID.String() + ":" + strconv.Itoa(number)
	payload := fmt.Sprintf(`{"d":%q,"c":%q,"s":%q,"n":%d,"t":"scheduled","m":%q}`,
		del.ID, del.CreatedAt.Format(time.RFC3339Nano), del.SubscriptionID, number, del.MerchantID)
	opts = append([]asynq.Option{asynq.Queue("deliveries"), asynq.TaskID(id)}, opts...)
	if _, err := client.Enqueue(asynq.NewTask(dispatcher.TaskAttempt, []byte(payload)), opts...); err != nil {
		e.t.Fatal(err)
	}
	return id
}

// failFirstAttempt records a failed first attempt of del whose retry is
// due at once, and returns the delivery as it leaves it.
func (e *env) failFirstAttempt(del store.Delivery) store.Delivery {
	e.t.Helper()
	ctx := context.Background()
	now := time.Now()
	leased, err := e.store.LeaseDelivery(ctx, del.ID, del.CreatedAt, 1, now, time.Minute)
	if err != nil {
		e.t.Fatal(err)
	}
	status := http.StatusServiceUnavailable
	if err := e.store.RecordAttempt(ctx, store.AttemptRecord{Delivery: leased.Delivery, Status: store.DeliveryPending,
		NextAttemptAt: &now, Attempt: store.Attempt{DeliveryID: del.ID, Number: 1, Status: store.AttemptFailed,
			Trigger: store.TriggerScheduled, HTTPStatus: &status, AttemptedAt: now}}); err != nil {
		e.t.Fatal(err)
	}
	return e.delivery(del.ID)
}

// deferTask has a worker take the task of that id and put it back for an
// hour, as an attempt over its merchant's share is (notDue): the task
// waits in asynq's retry set.
func (e *env) deferTask(id string) {
	e.t.Helper()
	srv := e.takeTask(id, asynq.TaskStateRetry, asynq.Config{
		RetryDelayFunc: func(int, error, *asynq.Task) time.Duration { return time.Hour },
		IsFailure:      func(error) bool { return false },
	}, func(context.Context) error { return errors.New("over its merchant's share") })
	srv.Shutdown()
}

// holdTask has a live worker take the task of that id and hold it, active,
// until the end of the test.
func (e *env) holdTask(id string) {
	e.t.Helper()
	release := make(chan struct{})
	srv := e.takeTask(id, asynq.TaskStateActive, asynq.Config{}, func(ctx context.Context) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	e.t.Cleanup(func() {
		close(release)
		srv.Shutdown()
	})
}

// takeTask starts a worker of one slot on the deliveries queue, with cfg,
// whose handler is handle, and waits until the task of that id is in
// state. The worker takes no other task.
func (e *env) takeTask(id string, state asynq.TaskState, cfg asynq.Config, handle func(context.Context) error) *asynq.Server {
	e.t.Helper()
	cfg.Queues, cfg.Concurrency, cfg.LogLevel = map[string]int{"deliveries": 1}, 1, asynq.FatalLevel
	cfg.TaskCheckInterval = 10 * time.Millisecond
	srv := asynq.NewServer(e.cfg.Redis, cfg)
	if err := srv.Start(asynq.HandlerFunc(func(ctx context.Context, _ *asynq.Task) error {
		srv.Stop() // take nothing more
		return handle(ctx)
	})); err != nil {
		e.t.Fatal(err)
	}
	insp := asynq.NewInspector(e.cfg.Redis)
	defer insp.Close()
	e.waitFor("task "+id+" to be "+state.String(), 10*time.Second, func() bool {
		info, err := insp.GetTaskInfo("deliveries", id)
		return err == nil && info.State == state
	})
	return srv
}

// TestBacklogIsNotSweptAsLost is the bench's throughput scenario in small:
// one merchant with ten subscriptions and a backlog many times its share
// of the workers, so that its attempts wait in every state asynq has
// (pending, deferred over the merchant's share, active in a worker waiting
// for a slot) for longer than a lease and the grace. The sweeper, every
// 200 ms meanwhile, re-enqueues none of them, and every delivery is made
// once.
func TestBacklogIsNotSweptAsLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rcv := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		time.Sleep(20 * time.Millisecond) // a receiver's own time, not a wait of the test
		w.WriteHeader(http.StatusOK)
	})
	const subs, events = 10, 20
	for range subs {
		e.subscribe("m1", rcv.URL, "*")
	}
	d, reg := e.dispatcher(func(c *dispatcher.Config) {
		c.Concurrency, c.MerchantShare = 4, 0.25 // one attempt of m1 at a time
		c.SweepInterval, c.SweepGrace = 200*time.Millisecond, 100*time.Millisecond
	})
	var dels []store.Delivery
	for range events {
		dels = append(dels, e.deliveries(e.publish(d, "m1", "payout.paid").ID)...)
	}
	start := time.Now()
	e.run(d)
	for _, del := range dels {
		if got := e.waitSettled(del.ID, 60*time.Second); got.Status != store.DeliverySucceeded || got.AttemptCount != 1 {
			t.Fatalf("delivery %s: %s after %d attempts, want succeeded after 1", del.ID, got.Status, got.AttemptCount)
		}
	}
	took := time.Since(start)
	e.waitSwept(reg)
	sweeps := counterWith(t, reg, "webhookd_tasks_total", "task", dispatcher.TaskSweep)
	t.Logf("%d deliveries of one merchant at one attempt at a time drained in %v, over %v sweeps",
		len(dels), took.Round(time.Millisecond), sweeps)
	if n := counter(t, reg, "webhookd_sweeper_requeued_total"); n != 0 {
		t.Errorf("the sweeper re-enqueued %v deliveries of a backlog", n)
	}
	if n := len(rcv.got()); n != len(dels) {
		t.Errorf("the receiver got %d requests for %d deliveries", n, len(dels))
	}
}
