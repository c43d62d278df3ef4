package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// orderedSubscription stores a merchant and a subscription ordered by
// payload.account.
func orderedSubscription(t *testing.T, s *store.Store) store.Subscription {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Merchants.EnsureMerchant(ctx, "m1", "2026-05-01"); err != nil {
		t.Fatal(err)
	}
	key, limit := "payload.account", 5
	sub, err := s.Subscriptions.CreateSubscription(ctx, store.NewSubscription{MerchantID: "m1", URL: "https://example.com/h",
		Events: []string{"*"}, OrderingKey: &key, RateLimit: &limit}, []byte("sealed"))
	if err != nil {
		t.Fatal(err)
	}
	if sub.OrderingKey == nil || *sub.OrderingKey != key || sub.RateLimit == nil || *sub.RateLimit != 5 {
		t.Fatalf("created controls = %v, %v", sub.OrderingKey, sub.RateLimit)
	}
	return sub
}

// publishFor publishes one event whose payload.account is account and
// returns its one delivery.
func publishFor(t *testing.T, s *store.Store, account string) store.Delivery {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	body := fmt.Sprintf(`{"id":"%s","type":"payout.paid","payload":{"account":%q}}`, uuid.New(), account)
	if account == "" {
		body = `{"type":"payout.paid","payload":{}}`
	}
	ev := store.Event{ID: uuid.New(), MerchantID: "m1", Type: "payout.paid", APIVersion: "2026-05-01", Body: []byte(body), CreatedAt: now}
	_, ds, _, err := s.Events.CreateEvent(context.Background(), ev, store.Audience{})
	if err != nil || len(ds) != 1 {
		t.Fatalf("CreateEvent = %d deliveries, %v", len(ds), err)
	}
	return ds[0]
}

