package dispatcher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/internal/listener"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
	"github.com/webhookd/webhookd/producer"
)

// TestDeliveryOnCluster runs the pipeline's Redis work on a Redis Cluster
// of three masters, each with a replica: the schedule's scripts (each on
// one shard's hash tag), the sweeper's pipelined reads over lost first attempts, a retry
// (parked until due), and a listener's relay (webhookd's own list keys, on
// whichever node their slot is).
func TestDeliveryOnCluster(t *testing.T) {
	t.Parallel()
	e := dispatchertest.NewCluster(t)

	// Lost first attempts: a worker that died took them from the schedule
	// before it leased their deliveries; the sweeper finds them overdue.
	swept := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusOK))
	const subs = 3
	d, reg, ev := e.UnworkedEvent(swept, subs)
	if n, err := dispatchertest.TakeAndLose(context.Background(), e.RC, time.Now()); err != nil || n != subs {
		t.Fatalf("the doomed worker took %d attempts (%v), want %d", n, err, subs)
	}
	e.Run(d)
	for _, del := range e.Deliveries(ev.ID) {
		if got := e.WaitSettled(del.ID, 10*time.Second); got.Status != store.DeliverySucceeded || got.AttemptCount != 1 {
			t.Fatalf("swept delivery %s: %s after %d attempts, want succeeded after 1", del.ID, got.Status, got.AttemptCount)
		}
	}
	// At least the three: a worker that took a requeued attempt from the
	// schedule and had not written its lease a grace later (a CI machine
	// under load) leaves it looking lost to the next sweep, which parks it
	// once more (a CI run counted 6); the lease lets one attempt through,
	// as the loop above checks.
	if n := dispatchertest.Counter(t, reg, "webhookd_sweeper_requeued_total"); n < subs {
		t.Errorf("webhookd_sweeper_requeued_total = %v, want at least %d", n, subs)
	}

	// A retry: the first attempt fails, the second succeeds.
	flaky := dispatchertest.NewReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	e.Subscribe("m_retry", flaky.URL, "*")
	ev = e.Publish(d, "m_retry", "payout.paid")
	for _, del := range e.Deliveries(ev.ID) {
		if got := e.WaitSettled(del.ID, 10*time.Second); got.Status != store.DeliverySucceeded || got.AttemptCount != 2 {
			t.Fatalf("retried delivery %s: %s after %d attempts, want succeeded after 2", del.ID, got.Status, got.AttemptCount)
		}
	}

	// A listener's relay.
	l, _ := e.Listen("m_listen", time.Now().Add(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.HoldConnection(ctx, l, func(int, listener.Delivery) listener.Answer {
		return listener.Answer{Status: http.StatusOK, Body: "ok", DurationMS: 1}
	})
	ev = e.Publish(d, "m_listen", "payout.paid")
	ds := e.Deliveries(ev.ID)
	if len(ds) != 1 || ds[0].SubscriptionID != l.ID {
		t.Fatalf("deliveries = %+v, want one to the listener", ds)
	}
	if got := e.WaitSettled(ds[0].ID, 20*time.Second); got.Status != store.DeliverySucceeded {
		t.Fatalf("relayed delivery: %s, want succeeded", got.Status)
	}
}

// scheduleCounters matches the schedule's round-robin counters, one in
// each part of the schedule that work was pushed to.
const scheduleCounters = "*webhookd:lanes*:tick"

// failoverRun is the steady stream of TestClusterFailover: the events
// published, by id, with when the publish of each started.
type failoverRun struct {
	mu        sync.Mutex
	published map[string]time.Time
	order     []string
}

// publish publishes an event every gap until stop is closed, each for one
// of customers (the ordered subscription's key), then closes done.
func (r *failoverRun) publish(t *testing.T, d *dispatcher.Dispatcher, gap time.Duration, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(gap):
		}
		id := uuid.NewString()
		payload, _ := json.Marshal(map[string]any{"customer": fmt.Sprintf("c%d", i%3), "n": i})
		// Publish stores the event in Postgres first: a Redis that is
		// failing over does not refuse it (the sweeper enqueues it later),
		// but it may take long, so the event counts from its start.
		at := time.Now()
		if _, _, err := d.Publisher.Publish(context.Background(), producer.Event{ID: id, MerchantID: "m_failover",
			Type: "payout.paid", Payload: payload}); err != nil {
			t.Errorf("Publish %d: %v", i, err)
			return
		}
		r.mu.Lock()
		r.published[id] = at
		r.order = append(r.order, id)
		r.mu.Unlock()
	}
}

