package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
)

// scheduledEvent is an event of merchant published at now to be
// delivered at deliverAt (nil: at once).
func scheduledEvent(merchant string, now time.Time, deliverAt *time.Time) store.Event {
	id := uuid.Must(uuid.NewV7())
	body := fmt.Sprintf(`{"id":%q,"type":"payout.paid","api_version":"2026-05-01","payload":{"n": 1},"date":%q}`, id, now.Format(time.RFC3339Nano))
	return store.Event{ID: id, MerchantID: merchant, Type: "payout.paid", APIVersion: "2026-05-01", Body: []byte(body),
		CreatedAt: now.UTC().Truncate(time.Millisecond), DeliverAt: deliverAt}
}

// TestScheduledEventWaitsUntilDeliverAt: a scheduled event's deliveries
// are stored with it, due at deliver_at (outside any ordering line, and
// none to a poll subscription), shown and listed as scheduled, and due for
// the sweeper only from deliver_at on, as pending ones.
func TestScheduledEventWaitsUntilDeliverAt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, clock := newViewsStore(t)
	newViewsSub(t, st, "m1", "*")
	ordered := newViewsSub(t, st, "m1", "*")
	key := "payload.n"
	if _, err := st.Subscriptions.UpdateSubscription(ctx, "m1", ordered.ID, store.SubscriptionUpdate{SetOrderingKey: true, OrderingKey: &key}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Subscriptions.CreateSubscription(ctx, store.NewSubscription{MerchantID: "m1", Events: []string{"*"},
		Destination: &store.Destination{Sealed: []byte("sealed"), Summary: map[string]any{"type": store.DestinationPoll}}}, []byte("sealed")); err != nil {
		t.Fatal(err)
	}
	now := clock.Now()
	at := now.Add(time.Hour).UTC().Truncate(time.Microsecond)
	ev, ds, created, err := st.Events.CreateEvent(ctx, scheduledEvent("m1", now, &at), store.Audience{})
	if err != nil || !created {
		t.Fatalf("create: %v (created %v)", err, created)
	}
	if len(ds) != 2 {
		t.Fatalf("%d deliveries, want 2: the endpoints', none to the poll subscription", len(ds))
	}
	for _, d := range ds {
		if d.NextAttemptAt == nil || !d.NextAttemptAt.Equal(at) || d.Sequence != nil || d.Status != store.DeliveryPending {
			t.Errorf("delivery to %s: next %v, sequence %v, status %s; want due at %v, unordered, stored pending",
				d.SubscriptionID, d.NextAttemptAt, d.Sequence, d.Status, at)
		}
	}
	if _, _, _, err := st.Events.CreateEvent(ctx, scheduledEvent("m1", now, nil), store.Audience{}); err != nil {
		t.Fatal(err)
	}
	got, err := st.Views.GetDelivery(ctx, "m1", ds[0].ID)
	if err != nil || got.Status != store.DeliveryScheduled || !got.NextAttemptAt.Equal(at) {
		t.Fatalf("read: %+v, %v; want scheduled, next attempt at deliver_at", got, err)
	}
	read, err := st.Views.GetEvent(ctx, "m1", ev.ID)
	if err != nil || read.DeliverAt == nil || !read.DeliverAt.Equal(at) {
		t.Fatalf("event read: deliver_at %v, %v", read.DeliverAt, err)
	}
	for _, tc := range []struct {
		status store.DeliveryStatus
		want   int
	}{{store.DeliveryScheduled, 2}, {store.DeliveryPending, 3}, {store.DeliveryCancelled, 0}} { // pending: the immediate event's, the poll line's too
		page, _, err := st.Views.ListDeliveries(ctx, "m1", store.DeliveryFilter{Status: tc.status}, store.Page{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range page {
			if d.Status != tc.status {
				t.Errorf("status=%s lists a delivery %s", tc.status, d.Status)
			}
		}
		if len(page) != tc.want {
			t.Errorf("status=%s: %d deliveries, want %d", tc.status, len(page), tc.want)
		}
		events, _, err := st.Views.ListEvents(ctx, "m1", store.EventFilter{DeliveryStatus: tc.status}, store.Page{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if want := min(tc.want, 1); len(events) != want {
			t.Errorf("events with a delivery %s: %d, want %d", tc.status, len(events), want)
		}
	}
	for _, tc := range []struct {
		name string
		now  time.Time
		due  int
	}{{"a second before deliver_at", at.Add(-time.Second), 2}, {"at deliver_at", at.Add(time.Millisecond), 4}} {
		// The immediate event's two deliveries are due from the start.
		due, err := st.Deliveries.DueDeliveries(ctx, tc.now, tc.now, nil, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(due) != tc.due {
			t.Errorf("%s: %d deliveries due, want %d", tc.name, len(due), tc.due)
		}
	}
}

// TestCancelScheduled: a cancel ends the scheduled deliveries that have
// not started, once (a second cancel changes nothing and succeeds); a
// cancelled delivery is never leased nor due. Another merchant's event is
// not found, an event published for at once is not scheduled, and one
// whose deliveries all started cannot be cancelled.
func TestCancelScheduled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, clock := newViewsStore(t)
	newViewsSub(t, st, "m1", "*")
	now := clock.Now()
	at := now.Add(time.Hour)
	ev, ds, _, err := st.Events.CreateEvent(ctx, scheduledEvent("m1", now, &at), store.Audience{})
	if err != nil || len(ds) != 1 {
		t.Fatalf("create: %d deliveries, %v", len(ds), err)
	}
	if _, _, err := st.Events.CancelScheduled(ctx, "m2", ev.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another merchant's cancel: %v, want not found", err)
	}
	if _, _, err := st.Events.CancelScheduled(ctx, "m1", uuid.New()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an unknown event's cancel: %v, want not found", err)
	}
	for i, want := range []int{1, 0} {
		got, cancelled, err := st.Events.CancelScheduled(ctx, "m1", ev.ID)
		if err != nil || len(cancelled) != want || got.ID != ev.ID {
			t.Fatalf("cancel %d: %d cancelled, %v; want %d", i+1, len(cancelled), err, want)
		}
	}
	if _, _, err := st.Events.CancelScheduled(ctx, "", ev.ID); err != nil {
		t.Errorf("the core API's cancel of any merchant's event: %v", err)
	}
	d, err := st.Views.GetDelivery(ctx, "m1", ds[0].ID)
	if err != nil || d.Status != store.DeliveryCancelled || d.NextAttemptAt != nil {
		t.Fatalf("cancelled delivery reads %s, next %v, %v", d.Status, d.NextAttemptAt, err)
	}
	if _, err := st.Deliveries.LeaseDelivery(ctx, d.ID, d.CreatedAt, 1, at.Add(time.Second), time.Minute); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a parked attempt of the cancelled delivery leases it: %v", err)
	}
	if due, err := st.Deliveries.DueDeliveries(ctx, at.Add(time.Hour), at.Add(time.Hour), nil, 10); err != nil || len(due) != 0 {
		t.Errorf("%d deliveries due after a cancel, %v", len(due), err)
	}

	now2, _, _, err := st.Events.CreateEvent(ctx, scheduledEvent("m1", now, nil), store.Audience{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Events.CancelScheduled(ctx, "m1", now2.ID); !errors.Is(err, store.ErrEventNotScheduled) {
		t.Errorf("an event for at once: %v, want not scheduled", err)
	}

	started, sds, _, err := st.Events.CreateEvent(ctx, scheduledEvent("m1", now, &at), store.Audience{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Deliveries.LeaseDelivery(ctx, sds[0].ID, sds[0].CreatedAt, 1, at, time.Minute); err != nil {
		t.Fatal(err)
	}
	clock.Set(at.Add(time.Second)) // its attempt runs, leased
	if _, _, err := st.Events.CancelScheduled(ctx, "m1", started.ID); !errors.Is(err, store.ErrEventStarted) {
		t.Errorf("an event whose delivery started: %v, want started", err)
	}
}

// TestScheduledEventInAGroup: a scheduled event in a commit group of
// fan-outs is written by its own statement, due at its deliver_at, while
// the others are due at once.
func TestScheduledEventInAGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, clock := newViewsStore(t)
	newViewsSub(t, st, "m1", "*")
	now := clock.Now()
	at := now.Add(time.Hour).UTC().Truncate(time.Microsecond)
	writes := make([]store.EventWrite, 8)
	for i := range writes {
		var deliverAt *time.Time
		if i == 3 {
			deliverAt = &at
		}
		writes[i] = store.EventWrite{Event: scheduledEvent("m1", now, deliverAt)}
	}
	group, err := store.NewGroup()
	if err != nil {
		t.Fatal(err)
	}
	out, errs, err := st.Events.CreateEvents(ctx, writes, group)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range out {
		want := writes[i].Event.CreatedAt
		if i == 3 {
			want = at
		}
		if errs[i] != nil || len(w.Deliveries) != 1 || !w.Deliveries[0].NextAttemptAt.Equal(want) {
			t.Errorf("write %d: %+v, %v; want one delivery due at %v", i, w.Deliveries, errs[i], want)
		}
	}
}
