package store_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// A publish that asks for it (EventWrite.LeaseUntil) leases, in its own
// statement, the deliveries whose first attempt may start at once, and
// returns each as the workers' lease would: the same delivery, the same
// subscription's columns, its retry policy pinned. A delivery paced by a
// rate limit, batched, or behind another of its ordering key is not
// leased. The lease is live: a worker's lease finds nothing, unless it
// takes that lease over (LeaseRequest.Handover). A publish written in a
// group of fan-outs (one statement for the group) leases alike.
func TestPublishLeasesTheAttemptsThatStartAtOnce(t *testing.T) {
	t.Parallel()
	s := storetest.NewStore(t)
	for _, tc := range []struct {
		name string
		// others is how many events of a merchant without subscriptions
		// share the publish's group: enough makes it a group of fan-outs.
		others int
	}{
		{name: "alone"},
		{name: "in a group of fan-outs", others: 7},
	} {
		t.Run(tc.name, func(t *testing.T) { testPublishLeases(t, s, tc.others) })
	}
}

func testPublishLeases(t *testing.T, s *store.Store, others int) {
	ctx := context.Background()
	merchant := fmt.Sprintf("m%d", others)
	for _, m := range []string{merchant, "nobody"} {
		if _, err := s.Merchants.EnsureMerchant(ctx, m, "2026-05-01"); err != nil {
			t.Fatal(err)
		}
	}
	key, limit := "data.id", 5
	policy := &store.RetryPolicy{Schedule: []int64{1, 2}, TimeoutSeconds: 3}
	subs := map[string]store.NewSubscription{
		"plain":   {URL: "https://example.com/plain", SealedHeaders: []byte("headers"), RetryPolicy: policy},
		"ordered": {URL: "https://example.com/ordered", OrderingKey: &key},
		"paced":   {URL: "https://example.com/paced", RateLimit: &limit},
		"batched": {URL: "https://example.com/batched", Batch: &store.Batch{MaxSize: 10, MaxWaitMS: 100}},
	}
	names := map[uuid.UUID]string{}
	for name, ns := range subs {
		ns.MerchantID, ns.Events = merchant, []string{"*"}
		sub, err := s.Subscriptions.CreateSubscription(ctx, ns, []byte("sealed"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		names[sub.ID] = name
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	leaseUntil := now.Add(time.Minute).Truncate(time.Microsecond)
	publish := func(lease time.Time) store.EventWritten {
		t.Helper()
		ev := store.Event{ID: uuid.New(), MerchantID: merchant, Type: "payout.paid", APIVersion: "2026-05-01",
			Body: []byte(`{"data":{"id":"po_1"}}`), CreatedAt: now, TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
		writes := []store.EventWrite{{Event: ev, LeaseUntil: lease}}
		for range others {
			other := ev
			other.ID, other.MerchantID, other.TraceParent = uuid.New(), "nobody", ""
			writes = append(writes, store.EventWrite{Event: other, LeaseUntil: lease})
		}
		group, err := store.NewGroup()
		if err != nil {
			t.Fatal(err)
		}
		written, errs, err := s.Events.CreateEvents(ctx, writes, group)
		if err != nil || errs[0] != nil || len(written[0].Deliveries) != len(subs) {
			t.Fatalf("CreateEvents = %+v, %v, %v", written, errs, err)
		}
		return written[0]
	}
	leasedNames := func(w store.EventWritten) map[string]bool {
		got := map[string]bool{}
		for id := range w.Leased {
			got[names[w.Leased[id].SubscriptionID]] = true
		}
		return got
	}

	first := publish(leaseUntil)
	if got, want := leasedNames(first), map[string]bool{"plain": true, "ordered": true}; !reflect.DeepEqual(got, want) {
		t.Fatalf("the first publish leased %v, want %v", got, want)
	}
	for id, l := range first.Leased {
		if !l.LeaseUntil.Equal(leaseUntil) || string(l.Body) != `{"data":{"id":"po_1"}}` || l.TraceParent == "" {
			t.Errorf("%s: leased until %v, body %s, traceparent %q", names[l.SubscriptionID], l.LeaseUntil, l.Body, l.TraceParent)
		}
		// A worker's own lease finds it taken...
		req := store.LeaseRequest{ID: id, CreatedAt: l.CreatedAt, Number: 1}
		_, errs, err := s.Deliveries.LeaseDeliveries(ctx, []store.LeaseRequest{req}, now, time.Minute)
		if err != nil || !errors.Is(errs[0], store.ErrNotFound) {
			t.Fatalf("%s: a worker's lease of a leased delivery = %v, %v; want ErrNotFound", names[l.SubscriptionID], errs, err)
		}
		// ...unless it takes that lease over, and then reads the same.
		req.Handover = l.LeaseUntil
		taken, errs, err := s.Deliveries.LeaseDeliveries(ctx, []store.LeaseRequest{req}, now, 2*time.Minute)
		if err != nil || errs[0] != nil {
			t.Fatalf("%s: the lease handed over = %v, %v", names[l.SubscriptionID], errs, err)
		}
		took := taken[0]
		took.LeaseUntil = l.LeaseUntil
		if !reflect.DeepEqual(took, l) {
			t.Errorf("%s: the publish's lease\n%+v\nthe worker's\n%+v", names[l.SubscriptionID], l, took)
		}
	}
	plain := first.Leased[idOf(t, first, names, "plain")]
	if plain.RetryPolicy == nil || plain.RetryPolicy.TimeoutSeconds != 3 || string(plain.SealedHeaders) != "headers" {
		t.Errorf("the plain delivery's policy %+v, headers %q", plain.RetryPolicy, plain.SealedHeaders)
	}

	// The second event's ordered delivery waits behind the first.
	if got, want := leasedNames(publish(leaseUntil)), map[string]bool{"plain": true}; !reflect.DeepEqual(got, want) {
		t.Errorf("the second publish leased %v, want %v", got, want)
	}
	// Without a lease asked for, nothing is leased.
	if got := publish(time.Time{}); got.Leased != nil {
		t.Errorf("a publish without a lease leased %v", leasedNames(got))
	}
}

// idOf is the id of the delivery of w to the subscription named name.
func idOf(t *testing.T, w store.EventWritten, names map[uuid.UUID]string, name string) uuid.UUID {
	t.Helper()
	for _, d := range w.Deliveries {
		if names[d.SubscriptionID] == name {
			return d.ID
		}
	}
	t.Fatalf("no delivery to %s", name)
	return uuid.Nil
}