// firstAfter is the first request rcv got at or after from, and when the
// first one of an event published at or after from came; zero times when
// none did yet.
func (r *failoverRun) firstAfter(rcv *dispatchertest.Receiver, from time.Time) (first, fresh time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, got := range rcv.Got() {
		if got.At.Before(from) {
			continue
		}
		if first.IsZero() {
			first = got.At
		}
		if at, ok := r.published[got.Header.Get("webhook-id")]; ok && !at.Before(from) {
			return first, got.At
		}
	}
	return first, time.Time{}
}

// count is how many events were published so far.
func (r *failoverRun) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.order)
}

// TestClusterFailover kills (or hangs), while events stream in, the Redis
// Cluster master that holds the schedule, and measures how soon deliveries
// resume after its replica is promoted: within 10 s, with every event
// delivered (at least once) to an unordered and an ordered subscription,
// and the ordered one's in order for each key.
func TestClusterFailover(t *testing.T) {
	storetest.FullLane(t, "a Redis Cluster failover")
	// Both cases, each on a cluster of its own, beside the package's other
	// parallel tests: most of their 20 s each is waiting for a promotion
	// (3 to 4 s) and a stream of events, not this machine's CPU.
	t.Parallel()
	for _, tc := range []struct {
		name string
		fail func(*storetest.Cluster, *storetest.Node) time.Time
	}{
		// A crash: the master's port refuses connections.
		{"killed", (*storetest.Cluster).KillMaster},
		// A machine that stops answering: connections open, and wait.
		{"hung", (*storetest.Cluster).HangMaster},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testFailover(t, tc.fail)
		})
	}
}

