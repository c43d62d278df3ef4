package deliver_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhookd/webhookd/internal/listener"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
)

// TestRelayDeliversToListener relays an event to a live listener: the
// request carries a signature that the Standard Webhooks library verifies
// with the listener's secret, a local 500 is retried on the schedule, and
// the local answers are the attempts.
func TestRelayDeliversToListener(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	l, secret := e.Listen("m1", time.Now().Add(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := e.HoldConnection(ctx, l, func(n int, _ listener.Delivery) listener.Answer {
		if n == 1 {
			return listener.Answer{Status: http.StatusInternalServerError, Body: "boom", DurationMS: 3}
		}
		return listener.Answer{Status: http.StatusOK, Body: "ok", DurationMS: 4}
	})
	d, reg := e.Dispatcher()
	e.Run(d)
	ev := e.Publish(d, "m1", "payout.paid")
	ds := e.Deliveries(ev.ID)
	if len(ds) != 1 || ds[0].SubscriptionID != l.ID {
		t.Fatalf("deliveries = %+v, want one to the listener", ds)
	}
	del := e.WaitSettled(ds[0].ID, 20*time.Second)
	if del.Status != store.DeliverySucceeded || len(del.Attempts) != 2 {
		t.Fatalf("delivery = %s with %d attempts, want succeeded at the second", del.Status, len(del.Attempts))
	}
	first, second := del.Attempts[0], del.Attempts[1]
	if first.HTTPStatus == nil || *first.HTTPStatus != 500 || first.ResponseBody != "boom" || first.DurationMS != 3 {
		t.Errorf("first attempt = %+v, want the local 500", first)
	}
	if second.HTTPStatus == nil || *second.HTTPStatus != 200 || second.Error != nil {
		t.Errorf("second attempt = %+v, want the local 200", second)
	}
	// A developer's attempts stay out of the operators' metrics.
	for _, name := range []string{"webhookd_delivery_attempts_total", "webhookd_retries_scheduled_total"} {
		if n := dispatchertest.Counter(t, reg, name); n != 0 {
			t.Errorf("%s = %v, want listener attempts left out", name, n)
		}
	}

	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	relayed := <-got
	h := http.Header{}
	for k, v := range relayed.Headers {
		h.Set(k, v)
	}
	if err := wh.Verify([]byte(relayed.Body), h); err != nil {
		t.Errorf("the relayed delivery's signature does not verify: %v", err)
	}
	if relayed.EventID != ev.ID.String() || relayed.EventType != "payout.paid" || h.Get("webhook-id") != ev.ID.String() ||
		h.Get("content-type") != "application/json" || relayed.Body != string(ev.Body) {
		t.Errorf("relayed delivery = %+v, want the event's envelope and headers", relayed)
	}

	// A live listener's delivery can be redelivered, down its connection.
	if _, err := d.Redeliverer.Redeliver(ctx, "m1", del.ID); err != nil {
		t.Fatalf("Redeliver = %v", err)
	}
	e.WaitFor("the manual attempt", 20*time.Second, func() bool { return len(e.Delivery(del.ID).Attempts) == 3 })
	if a := e.Delivery(del.ID).Attempts[2]; a.Trigger != store.TriggerManual || a.HTTPStatus == nil || *a.HTTPStatus != 200 {
		t.Errorf("manual attempt = %+v, want the local 200", a)
	}
}

// TestRelayStopsAtAnEndedListener checks that a listener whose expiry has
// passed receives nothing: its delivery fails for good with
// listener_closed, the listener is ended, and nothing waits in Redis.
func TestRelayStopsAtAnEndedListener(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	l, _ := e.Listen("m1", time.Now().Add(-time.Second))
	d, reg := e.Dispatcher()
	// Published before the workers and the sweeper run: a sweep first
	// would end the listener, and the event would then have no delivery
	// at all (seen once on a loaded machine).
	ev := e.Publish(d, "m1", "payout.paid")
	ds := e.Deliveries(ev.ID)
	if len(ds) != 1 {
		t.Fatalf("deliveries = %d, want 1", len(ds))
	}
	e.Run(d)
	del := e.WaitSettled(ds[0].ID, 20*time.Second)
	if del.Status != store.DeliveryFailed || del.NextAttemptAt != nil || len(del.Attempts) != 1 ||
		del.Attempts[0].Error == nil || *del.Attempts[0].Error != "listener_closed" {
		t.Fatalf("delivery = %+v, want failed with one listener_closed attempt", del)
	}
	if _, ended, err := e.Store.Listeners.ListenerExpiry(context.Background(), l.ID); err != nil || !ended {
		t.Errorf("listener ended = %v, %v; want ended", ended, err)
	}
	if n := dispatchertest.Counter(t, reg, "webhookd_deliveries_failed_total"); n != 0 {
		t.Errorf("webhookd_deliveries_failed_total = %v, want a listener's delivery left out", n)
	}
	if n, err := e.RC.LLen(context.Background(), listener.DeliveriesKey(l.ID)).Result(); err != nil || n != 0 {
		t.Errorf("relayed deliveries waiting = %d, %v; want none", n, err)
	}
}

// TestRelayTimesOutWithoutConnection checks that a live listener whose
// connection takes nothing gets timeout attempts on the schedule, and that
// the delivery stops once the listener has ended, without running the
// whole schedule.
func TestRelayTimesOutWithoutConnection(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	e.Cfg.DeliveryTimeout = 1 * time.Second
	d, _ := e.Dispatcher()
	e.Run(d)
	// The first attempt must start and time out before the listener
	// expires: its expiry leaves it 1.5 s to start, counted from after
	// the worker started (a loaded machine took more than the 0.5 s it
	// had when the listener was made first).
	l, _ := e.Listen("m1", time.Now().Add(2500*time.Millisecond))
	ev := e.Publish(d, "m1", "payout.paid")
	del := e.WaitSettled(e.Deliveries(ev.ID)[0].ID, 20*time.Second)
	if del.Status != store.DeliveryFailed || len(del.Attempts) < 2 {
		t.Fatalf("delivery = %s with %d attempts, want failed after a timeout", del.Status, len(del.Attempts))
	}
	if a := del.Attempts[0]; a.Error == nil || *a.Error != "timeout" {
		t.Errorf("first attempt = %+v, want timeout", a)
	}
	if a := del.Attempts[len(del.Attempts)-1]; a.Error == nil || *a.Error != "listener_closed" {
		t.Errorf("last attempt = %+v, want listener_closed", a)
	}
	if _, ended, err := e.Store.Listeners.ListenerExpiry(context.Background(), l.ID); err != nil || !ended {
		t.Errorf("listener ended = %v, %v; want ended", ended, err)
	}
}