// finish leases d's next attempt and records its outcome.
func finish(t *testing.T, s *store.Store, d store.Delivery, status store.DeliveryStatus) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	l, err := s.Deliveries.LeaseDelivery(ctx, d.ID, d.CreatedAt, d.AttemptCount+1, now, time.Minute)
	if err != nil {
		t.Fatalf("lease of %s (sequence %v) = %v", d.ID, deref(d.Sequence), err)
	}
	rec := store.AttemptRecord{Delivery: l.Delivery, Status: status,
		Attempt: store.Attempt{Number: d.AttemptCount + 1, Status: store.AttemptFailed, Trigger: store.TriggerScheduled, AttemptedAt: now}}
	if status == store.DeliverySucceeded {
		rec.Attempt.Status = store.AttemptSucceeded
	}
	if status == store.DeliveryPending {
		next := now.Add(time.Second)
		rec.NextAttemptAt = &next
	}
	if err := s.Deliveries.RecordAttempt(ctx, rec); err != nil {
		t.Fatal(err)
	}
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func TestOrderedLineTakesOneAtATime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.NewStore(t)
	sub := orderedSubscription(t, s)

	a1, a2, a3 := publishFor(t, s, "acct_a"), publishFor(t, s, "acct_a"), publishFor(t, s, "acct_a")
	b1 := publishFor(t, s, "acct_b")
	none := publishFor(t, s, "")
	for i, d := range []store.Delivery{a1, a2, a3} {
		if d.Sequence == nil || *d.Sequence != int64(i+1) || *d.OrderingKey != "acct_a" {
			t.Fatalf("delivery %d: key %v sequence %v", i, d.OrderingKey, d.Sequence)
		}
		if d.RateLimit != 5 {
			t.Fatalf("delivery %d: rate limit %d, want 5", i, d.RateLimit)
		}
	}
	if a1.NextAttemptAt == nil || a2.NextAttemptAt != nil || a3.NextAttemptAt != nil {
		t.Fatalf("only the first of a key is due: %v %v %v", a1.NextAttemptAt, a2.NextAttemptAt, a3.NextAttemptAt)
	}
	if b1.Sequence == nil || *b1.Sequence != 1 || b1.NextAttemptAt == nil {
		t.Fatalf("another key starts its own line: %v %v", b1.Sequence, b1.NextAttemptAt)
	}
	if none.Sequence != nil || none.NextAttemptAt == nil {
		t.Fatalf("an event without the key is unordered: %v", none.Sequence)
	}
	for _, bad := range []string{strings.Repeat("k", 257), "line\nbreak"} {
		if d := publishFor(t, s, bad); d.Sequence != nil || d.OrderingKey != nil {
			t.Fatalf("key %.20q: sequence %v; a key that cannot be a header orders nothing", bad, d.Sequence)
		}
	}

	// The second of a key cannot be leased while the first is pending,
	// and the sweeper does not see it.
	if _, err := s.Deliveries.LeaseDelivery(ctx, a2.ID, a2.CreatedAt, 1, time.Now(), time.Minute); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("lease behind the head = %v, want ErrNotFound", err)
	}
	due, err := s.Deliveries.DueDeliveries(ctx, time.Now().Add(time.Hour), time.Now(), nil, 100)
	if err != nil || len(due) != 5 {
		t.Fatalf("due = %d, %v; want a1, b1 and the three unordered ones", len(due), err)
	}

	// A failed attempt with a retry keeps the key; the end of the head
	// hands it to the next, due now.
	finish(t, s, a1, store.DeliveryPending)
	if _, err := s.Deliveries.LineHead(ctx, sub.ID, "acct_a"); err != nil {
		t.Fatalf("head while a1 retries = %v", err)
	}
	a1.AttemptCount = 1
	finish(t, s, a1, store.DeliverySucceeded)
	head, err := s.Deliveries.LineHead(ctx, sub.ID, "acct_a")
	if err != nil || head.ID != a2.ID || head.NextAttemptAt == nil || head.RateLimit != 5 {
		t.Fatalf("head after a1 = %v (%v), want a2 due", head.ID, err)
	}
	// Due in Postgres: if its enqueue is lost, the sweeper finds it.
	due, err = s.Deliveries.DueDeliveries(ctx, time.Now().Add(time.Hour), time.Now(), nil, 100)
	if err != nil || !slices.ContainsFunc(due, func(d store.Delivery) bool { return d.ID == a2.ID }) ||
		slices.ContainsFunc(due, func(d store.Delivery) bool { return d.ID == a3.ID }) {
		t.Fatalf("due after a1 ended: %d, %v; want a2 and not a3", len(due), err)
	}
	// A head that fails for good releases its key too.
	finish(t, s, a2, store.DeliveryFailed)
	if head, err = s.Deliveries.LineHead(ctx, sub.ID, "acct_a"); err != nil || head.ID != a3.ID {
		t.Fatalf("head after a2 failed = %v (%v), want a3", head.ID, err)
	}
	finish(t, s, a3, store.DeliverySucceeded)
	if _, err = s.Deliveries.LineHead(ctx, sub.ID, "acct_a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("head of an idle key = %v, want ErrNotFound", err)
	}
	// An idle key's next event is due at once, its sequence going on.
	a4 := publishFor(t, s, "acct_a")
	if *a4.Sequence != 4 || a4.NextAttemptAt == nil {
		t.Fatalf("a4 = sequence %d, due %v", *a4.Sequence, a4.NextAttemptAt)
	}
}

func TestOrderedLineSkipsDeliveriesEndedOutOfTurn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.NewStore(t)
	sub := orderedSubscription(t, s)
	a1, a2, a3 := publishFor(t, s, "k"), publishFor(t, s, "k"), publishFor(t, s, "k")
	// a2 ends out of turn (as a manual attempt, outside the line, may):
	// the end of a1 moves the head past it.
	if err := s.Deliveries.AbandonDelivery(ctx, a2, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.Deliveries.AbandonDelivery(ctx, a1, time.Now()); err != nil {
		t.Fatal(err)
	}
	head, err := s.Deliveries.LineHead(ctx, sub.ID, "k")
	if err != nil || head.ID != a3.ID {
		t.Fatalf("head = %v (%v), want a3", head.ID, err)
	}
}

