package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/signer"
)

// testClock is a settable clock for WithClock.
type testClock struct{ ns atomic.Int64 }

func newTestClock(t time.Time) *testClock {
	c := &testClock{}
	c.ns.Store(t.UnixNano())
	return c
}

func (c *testClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *testClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

func newSubStore(t *testing.T, opts ...store.Option) (*store.Store, context.Context) {
	t.Helper()
	st := storetest.NewStore(t, opts...)
	ctx := context.Background()
	for _, m := range []string{"m1", "m2"} {
		if _, err := st.Merchants.EnsureMerchant(ctx, m, "2026-05-01"); err != nil {
			t.Fatal(err)
		}
	}
	return st, ctx
}

func createSub(t *testing.T, st *store.Store, merchant string, events ...string) store.Subscription {
	t.Helper()
	if len(events) == 0 {
		events = []string{"*"}
	}
	sub, err := st.Subscriptions.CreateSubscription(context.Background(), store.NewSubscription{
		MerchantID: merchant, URL: "https://example.com/hook", Events: events,
	}, []byte("sealed-0"))
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

func TestSubscriptionLifecycle(t *testing.T) {
	st, ctx := newSubStore(t)
	desc := "orders"
	sub, err := st.Subscriptions.CreateSubscription(ctx, store.NewSubscription{
		MerchantID: "m1", URL: "https://example.com/a", Events: []string{"payout.paid", "payout.failed"},
		Description: &desc, Metadata: map[string]string{"team": "ops"},
	}, []byte("sealed"))
	if err != nil {
		t.Fatal(err)
	}
	if sub.ID.Version() != 7 || sub.Status != store.SubscriptionEnabled || *sub.Description != "orders" ||
		sub.Metadata["team"] != "ops" || !slices.Equal(sub.Events, []string{"payout.paid", "payout.failed"}) {
		t.Fatalf("created %+v", sub)
	}
	got, err := st.Subscriptions.GetSubscription(ctx, "m1", sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.URL != sub.URL || !got.CreatedAt.Equal(sub.CreatedAt) {
		t.Fatalf("get %+v, want %+v", got, sub)
	}

	// A partial update touches only what it names.
	disabled := store.SubscriptionDisabled
	upd, err := st.Subscriptions.UpdateSubscription(ctx, "m1", sub.ID, store.SubscriptionUpdate{Status: &disabled})
	if err != nil {
		t.Fatal(err)
	}
	if upd.Status != disabled || upd.URL != sub.URL || *upd.Description != desc || upd.Metadata["team"] != "ops" ||
		!slices.Equal(upd.Events, sub.Events) {
		t.Fatalf("status-only update changed more: %+v", upd)
	}
	url := "https://example.com/b"
	upd, err = st.Subscriptions.UpdateSubscription(ctx, "m1", sub.ID, store.SubscriptionUpdate{
		URL: &url, Events: []string{"*"}, SetDescription: true, Metadata: map[string]string{},
	})
	if err != nil {
		t.Fatal(err)
	}
	if upd.URL != url || upd.Description != nil || len(upd.Metadata) != 0 || !slices.Equal(upd.Events, []string{"*"}) ||
		upd.Status != disabled {
		t.Fatalf("update %+v", upd)
	}

	if err := st.Subscriptions.DeleteSubscription(ctx, "m1", sub.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Subscriptions.GetSubscription(ctx, "m1", sub.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if err := st.Subscriptions.DeleteSubscription(ctx, "m1", sub.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := st.Subscriptions.UpdateSubscription(ctx, "m1", sub.ID, store.SubscriptionUpdate{Status: &disabled}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update after delete: %v", err)
	}
}

func TestSubscriptionTenancy(t *testing.T) {
	st, ctx := newSubStore(t)
	sub := createSub(t, st, "m1")
	enabled := store.SubscriptionEnabled
	secret, _ := signer.NewSecret()
	checks := map[string]func() error{
		"get": func() error { _, err := st.Subscriptions.GetSubscription(ctx, "m2", sub.ID); return err },
		"update": func() error {
			_, err := st.Subscriptions.UpdateSubscription(ctx, "m2", sub.ID, store.SubscriptionUpdate{Status: &enabled})
			return err
		},
		"rotate": func() error {
			_, err := st.Subscriptions.RotateSecret(ctx, "m2", sub.ID, []byte("x"), subscriptions.Rotation(secret))
			return err
		},
		"delete": func() error { return st.Subscriptions.DeleteSubscription(ctx, "m2", sub.ID) },
		"unknown id": func() error {
			_, err := st.Subscriptions.GetSubscription(ctx, "m1", uuid.Must(uuid.NewV7()))
			return err
		},
	}
	for name, check := range checks {
		if err := check(); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s as another merchant: %v, want ErrNotFound", name, err)
		}
	}
	list, err := st.Subscriptions.ListSubscriptions(ctx, "m2", store.SubscriptionFilter{}, store.Page{Limit: 10})
	if err != nil || len(list) != 0 {
		t.Errorf("m2 lists %d subscriptions (%v), want 0", len(list), err)
	}
	if _, err := st.Subscriptions.GetSubscription(ctx, "m1", sub.ID); err != nil {
		t.Errorf("the owner lost its subscription: %v", err)
	}
}

func TestListSubscriptionsPages(t *testing.T) {
	clock := newTestClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	st, ctx := newSubStore(t, store.WithClock(clock.Now))
	var want []uuid.UUID // newest first
	disabled := store.SubscriptionDisabled
	for i := range 7 {
		sub := createSub(t, st, "m1")
		if i%3 == 0 {
			if _, err := st.Subscriptions.UpdateSubscription(ctx, "m1", sub.ID, store.SubscriptionUpdate{Status: &disabled}); err != nil {
				t.Fatal(err)
			}
		}
		want = append([]uuid.UUID{sub.ID}, want...)
		// Every second one shares its created_at with the next, so that the
		// id breaks ties.
		if i%2 == 1 {
			clock.Advance(time.Second)
		}
	}
	createSub(t, st, "m2")

	for _, tc := range []struct {
		status store.SubscriptionStatus
		want   []uuid.UUID
	}{
		{"", want},
		{store.SubscriptionDisabled, []uuid.UUID{want[0], want[3], want[6]}},
		{store.SubscriptionEnabled, []uuid.UUID{want[1], want[2], want[4], want[5]}},
	} {
		t.Run("status="+string(tc.status), func(t *testing.T) {
			var got []uuid.UUID
			page := store.Page{Limit: 3}
			for n := 0; ; n++ {
				if n > 5 {
					t.Fatal("pagination does not end")
				}
				rows, err := st.Subscriptions.ListSubscriptions(ctx, "m1", store.SubscriptionFilter{Status: tc.status}, page)
				if err != nil {
					t.Fatal(err)
				}
				more := len(rows) > page.Limit
				rows = rows[:min(len(rows), page.Limit)]
				for _, r := range rows {
					got = append(got, r.ID)
				}
				if !more {
					break
				}
				last := rows[len(rows)-1]
				page.After = &store.Cursor{CreatedAt: last.CreatedAt, ID: last.ID.String()}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("pages gave %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDeleteSubscriptionStopsPendingDeliveries(t *testing.T) {
	st, ctx := newSubStore(t)
	doomed := createSub(t, st, "m1")
	kept := createSub(t, st, "m1")
	now := st.Now()
	insert := func(sub uuid.UUID, status store.DeliveryStatus) uuid.UUID {
		id := uuid.Must(uuid.NewV7())
		next := now.Add(time.Minute)
		_, err := st.Pool().Exec(ctx, `INSERT INTO deliveries (id, merchant_id, event_id, event_created_at, event_type,
			subscription_id, status, next_attempt_at, created_at, updated_at)
			VALUES ($1, 'm1', $2, $3, 'payout.paid', $4, $5, $6, $3, $3)`, id, uuid.New(), now, sub, status, next)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	pending := insert(doomed.ID, store.DeliveryPending)
	succeeded := insert(doomed.ID, store.DeliverySucceeded)
	other := insert(kept.ID, store.DeliveryPending)

	if err := st.Subscriptions.DeleteSubscription(ctx, "m1", doomed.ID); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[uuid.UUID]struct {
		status  store.DeliveryStatus
		hasNext bool
	}{
		pending:   {store.DeliveryFailed, false},
		succeeded: {store.DeliverySucceeded, true},
		other:     {store.DeliveryPending, true},
	} {
		var status store.DeliveryStatus
		var next *time.Time
		if err := st.Pool().QueryRow(ctx, `SELECT status, next_attempt_at FROM deliveries WHERE id = $1`, id).Scan(&status, &next); err != nil {
			t.Fatal(err)
		}
		if status != want.status || (next != nil) != want.hasNext {
			t.Errorf("delivery %s: status %s, next %v; want %s, next set %v", id, status, next, want.status, want.hasNext)
		}
	}
}

func TestRotateSecretOverlap(t *testing.T) {
	clock := newTestClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	st, ctx := newSubStore(t, store.WithClock(clock.Now))
	sub := createSub(t, st, "m1") // first secret: "sealed-0"
	rotate := func(sealed string) {
		t.Helper()
		secret, err := signer.NewSecret()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Subscriptions.RotateSecret(ctx, "m1", sub.ID, []byte(sealed), subscriptions.Rotation(secret)); err != nil {
			t.Fatal(err)
		}
	}
	active := func() []string {
		t.Helper()
		stored, err := st.Subscriptions.SigningSecrets(ctx, sub.ID)
		if err != nil {
			t.Fatal(err)
		}
		// Ciphertexts stand in for values: Active only looks at times and ids.
		var secrets []signer.Secret
		for _, s := range stored {
			secrets = append(secrets, signer.Secret{ID: s.ID, Value: string(s.Ciphertext), CreatedAt: s.CreatedAt, ExpiresAt: s.ExpiresAt})
		}
		var out []string
		for _, s := range signer.Active(secrets, clock.Now()) {
			out = append(out, s.Value)
		}
		if len(out) != len(stored) {
			t.Errorf("SigningSecrets returned %d secrets, %d active", len(stored), len(out))
		}
		return out
	}
	expect := func(step string, want ...string) {
		t.Helper()
		if got := active(); !slices.Equal(got, want) {
			t.Fatalf("%s: active %v, want %v", step, got, want)
		}
	}

	expect("after create", "sealed-0")
	clock.Advance(time.Hour)
	rotate("sealed-1")
	expect("in the overlap", "sealed-1", "sealed-0")
	clock.Advance(signer.RotationOverlap - time.Second)
	expect("a second before the overlap ends", "sealed-1", "sealed-0")
	clock.Advance(time.Second)
	expect("when the overlap ends", "sealed-1")

	rotate("sealed-2")
	clock.Advance(time.Minute)
	rotate("sealed-3")
	expect("second rotation inside the overlap", "sealed-3", "sealed-2")
	clock.Advance(signer.RotationOverlap)
	expect("after the last overlap", "sealed-3")
}

func TestRotateSecretConcurrent(t *testing.T) {
	st, ctx := newSubStore(t)
	sub := createSub(t, st, "m1")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			secret, err := signer.NewSecret()
			if err == nil {
				_, err = st.Subscriptions.RotateSecret(ctx, "m1", sub.ID, fmt.Appendf(nil, "sealed-%d", i), subscriptions.Rotation(secret))
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	stored, err := st.Subscriptions.SigningSecrets(ctx, sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != signer.MaxActiveSecrets {
		t.Fatalf("%d secrets unexpired after concurrent rotations, want %d", len(stored), signer.MaxActiveSecrets)
	}
}

func TestRotateSecretRefusesInvalidSecret(t *testing.T) {
	st, ctx := newSubStore(t)
	sub := createSub(t, st, "m1")
	if _, err := st.Subscriptions.RotateSecret(ctx, "m1", sub.ID, []byte("x"), subscriptions.Rotation("not-a-secret")); !errors.Is(err, signer.ErrInvalidSecret) {
		t.Fatalf("rotate with a bad secret: %v", err)
	}
	stored, err := st.Subscriptions.SigningSecrets(ctx, sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 1 || string(stored[0].Ciphertext) != "sealed-0" || stored[0].ExpiresAt != nil {
		t.Fatalf("a refused rotation changed the secrets: %+v", stored)
	}
}

// TestCreateSubscriptionLimit: with a Limit, creates racing each other
// cannot pass it together (20 at once with a limit of 5 make exactly 5),
// deleted subscriptions do not count, and another merchant is not held.
func TestCreateSubscriptionLimit(t *testing.T) {
	st, ctx := newSubStore(t)
	const attempts, limit = 20, 5
	errs := make([]error, attempts)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range attempts {
		wg.Go(func() {
			<-start
			_, errs[i] = st.Subscriptions.CreateSubscription(ctx, store.NewSubscription{MerchantID: "m1", URL: "https://example.com/hook",
				Events: []string{"*"}, Limit: limit}, []byte("sealed"))
		})
	}
	close(start)
	wg.Wait()
	created := 0
	for _, err := range errs {
		switch {
		case err == nil:
			created++
		case !errors.Is(err, store.ErrSubscriptionLimit):
			t.Fatalf("create: %v, want nil or ErrSubscriptionLimit", err)
		}
	}
	if created != limit {
		t.Fatalf("%d created, want %d", created, limit)
	}
	other, err := st.Subscriptions.CreateSubscription(ctx, store.NewSubscription{MerchantID: "m2", URL: "https://example.com/hook",
		Events: []string{"*"}, Limit: limit}, []byte("sealed"))
	if err != nil {
		t.Fatalf("another merchant's create: %v", err)
	}
	if err := st.Subscriptions.DeleteSubscription(ctx, "m2", other.ID); err != nil {
		t.Fatal(err)
	}
	subs, err := st.Subscriptions.ListSubscriptions(ctx, "m1", store.SubscriptionFilter{}, store.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Subscriptions.DeleteSubscription(ctx, "m1", subs[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Subscriptions.CreateSubscription(ctx, store.NewSubscription{MerchantID: "m1", URL: "https://example.com/hook",
		Events: []string{"*"}, Limit: limit}, []byte("sealed")); err != nil {
		t.Fatalf("create after a delete: %v", err)
	}
}
