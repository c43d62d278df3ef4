package publish_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
)

// A process that both publishes and works starts a first attempt in its
// own pool as it stores it, without parking it in the schedule, where a
// take would have given it a slot at once; otherwise (no pool running, the
// subscription at its cap) the attempt is parked and delivered from the
// schedule as before. The publish leases what its pool may start (no lease
// statement of the attempt's own); one the pool then refuses is parked
// with that lease to hand over, so the schedule's taker runs it at once
// rather than after the lease lapses (15 s here, longer than the test
// waits).
func TestFirstAttemptsStartInThePublishingProcess(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	release := make(chan struct{})
	rcv := dispatchertest.NewReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 2 {
			<-release // holds the subscription's one slot
		}
		w.WriteHeader(http.StatusNoContent)
	})
	e.Subscribe("m1", rcv.URL, "*")
	d, reg := e.Dispatcher(func(c *dispatcher.Config) {
		c.Concurrency, c.MerchantShare, c.SubscriptionConcurrency = 4, 0.5, 1
		c.DeliveryTimeout = 10 * time.Second
	})
	started := func() float64 { return dispatchertest.Counter(t, reg, "webhookd_attempts_started_locally_total") }
	parked := func() int64 {
		n, err := dispatchertest.ScheduleParked(t.Context(), e.RC)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	// No worker runs yet: the attempt goes to the schedule.
	beforeRun := e.Publish(d, "m1", "payout.paid")
	if got, n := started(), parked(); got != 0 || n != 1 {
		t.Fatalf("with no pool running: %v started locally, %d parked; want 0 and 1", got, n)
	}
	e.Run(d)
	first := e.Deliveries(beforeRun.ID)[0]
	if s := e.WaitSettled(first.ID, 10*time.Second); s.Status != store.DeliverySucceeded {
		t.Fatalf("the parked attempt: %s, want succeeded", s.Status)
	}

	// The pool runs and has room: the attempt starts here, and is held
	// by its receiver.
	held := e.Publish(d, "m1", "payout.paid")
	if got, n := started(), parked(); got != 1 || n != 0 {
		t.Fatalf("with room in the pool: %v started locally, %d parked; want 1 and 0", got, n)
	}
	e.WaitFor("the held attempt to reach its receiver", 10*time.Second, func() bool { return len(rcv.Got()) == 2 })

	// Its subscription is at its cap of 1: the next one is parked, as a
	// take would leave it.
	capped := e.Publish(d, "m1", "payout.paid")
	if got, n := started(), parked(); got != 1 || n != 1 {
		t.Fatalf("with the subscription at its cap: %v started locally, %d parked; want 1 and 1", got, n)
	}
	var leased bool
	if err := e.Store.Pool().QueryRow(t.Context(), `SELECT lease_until IS NOT NULL FROM deliveries WHERE event_id = $1`, capped.ID).Scan(&leased); err != nil || !leased {
		t.Fatalf("the capped delivery leased by its publish: %v, %v; want true", leased, err)
	}
	close(release)
	for _, ev := range []store.Event{held, capped} {
		del := e.Deliveries(ev.ID)[0]
		if s := e.WaitSettled(del.ID, 10*time.Second); s.Status != store.DeliverySucceeded || s.AttemptCount != 1 {
			t.Fatalf("delivery of %s: %s after %d attempts, want succeeded after 1", ev.ID, s.Status, s.AttemptCount)
		}
	}
	if got := len(rcv.Got()); got != 3 {
		t.Fatalf("the receiver got %d requests, want 3 (one per event)", got)
	}
}