// TestOrderedFanOutRacesHeadEnd publishes and ends heads concurrently: no
// key is ever left with a waiting delivery and no head.
func TestOrderedFanOutRacesHeadEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.NewStore(t)
	sub := orderedSubscription(t, s)
	const events = 60
	// committed tells of each publish once it has committed, and is closed
	// after the last.
	committed := make(chan struct{}, events)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(committed)
		for range events {
			now := time.Now().UTC().Truncate(time.Millisecond)
			ev := store.Event{ID: uuid.New(), MerchantID: "m1", Type: "payout.paid", APIVersion: "2026-05-01",
				Body: []byte(`{"payload":{"account":"k"}}`), CreatedAt: now}
			if _, _, _, err := s.Events.CreateEvent(ctx, ev, store.Audience{}); err != nil {
				t.Error(err)
				return
			}
			committed <- struct{}{}
		}
	})
	for finished := 0; finished < events && !t.Failed(); {
		head, err := s.Deliveries.LineHead(ctx, sub.ID, "k")
		if errors.Is(err, store.ErrNotFound) {
			// Idle until the next publish commits. Once every publish
			// has, and all were read, a key with deliveries left and no
			// head is the bug.
			if _, more := <-committed; !more {
				t.Fatalf("after %d of %d, the key has no head", finished, events)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if *head.Sequence != int64(finished+1) || head.NextAttemptAt == nil {
			t.Fatalf("head sequence %d (due %v), want %d due", *head.Sequence, head.NextAttemptAt, finished+1)
		}
		finish(t, s, head, store.DeliverySucceeded)
		finished++
	}
	wg.Wait()
}

// TestOrderedSkippedTakesNoSequence: a delivery skipped while an ordered
// subscription is disabled is no part of its key's line (no key, no
// sequence, never due), so that after the subscription is enabled again
// the key flows, and recover can replay the skipped one outside the order.
func TestOrderedSkippedTakesNoSequence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.NewStore(t)
	sub := orderedSubscription(t, s)
	a1 := publishFor(t, s, "acct_a")
	setStatus := func(status store.SubscriptionStatus) {
		t.Helper()
		if _, err := s.Subscriptions.UpdateSubscription(ctx, "m1", sub.ID, store.SubscriptionUpdate{Status: &status}); err != nil {
			t.Fatal(err)
		}
	}
	setStatus(store.SubscriptionDisabled)
	skipped := publishFor(t, s, "acct_a")
	if skipped.Status != store.DeliverySkipped || skipped.Sequence != nil || skipped.OrderingKey != nil || skipped.NextAttemptAt != nil {
		t.Fatalf("skipped = status %s, key %v, sequence %v, due %v; want skipped outside the line",
			skipped.Status, skipped.OrderingKey, skipped.Sequence, skipped.NextAttemptAt)
	}
	setStatus(store.SubscriptionEnabled)
	a2 := publishFor(t, s, "acct_a")
	if a2.Sequence == nil || *a2.Sequence != 2 || a2.NextAttemptAt != nil {
		t.Fatalf("a2 = sequence %v, due %v; want 2 behind a1", a2.Sequence, a2.NextAttemptAt)
	}
	finish(t, s, a1, store.DeliverySucceeded)
	head, err := s.Deliveries.LineHead(ctx, sub.ID, "acct_a")
	if err != nil || head.ID != a2.ID || head.NextAttemptAt == nil {
		t.Fatalf("head after a1 = %v (%v), want a2 due", head.ID, err)
	}
}

// TestPayloadReadOnlyForOrderingSubscriptions: a fan-out parses the
// payload (for an ordering key) only for the subscriptions that order,
// alone and in a group: a body that is not JSON reaches a plain
// subscription, which reads no key from it.
func TestPayloadReadOnlyForOrderingSubscriptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.NewStore(t)
	if _, err := s.Merchants.EnsureMerchant(ctx, "m1", "2026-05-01"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Subscriptions.CreateSubscription(ctx, store.NewSubscription{MerchantID: "m1", URL: "https://example.com/h",
		Events: []string{"*"}}, []byte("sealed")); err != nil {
		t.Fatal(err)
	}
	notJSON := func() store.Event {
		return store.Event{ID: uuid.New(), MerchantID: "m1", Type: "payout.paid", APIVersion: "2026-05-01",
			Body: []byte("not JSON {"), CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
	}
	if _, ds, _, err := s.Events.CreateEvent(ctx, notJSON(), store.Audience{}); err != nil || len(ds) != 1 {
		t.Fatalf("one event: CreateEvent = %d deliveries, %v", len(ds), err)
	}
	writes := make([]store.EventWrite, 8) // a group's statement, not one per event
	for i := range writes {
		writes[i] = store.EventWrite{Event: notJSON()}
	}
	written, errs, err := s.Events.CreateEvents(ctx, writes, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range writes {
		if errs[i] != nil || len(written[i].Deliveries) != 1 {
			t.Fatalf("group write %d: %d deliveries, %v", i, len(written[i].Deliveries), errs[i])
		}
	}
}
