package poll_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"net/http"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/dispatcher/poll"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
	"github.com/webhookd/webhookd/signer"
)

// subscribePoll creates a poll subscription (destination {"type": "poll"})
// as the registry stores one; each option changes the subscription
// created.
func subscribePoll(e *dispatchertest.Env, merchant string, options ...func(*store.NewSubscription)) store.Subscription {
	e.T.Helper()
	sub, _ := subscribePollSigned(e, merchant, options...)
	return sub
}

// subscribePollSigned is subscribePoll, with the subscription's signing
// secret.
func subscribePollSigned(e *dispatchertest.Env, merchant string, options ...func(*store.NewSubscription)) (store.Subscription, string) {
	e.T.Helper()
	secret, sealedSecret := e.MerchantSecret(merchant)
	sealedDest, err := e.Sealer.Seal(`{"type":"poll"}`)
	if err != nil {
		e.T.Fatal(err)
	}
	n := store.NewSubscription{MerchantID: merchant, URL: "poll", Events: []string{"*"},
		Destination: &store.Destination{Sealed: sealedDest, Summary: map[string]any{"type": store.DestinationPoll}}}
	for _, o := range options {
		o(&n)
	}
	sub, err := e.Store.Subscriptions.CreateSubscription(context.Background(), n, sealedSecret)
	if err != nil {
		e.T.Fatal(err)
	}
	return sub, secret
}

// TestPollSubscriptionIsNeverDialled: a poll subscription's deliveries are
// pending with no due time, beside an HTTP subscription of the same
// merchant that gets its request. A worker runs, and then the sweeper,
// on a clock moved past the whole retry schedule, parks nothing for them;
// no attempt is ever recorded and the subscription's health is untouched.
func TestPollSubscriptionIsNeverDialled(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	var offset atomic.Int64
	clk := clock.Func(func() time.Time { return time.Now().Add(time.Duration(offset.Load())) })
	var hits atomic.Int32
	rcv := dispatchertest.NewReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusOK)
	})
	web, _ := e.Subscribe("m1", rcv.URL, "*")
	sub := subscribePoll(e, "m1")
	d, reg := e.Dispatcher(func(c *dispatcher.Config) { c.Clock = clk })
	var polled []store.Delivery
	for range 5 {
		for _, del := range e.Deliveries(e.Publish(d, "m1", "payout.paid").ID) {
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
	stop := e.Run(d)
	e.WaitFor("the HTTP subscription's requests", 10*time.Second, func() bool { return hits.Load() == 5 })
	stop()

	// The sweep below is the one whose count matters: while the worker
	// ran, its own periodic sweep may have found one of the HTTP
	// subscription's first attempts late to start on a loaded machine
	// (a CI run under load counted one).
	requeued := dispatchertest.Counter(t, reg, "webhookd_sweeper_requeued_total")
	offset.Store(int64(60 * 24 * time.Hour)) // past every retry and the sweeper's grace
	n, err := dispatcher.SweepOnce(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("the sweeper parked %d attempts, want none", n)
	}
	if got := dispatchertest.Counter(t, reg, "webhookd_sweeper_requeued_total") - requeued; got != 0 {
		t.Fatalf("sweeper requeued %v", got)
	}
	for _, del := range polled {
		got := e.Delivery(del.ID)
		if got.Status != store.DeliveryPending || got.AttemptCount != 0 || len(got.Attempts) != 0 {
			t.Fatalf("poll delivery %s: %s after %d attempts, want pending and never attempted", del.ID, got.Status, got.AttemptCount)
		}
		if parked, err := dispatchertest.Parked(context.Background(), e.RC, del, 1); err != nil || parked {
			t.Fatalf("poll delivery %s parked %v (%v)", del.ID, parked, err)
		}
	}
	after, err := e.Store.Subscriptions.GetSubscription(context.Background(), "m1", sub.ID)
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

// encryptedTo gives a subscription an EC (P-256) encryption key: each
// item it reads costs an ECDH.
func encryptedTo(t *testing.T) func(*store.NewSubscription) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwk, err := jose.JSONWebKey{Key: &ec.PublicKey, KeyID: "k1"}.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return func(n *store.NewSubscription) { n.EncryptionKey = jwk }
}

// TestPollReadSignsOnce: reading the same items again within a minute,
// by the same iterator or with since over acknowledged ones, signs
// nothing: they are served as first signed (webhook-timestamp included,
// well within the receivers' five minutes). A minute on, they are signed
// afresh.
func TestPollReadSignsOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		options []func(*store.NewSubscription)
	}{
		{"HMAC", nil},
		{"encrypted", []func(*store.NewSubscription){encryptedTo(t)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := dispatchertest.New(t)
			var offset atomic.Int64
			clk := clock.Func(func() time.Time { return time.Now().Add(time.Duration(offset.Load())) })
			sub := subscribePoll(e, "m1", tc.options...)
			d, reg := e.Dispatcher(func(c *dispatcher.Config) { c.Clock = clk; c.MasterKey = make([]byte, 32) })
			started := clk.Now().Add(-time.Second)
			for range 5 {
				e.Publish(d, "m1", "payout.paid")
			}
			read := func(r poll.Request) poll.Page {
				t.Helper()
				p, err := d.Poller.Poll(t.Context(), "m1", sub.ID, r)
				if err != nil {
					t.Fatal(err)
				}
				if len(p.Items) != 5 {
					t.Fatalf("read %d items, want 5", len(p.Items))
				}
				return p
			}
			signed := func() float64 {
				return dispatchertest.CounterWith(t, reg, "webhookd_poll_items_total", "source", "signed")
			}
			first := read(poll.Request{})
			offset.Store(int64(10 * time.Second))
			again := read(poll.Request{})
			if rest, err := d.Poller.Poll(t.Context(), "m1", sub.ID, poll.Request{Iterator: first.Iterator}); err != nil || len(rest.Items) != 0 {
				t.Fatalf("moving on acknowledges all: %d items, %v", len(rest.Items), err)
			}
			since := read(poll.Request{Since: &started})
			if got := signed(); got != 5 {
				t.Fatalf("four reads of 5 items signed %v, want 5", got)
			}
			for i := range first.Items {
				if !reflect.DeepEqual(again.Items[i].Signed, first.Items[i].Signed) || !reflect.DeepEqual(since.Items[i].Signed, first.Items[i].Signed) {
					t.Fatalf("item %d read again differs from its first signing", i)
				}
			}
			offset.Store(int64(70 * time.Second))
			later := read(poll.Request{Since: &started})
			if got := signed(); got != 10 {
				t.Fatalf("a read a minute on: %v signed in all, want 10", got)
			}
			if later.Items[0].Signed.Timestamp == first.Items[0].Signed.Timestamp {
				t.Fatal("an item read a minute on kept its first timestamp")
			}
		})
	}
}

