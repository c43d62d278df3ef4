package dispatcher_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhookd/webhookd/internal/listener"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/signer"
)

// listen creates a listener subscription of merchant, live until
// expiresAt, and returns it with its secret.
func (e *env) listen(merchant string, expiresAt time.Time) (store.Listener, string) {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.store.Merchants.EnsureMerchant(ctx, merchant, testVersion); err != nil {
		e.t.Fatal(err)
	}
	secret, err := signer.NewSecret()
	if err != nil {
		e.t.Fatal(err)
	}
	sealed, err := e.sealer.Seal(secret)
	if err != nil {
		e.t.Fatal(err)
	}
	l, err := e.store.Listeners.CreateListener(ctx, store.NewListener{MerchantID: merchant, Events: []string{"*"}, ExpiresAt: expiresAt}, sealed)
	if err != nil {
		e.t.Fatal(err)
	}
	return l, secret
}

// holdConnection plays the API process holding the listener's WebSocket:
// it waits on the listener's channel, takes the relayed deliveries from
// Redis when the relay's publish wakes it, hands each to answer, and
// pushes the answer back where the worker waits for it. It looks at the
// list only when woken, so that a relay that pushed without publishing
// would have its deliveries time out.
func (e *env) holdConnection(ctx context.Context, l store.Listener, answer func(n int, d listener.Delivery) listener.Answer) <-chan listener.Delivery {
	e.t.Helper()
	ps := e.rc.Subscribe(ctx, listener.DeliveriesChannel(l.ID))
	// The subscription's confirmation: a publish from now on reaches it.
	if _, err := ps.Receive(ctx); err != nil {
		e.t.Fatalf("subscribe to the listener's channel: %v", err)
	}
	wakes := ps.Channel()
	got := make(chan listener.Delivery, 100)
	go func() {
		defer ps.Close()
		for n := 1; ; {
			select {
			case <-ctx.Done():
				return
			case <-wakes:
			}
			for {
				popped, err := e.rc.LPop(ctx, listener.DeliveriesKey(l.ID)).Result()
				if errors.Is(err, redis.Nil) {
					break
				}
				if err != nil {
					return
				}
				var d listener.Delivery
				if err := json.Unmarshal([]byte(popped), &d); err != nil {
					e.t.Errorf("relayed delivery is not JSON: %v", err)
					return
				}
				got <- d
				a := answer(n, d)
				n++
				a.Type, a.ID = listener.TypeAnswer, d.ID
				b, _ := json.Marshal(a)
				e.rc.RPush(ctx, listener.AnswerKey(d.ID), b)
			}
		}
	}()
	return got
}

// TestRelayDeliversToListener relays an event to a live listener: the
// request carries a signature that the Standard Webhooks library verifies
// with the listener's secret, a local 500 is retried on the schedule, and
// the local answers are the attempts.
func TestRelayDeliversToListener(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l, secret := e.listen("m1", time.Now().Add(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := e.holdConnection(ctx, l, func(n int, _ listener.Delivery) listener.Answer {
		if n == 1 {
			return listener.Answer{Status: http.StatusInternalServerError, Body: "boom", DurationMS: 3}
		}
		return listener.Answer{Status: http.StatusOK, Body: "ok", DurationMS: 4}
	})
	d, reg := e.dispatcher()
	e.run(d)
	ev := e.publish(d, "m1", "payout.paid")
	ds := e.deliveries(ev.ID)
	if len(ds) != 1 || ds[0].SubscriptionID != l.ID {
		t.Fatalf("deliveries = %+v, want one to the listener", ds)
	}
	del := e.waitSettled(ds[0].ID, 20*time.Second)
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
		if n := counter(t, reg, name); n != 0 {
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
	e.waitFor("the manual attempt", 20*time.Second, func() bool { return len(e.delivery(del.ID).Attempts) == 3 })
	if a := e.delivery(del.ID).Attempts[2]; a.Trigger != store.TriggerManual || a.HTTPStatus == nil || *a.HTTPStatus != 200 {
		t.Errorf("manual attempt = %+v, want the local 200", a)
	}
}

// TestRelayStopsAtAnEndedListener checks that a listener whose expiry has
// passed receives nothing: its delivery fails for good with
// listener_closed, the listener is ended, and nothing waits in Redis.
func TestRelayStopsAtAnEndedListener(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l, _ := e.listen("m1", time.Now().Add(-time.Second))
	d, reg := e.dispatcher()
	// Published before the workers and the sweeper run: a sweep first
	// would end the listener, and the event would then have no delivery
	// at all (seen once on a loaded machine).
	ev := e.publish(d, "m1", "payout.paid")
	ds := e.deliveries(ev.ID)
	if len(ds) != 1 {
		t.Fatalf("deliveries = %d, want 1", len(ds))
	}
	e.run(d)
	del := e.waitSettled(ds[0].ID, 20*time.Second)
	if del.Status != store.DeliveryFailed || del.NextAttemptAt != nil || len(del.Attempts) != 1 ||
		del.Attempts[0].Error == nil || *del.Attempts[0].Error != "listener_closed" {
		t.Fatalf("delivery = %+v, want failed with one listener_closed attempt", del)
	}
	if _, ended, err := e.store.Listeners.ListenerExpiry(context.Background(), l.ID); err != nil || !ended {
		t.Errorf("listener ended = %v, %v; want ended", ended, err)
	}
	if n := counter(t, reg, "webhookd_deliveries_failed_total"); n != 0 {
		t.Errorf("webhookd_deliveries_failed_total = %v, want a listener's delivery left out", n)
	}
	if n, err := e.rc.LLen(context.Background(), listener.DeliveriesKey(l.ID)).Result(); err != nil || n != 0 {
		t.Errorf("relayed deliveries waiting = %d, %v; want none", n, err)
	}
}

// TestRelayTimesOutWithoutConnection checks that a live listener whose
// connection takes nothing gets timeout attempts on the schedule, and that
// the delivery stops once the listener has ended, without running the
// whole schedule.
func TestRelayTimesOutWithoutConnection(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.DeliveryTimeout = 1 * time.Second
	l, _ := e.listen("m1", time.Now().Add(1500*time.Millisecond))
	d, _ := e.dispatcher()
	e.run(d)
	ev := e.publish(d, "m1", "payout.paid")
	del := e.waitSettled(e.deliveries(ev.ID)[0].ID, 20*time.Second)
	if del.Status != store.DeliveryFailed || len(del.Attempts) < 2 {
		t.Fatalf("delivery = %s with %d attempts, want failed after a timeout", del.Status, len(del.Attempts))
	}
	if a := del.Attempts[0]; a.Error == nil || *a.Error != "timeout" {
		t.Errorf("first attempt = %+v, want timeout", a)
	}
	if a := del.Attempts[len(del.Attempts)-1]; a.Error == nil || *a.Error != "listener_closed" {
		t.Errorf("last attempt = %+v, want listener_closed", a)
	}
	if _, ended, err := e.store.Listeners.ListenerExpiry(context.Background(), l.ID); err != nil || !ended {
		t.Errorf("listener ended = %v, %v; want ended", ended, err)
	}
}
