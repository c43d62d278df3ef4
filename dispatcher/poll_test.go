package dispatcher_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/dispatcher/poll"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/signer"
)

// subscribePoll creates a poll subscription (destination {"type": "poll"})
// as the registry stores one.
func (e *env) subscribePoll(merchant string) store.Subscription {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.store.EnsureMerchant(ctx, merchant, testVersion); err != nil {
		e.t.Fatal(err)
	}
	secret, err := signer.NewSecret()
	if err != nil {
		e.t.Fatal(err)
	}
	sealedSecret, err := e.sealer.Seal(secret)
	if err != nil {
		e.t.Fatal(err)
	}
	sealedDest, err := e.sealer.Seal(`{"type":"poll"}`)
	if err != nil {
		e.t.Fatal(err)
	}
	sub, err := e.store.CreateSubscription(ctx, store.NewSubscription{MerchantID: merchant, URL: "poll", Events: []string{"*"},
		Destination: &store.Destination{Sealed: sealedDest, Summary: map[string]any{"type": store.DestinationPoll}}}, sealedSecret)
	if err != nil {
		e.t.Fatal(err)
	}
	return sub
}

// TestPollSubscriptionIsNeverDialled: a poll subscription's deliveries are
// pending with no due time, beside an HTTP subscription of the same
// merchant that gets its request. A worker runs, and then the sweeper,
// on a clock moved past the whole retry schedule, parks nothing for them;
// no attempt is ever recorded and the subscription's health is untouched.
func TestPollSubscriptionIsNeverDialled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var offset atomic.Int64
	clk := clock.Func(func() time.Time { return time.Now().Add(time.Duration(offset.Load())) })
	var hits atomic.Int32
	rcv := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusOK)
	})
	web, _ := e.subscribe("m1", rcv.URL, "*")
	sub := e.subscribePoll("m1")
	d, reg := e.dispatcher(func(c *dispatcher.Config) { c.Clock = clk })
	var polled []store.Delivery
	for range 5 {
		for _, del := range e.deliveries(e.publish(d, "m1", "payout.paid").ID) {
			if del.SubscriptionID == sub.ID {
				polled = append(polled, del)
			}
		}
	}
	if len(polled) != 5 {
		t.Fatalf("%d poll deliveries, want 5", len(polled))
	}
	for _, del := range polled {
		if del.Status != store.DeliveryPending || del.NextAttemptAt != nil {
			t.Fatalf("poll delivery %s is %s due at %v, want pending with no due time", del.ID, del.Status, del.NextAttemptAt)
		}
	}
	stop := e.run(d)
	e.waitFor("the HTTP subscription's requests", 10*time.Second, func() bool { return hits.Load() == 5 })
	stop()

	offset.Store(int64(60 * 24 * time.Hour)) // past every retry and the sweeper's grace
	n, err := dispatcher.SweepOnce(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("the sweeper parked %d attempts, want none", n)
	}
	if got := counter(t, reg, "webhookd_sweeper_requeued_total"); got != 0 {
		t.Fatalf("sweeper requeued %v", got)
	}
	for _, del := range polled {
		got := e.delivery(del.ID)
		if got.Status != store.DeliveryPending || got.AttemptCount != 0 || len(got.Attempts) != 0 {
			t.Fatalf("poll delivery %s: %s after %d attempts, want pending and never attempted", del.ID, got.Status, got.AttemptCount)
		}
		if parked, err := dispatcher.Parked(context.Background(), d, del, 1); err != nil || parked {
			t.Fatalf("poll delivery %s parked %v (%v)", del.ID, parked, err)
		}
	}
	after, err := e.store.GetSubscription(context.Background(), "m1", sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Health != (store.Health{}) {
		t.Fatalf("poll subscription's health = %+v, want untouched", after.Health)
	}
	if web.ID == sub.ID {
		t.Fatal("one subscription")
	}
}

// TestPollerNeedsTheMasterKey: without a master key there is no Poller
// (it signs the iterators); with one there is.
func TestPollerNeedsTheMasterKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if d, _ := e.dispatcher(); d.Poller != nil {
		t.Fatal("a Poller without a master key")
	}
	d, _ := e.dispatcher(func(c *dispatcher.Config) { c.MasterKey = make([]byte, 32) })
	var _ *poll.Poller = d.Poller
	if d.Poller == nil {
		t.Fatal("no Poller with a master key")
	}
}
