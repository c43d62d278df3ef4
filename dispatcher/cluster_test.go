package dispatcher_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/internal/listener"
	"github.com/webhookd/webhookd/internal/store"
)

// TestDeliveryOnCluster runs the pipeline's Redis work on a Redis Cluster
// of three masters: the schedule's scripts (one hash tag), the sweeper's
// pipelined reads over lost first attempts, a retry (parked until due), and a listener's relay
// (webhookd's own list keys, on whichever node their slot is).
func TestDeliveryOnCluster(t *testing.T) {
	t.Parallel()
	e := newClusterEnv(t)

	// Lost first attempts: a worker that died took them from the schedule
	// before it leased their deliveries; the sweeper finds them overdue.
	swept := newReceiver(t, answer(http.StatusOK))
	const subs = 3
	d, reg, ev := e.unworkedEvent(swept, subs)
	if n, err := dispatcher.TakeAndLose(context.Background(), d, time.Now()); err != nil || n != subs {
		t.Fatalf("the doomed worker took %d attempts (%v), want %d", n, err, subs)
	}
	e.run(d)
	for _, del := range e.deliveries(ev.ID) {
		if got := e.waitSettled(del.ID, 10*time.Second); got.Status != store.DeliverySucceeded || got.AttemptCount != 1 {
			t.Fatalf("swept delivery %s: %s after %d attempts, want succeeded after 1", del.ID, got.Status, got.AttemptCount)
		}
	}
	if n := counter(t, reg, "webhookd_sweeper_requeued_total"); n != subs {
		t.Errorf("webhookd_sweeper_requeued_total = %v, want %d", n, subs)
	}

	// A retry: the first attempt fails, the second succeeds.
	flaky := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	e.subscribe("m_retry", flaky.URL, "*")
	ev = e.publish(d, "m_retry", "payout.paid")
	for _, del := range e.deliveries(ev.ID) {
		if got := e.waitSettled(del.ID, 10*time.Second); got.Status != store.DeliverySucceeded || got.AttemptCount != 2 {
			t.Fatalf("retried delivery %s: %s after %d attempts, want succeeded after 2", del.ID, got.Status, got.AttemptCount)
		}
	}

	// A listener's relay.
	l, _ := e.listen("m_listen", time.Now().Add(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.holdConnection(ctx, l, func(int, listener.Delivery) listener.Answer {
		return listener.Answer{Status: http.StatusOK, Body: "ok", DurationMS: 1}
	})
	ev = e.publish(d, "m_listen", "payout.paid")
	ds := e.deliveries(ev.ID)
	if len(ds) != 1 || ds[0].SubscriptionID != l.ID {
		t.Fatalf("deliveries = %+v, want one to the listener", ds)
	}
	if got := e.waitSettled(ds[0].ID, 20*time.Second); got.Status != store.DeliverySucceeded {
		t.Fatalf("relayed delivery: %s, want succeeded", got.Status)
	}
}