// TestPollCostlySigningsBoundedPerRead: a read of an encrypted
// subscription encrypts at most poll.MaxCostlySignings items afresh; the
// page ends there, not done, and the next read goes on from it, so that
// every item is read once.
func TestPollCostlySigningsBoundedPerRead(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	sub := subscribePoll(e, "m1", encryptedTo(t))
	d, _ := e.Dispatcher(func(c *dispatcher.Config) { c.MasterKey = make([]byte, 32) })
	const n = poll.MaxCostlySignings + 10
	for range n {
		e.Publish(d, "m1", "payout.paid")
	}
	p, err := d.Poller.Poll(t.Context(), "m1", sub.ID, poll.Request{Limit: poll.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != poll.MaxCostlySignings || p.Done {
		t.Fatalf("first read: %d items, done %v; want %d, not done", len(p.Items), p.Done, poll.MaxCostlySignings)
	}
	next, err := d.Poller.Poll(t.Context(), "m1", sub.ID, poll.Request{Iterator: p.Iterator, Limit: poll.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(next.Items) != n-poll.MaxCostlySignings || !next.Done {
		t.Fatalf("second read: %d items, done %v; want %d, done", len(next.Items), next.Done, n-poll.MaxCostlySignings)
	}
	seen := map[string]bool{}
	for _, it := range append(p.Items, next.Items...) {
		if seen[it.Delivery.ID.String()] || it.Signed.ContentType != signer.ContentTypeJWE {
			t.Fatalf("delivery %s read twice or not encrypted (%s)", it.Delivery.ID, it.Signed.ContentType)
		}
		seen[it.Delivery.ID.String()] = true
	}
}
