package dispatcher_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/listener"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
)

// TestDeliveryOnCluster runs the pipeline's Redis work on a Redis Cluster
// of three masters: the schedule's scripts (one hash tag), the sweeper's
// pipelined reads over lost first attempts, a retry (parked until due), and a listener's relay
// (webhookd's own list keys, on whichever node their slot is).
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
	if n := dispatchertest.Counter(t, reg, "webhookd_sweeper_requeued_total"); n != subs {
		t.Errorf("webhookd_sweeper_requeued_total = %v, want %d", n, subs)
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
