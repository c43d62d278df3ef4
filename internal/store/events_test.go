package store_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// TestCreateEventsGroup: a group of events is written as each would be
// alone, in the order given (an ordered key's sequences follow it), every
// delivery id ending with the group's bytes; a re-published id is stored
// once, and an event Postgres refuses fails alone, the others written.
func TestCreateEventsGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.NewStore(t)
	sub, _ := newDelivery(t, s, store.Audience{}) // m1, one endpoint for every type
	key := "k"
	if _, err := s.Subscriptions.UpdateSubscription(ctx, "m1", sub.ID, store.SubscriptionUpdate{SetOrderingKey: true, OrderingKey: &key}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	event := func(id uuid.UUID, body string) store.Event {
		return store.Event{ID: id, MerchantID: "m1", Type: "payout.paid", APIVersion: "2026-05-01", Body: []byte(body), CreatedAt: now}
	}
	first, second := uuid.New(), uuid.New()
	cases := []struct {
		name     string
		event    store.Event
		created  bool
		fails    bool
		sequence int64 // of its delivery; 0: none
	}{
		{"a new event", event(first, `{"k": "a"}`), true, false, 1},
		{"its id again", event(first, `{"k": "a"}`), false, false, 0},
		{"an event whose key jsonb refuses", event(uuid.New(), `{"k": "\u0000"}`), false, true, 0},
		{"another new event", event(second, `{"k": "a"}`), true, false, 2},
	}
	writes := make([]store.EventWrite, len(cases))
	for i, tc := range cases {
		writes[i] = store.EventWrite{Event: tc.event}
	}
	group, err := store.NewGroup()
	if err != nil {
		t.Fatal(err)
	}
	out, errs, err := s.Events.CreateEvents(ctx, writes, group)
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range cases {
		got := out[i]
		switch {
		case (errs[i] != nil) != tc.fails:
			t.Errorf("%s: error %v", tc.name, errs[i])
		case tc.fails:
		case got.Created != tc.created || got.Event.ID != tc.event.ID:
			t.Errorf("%s: created %v, event %s", tc.name, got.Created, got.Event.ID)
		case tc.sequence == 0 && len(got.Deliveries) != 0:
			t.Errorf("%s: %d deliveries, want none", tc.name, len(got.Deliveries))
		case tc.sequence != 0 && (len(got.Deliveries) != 1 || got.Deliveries[0].Sequence == nil || *got.Deliveries[0].Sequence != tc.sequence):
			t.Errorf("%s: deliveries %+v, want one of sequence %d", tc.name, got.Deliveries, tc.sequence)
		case tc.sequence != 0 && !bytes.Equal(store.DeliveryGroup(got.Deliveries[0].ID), group):
			t.Errorf("%s: delivery id %s does not end with the group %x", tc.name, got.Deliveries[0].ID, group)
		}
	}
}

// TestHeldDeliveriesAreNotDueUntilHeldUntil: an endpoint check's delivery,
// created held until the check has leased it, is not due (so the sweeper
// cannot take it for lost) until then, and the check can lease it at once.
func TestHeldDeliveriesAreNotDueUntilHeldUntil(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.NewStore(t)
	held := time.Now().Add(time.Minute).UTC().Truncate(time.Millisecond)
	_, d := newDelivery(t, s, store.Audience{SubscriptionID: &uuid.UUID{}, Test: true, HeldUntil: held})
	if d.NextAttemptAt == nil || !d.NextAttemptAt.Equal(held) {
		t.Fatalf("next attempt at %v, want %v", d.NextAttemptAt, held)
	}
	for _, at := range []struct {
		name string
		now  time.Time
		due  bool
	}{{"before it is held until", held.Add(-time.Second), false}, {"after", held.Add(time.Second), true}} {
		due, err := s.Deliveries.DueDeliveries(ctx, at.now, at.now, nil, 10)
		if err != nil {
			t.Fatal(err)
		}
		if (len(due) == 1) != at.due {
			t.Errorf("%s: %d deliveries due, want due %v", at.name, len(due), at.due)
		}
	}
	if _, err := s.Deliveries.LeaseDelivery(ctx, d.ID, d.CreatedAt, 1, time.Now(), time.Minute); err != nil {
		t.Fatalf("the check leases its held delivery at once: %v", err)
	}
}
