package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// TestDeliveryKeepsTheRetryPolicyOfItsFirstAttempt: a delivery not yet
// attempted takes its subscription's policy as it is at the lease of its
// first attempt (an update before that applies); from then on it keeps
// that one, whatever later updates make of the subscription's, on every
// lease, scheduled and manual, in one batch with another delivery. A
// subscription without a policy pins the engine's (an empty policy), which
// a later policy does not replace either.
func TestDeliveryKeepsTheRetryPolicyOfItsFirstAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.NewStore(t)
	sub, d := newDelivery(t, s, store.Audience{})
	if sub.RetryPolicy != nil {
		t.Fatalf("a new subscription's policy = %+v, want none", sub.RetryPolicy)
	}
	update := func(p *store.RetryPolicy) {
		t.Helper()
		got, err := s.Subscriptions.UpdateSubscription(ctx, "m1", sub.ID, store.SubscriptionUpdate{SetRetryPolicy: true, RetryPolicy: p})
		if err != nil {
			t.Fatal(err)
		}
		if (p == nil) != (got.RetryPolicy == nil) || (p != nil && !slices.Equal(got.RetryPolicy.Schedule, p.Schedule)) {
			t.Fatalf("updated policy = %+v, want %+v", got.RetryPolicy, p)
		}
	}
	first := &store.RetryPolicy{Schedule: []int64{1, 2}, TimeoutSeconds: 3}
	second := &store.RetryPolicy{Schedule: []int64{60, 60, 60}}
	// Updated before the first attempt: the delivery takes the update.
	update(&store.RetryPolicy{Schedule: []int64{7}})
	update(first)
	now := time.Now()
	l, err := s.Deliveries.LeaseDelivery(ctx, d.ID, d.CreatedAt, 1, now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if l.RetryPolicy == nil || !slices.Equal(l.RetryPolicy.Schedule, first.Schedule) || l.RetryPolicy.TimeoutSeconds != 3 {
		t.Fatalf("first lease's policy = %+v, want %+v", l.RetryPolicy, first)
	}
	next := now.Add(time.Second)
	if err := s.Deliveries.RecordAttempt(ctx, store.AttemptRecord{Delivery: l.Delivery, Status: store.DeliveryPending, NextAttemptAt: &next,
		Attempt: store.Attempt{Number: 1, Status: store.AttemptFailed, Trigger: store.TriggerScheduled, AttemptedAt: now}}); err != nil {
		t.Fatal(err)
	}
	// Updated mid-schedule: the delivery keeps what it started with.
	update(second)
	// A second delivery, not attempted yet, leased in the same batch,
	// takes the subscription's policy as it is now.
	_, fresh := newDeliveryTo(t, s, sub)
	ls, errs, err := s.Deliveries.LeaseDeliveries(ctx, []store.LeaseRequest{
		{ID: d.ID, CreatedAt: d.CreatedAt, Number: 2}, {ID: fresh.ID, CreatedAt: fresh.CreatedAt, Number: 1}}, now.Add(2*time.Second), time.Minute)
	if err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("LeaseDeliveries = %v, %v", errs, err)
	}
	if got := ls[0].RetryPolicy; got == nil || !slices.Equal(got.Schedule, first.Schedule) || got.TimeoutSeconds != 3 {
		t.Fatalf("the started delivery's second lease reads %+v, want the first policy %+v", got, first)
	}
	if got := ls[1].RetryPolicy; got == nil || !slices.Equal(got.Schedule, second.Schedule) || got.TimeoutSeconds != 0 {
		t.Fatalf("the fresh delivery's first lease reads %+v, want the updated policy %+v", got, second)
	}
	if err := s.Deliveries.ReleaseLease(ctx, ls[0].Delivery, ls[0].LeaseUntil); err != nil {
		t.Fatal(err)
	}
	// A manual attempt of the started delivery reads the same policy.
	if _, err := s.ManualAttempts.RequestManualAttempts(ctx, "m1", []store.Delivery{d}, now); err != nil {
		t.Fatal(err)
	}
	m, err := s.ManualAttempts.LeaseManualAttempt(ctx, "m1", d.ID, now.Add(3*time.Second), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.RetryPolicy; got == nil || !slices.Equal(got.Schedule, first.Schedule) {
		t.Fatalf("the manual lease reads %+v, want the first policy %+v", got, first)
	}

	// Without a policy, the first lease pins the engine's: an empty one,
	// which a lease reads as none (nil).
	update(nil)
	_, engine := newDeliveryTo(t, s, sub)
	l, err = s.Deliveries.LeaseDelivery(ctx, engine.ID, engine.CreatedAt, 1, now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if l.RetryPolicy != nil {
		t.Fatalf("lease without a policy reads %+v, want the engine's (empty)", l.RetryPolicy)
	}
	update(second)
	if err := s.Deliveries.ReleaseLease(ctx, l.Delivery, l.LeaseUntil); err != nil {
		t.Fatal(err)
	}
	l, err = s.Deliveries.LeaseDelivery(ctx, engine.ID, engine.CreatedAt, 1, now, time.Minute)
	if err != nil || l.RetryPolicy != nil {
		t.Fatalf("lease after a policy was set reads %+v (%v), want the engine's it started with", l.RetryPolicy, err)
	}
}

// newDeliveryTo fans out one more event to sub.
func newDeliveryTo(t *testing.T, s *store.Store, sub store.Subscription) (store.Event, store.Delivery) {
	t.Helper()
	ev := store.Event{ID: uuid.New(), MerchantID: "m1", Type: "payout.paid", APIVersion: "2026-05-01", Body: []byte(`{}`),
		CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
	_, ds, created, err := s.Events.CreateEvent(context.Background(), ev, store.Audience{})
	if err != nil || !created || len(ds) != 1 || ds[0].SubscriptionID != sub.ID {
		t.Fatalf("CreateEvent = %v, created %v, %v", ds, created, err)
	}
	return ev, ds[0]
}