// testFailover is TestClusterFailover with the schedule's master failed by
// fail, which returns when the replica was promoted.
func testFailover(t *testing.T, fail func(*storetest.Cluster, *storetest.Node) time.Time) {
	e := dispatchertest.NewCluster(t)
	plain := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusOK))
	ordered := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusOK))
	e.Subscribe("m_failover", plain.URL, "*")
	_, sealed := e.MerchantSecret("m_failover")
	key := "payload.customer"
	if _, err := e.Store.Subscriptions.CreateSubscription(context.Background(), store.NewSubscription{MerchantID: "m_failover",
		URL: ordered.URL, Events: []string{"*"}, OrderingKey: &key}, sealed); err != nil {
		t.Fatal(err)
	}
	// Events are published through a dispatcher that does not run, as an
	// api process does: no attempt starts in the publishing process, all
	// go through the schedule to the running one, as between the api and
	// worker processes of a deployment.
	api, _ := e.Dispatcher()
	worker, _ := e.Dispatcher()
	e.Run(worker)

	run := &failoverRun{published: map[string]time.Time{}}
	stop, done := make(chan struct{}), make(chan struct{})
	go run.publish(t, api, 20*time.Millisecond, stop, done)
	stopPublishing := sync.OnceFunc(func() {
		close(stop)
		<-done
	})
	defer stopPublishing()
	ctx := context.Background()
	// The master to fail is the one holding the schedule's round-robin
	// counter: a counter lives in each part of the schedule that work was
	// pushed to, here the test merchant's alone (in a schedule sharded
	// over hash tags, as in one under a single tag).
	var master *storetest.Node
	e.WaitFor("deliveries and the schedule's keys on a master", 30*time.Second, func() bool {
		var err error
		master, err = e.Cluster.MasterHolding(ctx, scheduleCounters)
		return err == nil && master != nil && len(plain.Got()) > 20 && len(ordered.Got()) > 20
	})
	killed := time.Now()
	promoted := fail(e.Cluster, master)
	var resumed, fresh time.Time
	e.WaitFor("deliveries to resume after the promotion", 90*time.Second, func() bool {
		a, f := run.firstAfter(plain, promoted)
		b, g := run.firstAfter(ordered, promoted)
		resumed, fresh = earliest(a, b), earliest(f, g)
		return !fresh.IsZero()
	})
	t.Logf("REPORT cluster failover: master %s (the schedule's) failed, replica promoted %s after;"+
		" first delivery %s after the promotion, first of an event published after it %s after",
		master.Addr, promoted.Sub(killed).Round(time.Millisecond), resumed.Sub(promoted).Round(time.Millisecond),
		fresh.Sub(promoted).Round(time.Millisecond))
	// Attempts under way at the fault end within a second; any delivery
	// later and before the promotion would mean the failed master was not
	// on the deliveries' path, and the test measured nothing.
	if n := len(between(killed.Add(time.Second), promoted, plain, ordered)); n > 0 {
		t.Errorf("%d deliveries between a second after the fault and the promotion: the failed master did not hold the schedule", n)
	}
	if gap := fresh.Sub(promoted); gap > 10*time.Second {
		t.Errorf("deliveries resumed %s after the promotion, want within 10s", gap.Round(time.Millisecond))
	}
	// Fifty events more after the resumption, then the stream ends.
	more := run.count() + 50
	e.WaitFor("fifty events more", 30*time.Second, func() bool { return run.count() >= more })
	stopPublishing()
	// What the dead master took in its last moments and had not passed
	// to its replica is lost from Redis; Postgres is the record, and the
	// sweeper enqueues again what is overdue there.
	settled := time.Now()
	var unsettled int
	e.WaitFor("every delivery to succeed", 60*time.Second, func() bool {
		err := e.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE status <> $1`, store.DeliverySucceeded).Scan(&unsettled)
		return err == nil && unsettled == 0
	})
	t.Logf("REPORT every delivery succeeded %s after the stream ended", time.Since(settled).Round(time.Millisecond))
	e.WaitIdle()
	checkFailoverDeliveries(t, run, plain, ordered)
	t.Logf("REPORT deliveries per second from the kill: %v", perSecond(killed, plain, ordered))
}

// earliest is the earlier of two times, ignoring zero ones.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// checkFailoverDeliveries checks that every published event reached both
// receivers, and that the ordered one got each key's events in sequence
// (a repeat of the last one allowed: delivery is at least once).
func checkFailoverDeliveries(t *testing.T, run *failoverRun, plain, ordered *dispatchertest.Receiver) {
	t.Helper()
	run.mu.Lock()
	defer run.mu.Unlock()
	for name, rcv := range map[string]*dispatchertest.Receiver{"unordered": plain, "ordered": ordered} {
		got := map[string]int{}
		for _, r := range rcv.Got() {
			got[r.Header.Get("webhook-id")]++
		}
		missing, twice := 0, 0
		for _, id := range run.order {
			switch {
			case got[id] == 0:
				missing++
			case got[id] > 1:
				twice++
			}
		}
		t.Logf("REPORT %s subscription: %d events published, %d delivered, %d more than once", name, len(run.order), len(run.order)-missing, twice)
		if missing > 0 {
			t.Errorf("%s subscription: %d of %d events never delivered", name, missing, len(run.order))
		}
	}
	last := map[string]int64{}
	for _, r := range ordered.Got() {
		k := r.Header.Get("webhook-ordering-key")
		seq, err := strconv.ParseInt(r.Header.Get("webhook-sequence"), 10, 64)
		if k == "" || err != nil {
			t.Fatalf("an ordered delivery with key %q, sequence %q", k, r.Header.Get("webhook-sequence"))
		}
		if prev, ok := last[k]; ok && seq != prev && seq != prev+1 {
			t.Errorf("key %s: sequence %d after %d", k, seq, prev)
		}
		last[k] = seq
	}
}

// perSecond counts the requests the receivers got in each second from
// start on.
func perSecond(start time.Time, rcvs ...*dispatchertest.Receiver) []int {
	var counts []int
	for _, g := range between(start, time.Now(), rcvs...) {
		s := int(g.At.Sub(start) / time.Second)
		for len(counts) <= s {
			counts = append(counts, 0)
		}
		counts[s]++
	}
	return counts
}

// between are the requests the receivers got from from until before to.
func between(from, to time.Time, rcvs ...*dispatchertest.Receiver) []dispatchertest.Received {
	var out []dispatchertest.Received
	for _, rcv := range rcvs {
		for _, g := range rcv.Got() {
			if !g.At.Before(from) && g.At.Before(to) {
				out = append(out, g)
			}
		}
	}
	return out
}
