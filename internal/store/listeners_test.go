package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
)

func TestListenerLifecycle(t *testing.T) {
	t.Parallel()
	clock := newTestClock(time.Now().UTC().Truncate(time.Millisecond))
	st, ctx := newSubStore(t, store.WithClock(clock.Now))
	l, err := st.Listeners.CreateListener(ctx, store.NewListener{MerchantID: "m1", Events: []string{"payout.paid"},
		ExpiresAt: clock.Now().Add(30 * time.Second)}, []byte("sealed"))
	if err != nil {
		t.Fatal(err)
	}

	// Hidden from the subscription routes, and outside the cap.
	if subs, err := st.Subscriptions.ListSubscriptions(ctx, "m1", store.SubscriptionFilter{}, store.Page{Limit: 10}); err != nil || len(subs) != 0 {
		t.Fatalf("ListSubscriptions = %d, %v; want no listener in it", len(subs), err)
	}
	if _, err := st.Subscriptions.GetSubscription(ctx, "m1", l.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetSubscription(listener) = %v, want ErrNotFound", err)
	}
	if _, err := st.Subscriptions.CreateSubscription(ctx, store.NewSubscription{MerchantID: "m1", URL: "https://example.com/h",
		Events: []string{"*"}, Limit: 1}, []byte("sealed")); err != nil {
		t.Fatalf("a listener must not count against the cap: %v", err)
	}
	if _, err := st.Listeners.GetListener(ctx, "m2", l.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another merchant's GetListener = %v, want ErrNotFound", err)
	}

	// An event of the merchant reaches the listener; the lease says its kind.
	ev := store.Event{ID: uuid.New(), MerchantID: "m1", Type: "payout.paid", APIVersion: "2026-05-01", Body: []byte(`{}`), CreatedAt: clock.Now()}
	_, ds, _, err := st.Events.CreateEvent(ctx, ev, store.Audience{})
	if err != nil || len(ds) != 2 {
		t.Fatalf("CreateEvent = %d deliveries, %v; want the endpoint's and the listener's", len(ds), err)
	}
	var toListener store.Delivery
	for _, d := range ds {
		if d.SubscriptionID == l.ID {
			toListener = d
		}
	}
	leased, err := st.Deliveries.LeaseDelivery(ctx, toListener.ID, toListener.CreatedAt, 1, clock.Now(), time.Second)
	if err != nil || leased.Kind != store.KindListener {
		t.Fatalf("lease = kind %q, %v; want listener", leased.Kind, err)
	}
	if err := st.Deliveries.ReleaseLease(ctx, leased.Delivery, leased.LeaseUntil); err != nil {
		t.Fatal(err)
	}

	// A heartbeat pushes the expiry on; ending before it does nothing.
	if err := st.Listeners.ExtendListener(ctx, l.ID, clock.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	clock.Advance(45 * time.Second)
	if ended, err := st.Listeners.EndListener(ctx, "m1", l.ID, clock.Now(), "listener_closed"); err != nil || ended {
		t.Fatalf("EndListener while live = %v, %v; want false", ended, err)
	}
	clock.Advance(30 * time.Second)
	if _, ended, err := st.Listeners.ListenerExpiry(ctx, l.ID); err != nil || ended {
		t.Fatalf("ListenerExpiry = ended %v, %v; want expired but not yet ended", ended, err)
	}
	n, err := st.Listeners.EndExpiredListeners(ctx, clock.Now(), "listener_closed")
	if err != nil || n != 1 {
		t.Fatalf("EndExpiredListeners = %d, %v; want 1", n, err)
	}
	if _, ended, err := st.Listeners.ListenerExpiry(ctx, l.ID); err != nil || !ended {
		t.Fatalf("ListenerExpiry after end = ended %v, %v", ended, err)
	}
	if err := st.Listeners.ExtendListener(ctx, l.ID, clock.Now().Add(time.Hour)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ExtendListener after end = %v, want ErrNotFound", err)
	}
	got, err := st.Views.GetDelivery(ctx, "m1", toListener.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.DeliveryFailed || got.NextAttemptAt != nil || len(got.Attempts) != 1 ||
		got.Attempts[0].Error == nil || *got.Attempts[0].Error != "listener_closed" {
		t.Fatalf("delivery after the listener ended = %+v, want failed with one listener_closed attempt", got)
	}
}

func TestListenerLimit(t *testing.T) {
	t.Parallel()
	st, ctx := newSubStore(t)
	n := store.NewListener{MerchantID: "m1", Events: []string{"*"}, ExpiresAt: time.Now().Add(time.Minute), Limit: 2}
	for range 2 {
		if _, err := st.Listeners.CreateListener(ctx, n, []byte("sealed")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Listeners.CreateListener(ctx, n, []byte("sealed")); !errors.Is(err, store.ErrListenerLimit) {
		t.Fatalf("third listener = %v, want ErrListenerLimit", err)
	}
	n.MerchantID = "m2"
	if _, err := st.Listeners.CreateListener(ctx, n, []byte("sealed")); err != nil {
		t.Fatalf("another merchant's listener = %v", err)
	}
}
