package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/merchants"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// What an API key opened (portal sessions it minted, listeners it opened)
// ends with it: revoked, or rolled and past its overlap.

// keyState is what a case does to the key after it opened things.
type keyState struct {
	name string
	// apply moves the key of merchant m into the state; the clock is at
	// the case's start.
	apply func(t *testing.T, st *store.Store, clock *testClock, m string, id uuid.UUID)
	// works is whether the key still works afterwards.
	works bool
}

var keyStates = []keyState{
	{"active", func(*testing.T, *store.Store, *testClock, string, uuid.UUID) {}, true},
	{"revoked", func(t *testing.T, st *store.Store, _ *testClock, m string, id uuid.UUID) {
		if _, err := st.APIKeys.RevokeAPIKey(context.Background(), m, id); err != nil {
			t.Fatal(err)
		}
	}, false},
	{"rolled, in its overlap", func(t *testing.T, st *store.Store, clock *testClock, m string, id uuid.UUID) {
		rollKey(t, st, m, id, clock.Now().Add(time.Hour))
	}, true},
	{"rolled with no overlap", func(t *testing.T, st *store.Store, clock *testClock, m string, id uuid.UUID) {
		rollKey(t, st, m, id, clock.Now())
	}, false},
	{"rolled, overlap over", func(t *testing.T, st *store.Store, clock *testClock, m string, id uuid.UUID) {
		rollKey(t, st, m, id, clock.Now().Add(time.Minute))
		clock.Advance(time.Minute + time.Second)
	}, false},
}

// newKey issues a key of merchant m (creating the merchant).
func newKey(t *testing.T, st *store.Store, m string) uuid.UUID {
	t.Helper()
	k, err := st.APIKeys.CreateAPIKey(context.Background(), m, "2026-05-01", "sandbox", "sandbox."+uuid.NewString(), []string{"webhooks:write"})
	if err != nil {
		t.Fatal(err)
	}
	return k.ID
}

func rollKey(t *testing.T, st *store.Store, m string, id uuid.UUID, expiresAt time.Time) {
	t.Helper()
	if _, err := st.APIKeys.RollAPIKey(context.Background(), m, id, "sandbox."+uuid.NewString(), expiresAt, merchants.MayRoll); err != nil {
		t.Fatal(err)
	}
}

func newKeyedSession(t *testing.T, st *store.Store, m, token string, key uuid.UUID) store.PortalSession {
	t.Helper()
	s, err := st.PortalSessions.CreatePortalSession(context.Background(), store.NewPortalSession{MerchantID: m, Environment: "sandbox",
		Token: token, Capabilities: []string{"view"}, TTL: 24 * time.Hour, APIKeyID: key})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newBoundListener(t *testing.T, st *store.Store, clock *testClock, m string, key uuid.UUID) store.Listener {
	t.Helper()
	ctx := context.Background()
	l, err := st.Listeners.CreateListener(ctx, store.NewListener{MerchantID: m, Events: []string{"*"},
		ExpiresAt: clock.Now().Add(time.Hour)}, []byte("sealed"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Listeners.BindListener(ctx, m, l.ID, key); err != nil {
		t.Fatal(err)
	}
	return l
}

func sessionLive(t *testing.T, st *store.Store, token string, at time.Time) bool {
	t.Helper()
	_, _, err := st.PortalSessions.PortalSessionByHash(context.Background(), store.HashAPIKey(token), at)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// TestPortalSessionEndsWithItsKey: a session minted with a key is refused
// as soon as the key no longer works, before anything records it; a
// session the core API minted belongs to no key.
func TestPortalSessionEndsWithItsKey(t *testing.T) {
	t.Parallel()
	clock := newTestClock(time.Now().UTC().Truncate(time.Millisecond))
	st := storetest.NewStore(t, store.WithClock(clock.Now))
	ctx := context.Background()
	for i, tc := range keyStates {
		t.Run(tc.name, func(t *testing.T) {
			m := fmt.Sprintf("m_sess%d", i)
			key := newKey(t, st, m)
			keyed := newKeyedSession(t, st, m, "whps_keyed_"+m, key)
			unkeyed := newKeyedSession(t, st, m, "whps_core_"+m, uuid.Nil)
			if keyed.APIKeyID == nil || *keyed.APIKeyID != key || unkeyed.APIKeyID != nil {
				t.Fatalf("minted key ids %v, %v; want %s and none", keyed.APIKeyID, unkeyed.APIKeyID, key)
			}
			tc.apply(t, st, clock, m, key)
			if got := sessionLive(t, st, "whps_keyed_"+m, clock.Now()); got != tc.works {
				t.Errorf("the key's session live = %v, want %v", got, tc.works)
			}
			if !sessionLive(t, st, "whps_core_"+m, clock.Now()) {
				t.Error("a session the core API minted ended with a key")
			}
		})
	}

	// A session minted with a key in its overlap ends with the key, and
	// says so.
	key := newKey(t, st, "m_overlap")
	rollKey(t, st, "m_overlap", key, clock.Now().Add(10*time.Minute))
	s := newKeyedSession(t, st, "m_overlap", "whps_overlap", key)
	if want := clock.Now().Add(10 * time.Minute); !s.ExpiresAt.Equal(want.Truncate(time.Microsecond)) {
		t.Errorf("a session of an expiring key ends at %v, want the key's expiry %v", s.ExpiresAt, want)
	}
	got, _, err := st.PortalSessions.PortalSessionByHash(ctx, store.HashAPIKey("whps_overlap"), clock.Now())
	if err != nil || !got.ExpiresAt.Equal(s.ExpiresAt) {
		t.Errorf("lookup = %+v, %v; want expiry %v", got, err, s.ExpiresAt)
	}
}

// TestListenerEndsWithItsKey: a listener bound to a key is no longer live
// (nothing is sent to it, its heartbeat is refused) as soon as the key no
// longer works; an unbound listener depends on no key.
func TestListenerEndsWithItsKey(t *testing.T) {
	t.Parallel()
	clock := newTestClock(time.Now().UTC().Truncate(time.Millisecond))
	st := storetest.NewStore(t, store.WithClock(clock.Now))
	ctx := context.Background()
	for i, tc := range keyStates {
		t.Run(tc.name, func(t *testing.T) {
			m := fmt.Sprintf("m_lis%d", i)
			key := newKey(t, st, m)
			l := newBoundListener(t, st, clock, m, key)
			if got, err := st.Listeners.GetListener(ctx, m, l.ID); err != nil || got.APIKeyID != key {
				t.Fatalf("GetListener = key %s, %v; want %s", got.APIKeyID, err, key)
			}
			unbound, err := st.Listeners.CreateListener(ctx, store.NewListener{MerchantID: m, Events: []string{"*"},
				ExpiresAt: clock.Now().Add(time.Hour)}, []byte("sealed"))
			if err != nil {
				t.Fatal(err)
			}
			tc.apply(t, st, clock, m, key)
			live, err := st.Listeners.ListenerLive(ctx, l.ID)
			if err != nil || live != tc.works {
				t.Errorf("ListenerLive = %v, %v; want %v", live, err, tc.works)
			}
			err = st.Listeners.ExtendListener(ctx, l.ID, clock.Now().Add(2*time.Hour))
			if tc.works && err != nil || !tc.works && !errors.Is(err, store.ErrNotFound) {
				t.Errorf("ExtendListener = %v, want ErrNotFound only once the key stopped working", err)
			}
			if live, err := st.Listeners.ListenerLive(ctx, unbound.ID); err != nil || !live {
				t.Errorf("an unbound listener: live %v, %v", live, err)
			}
		})
	}
	if live, err := st.Listeners.ListenerLive(ctx, uuid.New()); err != nil || live {
		t.Errorf("no listener at all: live %v, %v", live, err)
	}
}

// TestBindListener ties a listener to a key that works; a key that does
// not (or another merchant's) is refused, and the listener ended at once.
func TestBindListener(t *testing.T) {
	t.Parallel()
	clock := newTestClock(time.Now().UTC().Truncate(time.Millisecond))
	st := storetest.NewStore(t, store.WithClock(clock.Now))
	ctx := context.Background()
	strangerKey := newKey(t, st, "m_stranger")
	for i, tc := range append(keyStates, keyState{name: "another merchant's key", works: false}) {
		t.Run(tc.name, func(t *testing.T) {
			m := fmt.Sprintf("m_bind%d", i)
			key := newKey(t, st, m)
			if tc.apply != nil {
				tc.apply(t, st, clock, m, key)
			} else {
				key = strangerKey
			}
			l, err := st.Listeners.CreateListener(ctx, store.NewListener{MerchantID: m, Events: []string{"*"},
				ExpiresAt: clock.Now().Add(time.Hour)}, []byte("sealed"))
			if err != nil {
				t.Fatal(err)
			}
			err = st.Listeners.BindListener(ctx, m, l.ID, key)
			_, ended, expErr := st.Listeners.ListenerExpiry(ctx, l.ID)
			if expErr != nil {
				t.Fatal(expErr)
			}
			switch {
			case tc.works && (err != nil || ended):
				t.Errorf("BindListener = %v, ended %v; want bound and live", err, ended)
			case !tc.works && (!errors.Is(err, store.ErrNotFound) || !ended):
				t.Errorf("BindListener = %v, ended %v; want ErrNotFound and the listener ended", err, ended)
			}
		})
	}
	m := "m_bind_gone"
	key := newKey(t, st, m)
	if err := st.Listeners.BindListener(ctx, m, uuid.New(), key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("binding no listener = %v, want ErrNotFound", err)
	}
}

// TestEndAPIKeyGrants ends the sessions and listeners of a key that no
// longer works, failing the listeners' pending deliveries with the reason
// given, and nothing of a key that works, of another key or of another
// merchant. A second call ends nothing more.
func TestEndAPIKeyGrants(t *testing.T) {
	t.Parallel()
	clock := newTestClock(time.Now().UTC().Truncate(time.Millisecond))
	st := storetest.NewStore(t, store.WithClock(clock.Now))
	ctx := context.Background()
	for i, tc := range keyStates {
		t.Run(tc.name, func(t *testing.T) {
			m := fmt.Sprintf("m_end%d", i)
			key, sibling := newKey(t, st, m), newKey(t, st, m)
			newKeyedSession(t, st, m, "whps_a_"+m, key)
			newKeyedSession(t, st, m, "whps_b_"+m, key)
			newKeyedSession(t, st, m, "whps_sibling_"+m, sibling)
			l := newBoundListener(t, st, clock, m, key)
			other := newBoundListener(t, st, clock, m, sibling)
			ev := store.Event{ID: uuid.New(), MerchantID: m, Type: "payout.paid", APIVersion: "2026-05-01", Body: []byte(`{}`), CreatedAt: clock.Now()}
			_, ds, _, err := st.Events.CreateEvent(ctx, ev, store.Audience{})
			if err != nil || len(ds) != 2 {
				t.Fatalf("CreateEvent = %d deliveries, %v; want one per listener", len(ds), err)
			}
			tc.apply(t, st, clock, m, key)

			ended, err := st.APIKeys.EndAPIKeyGrants(ctx, m, key, clock.Now(), "listener_closed")
			if err != nil {
				t.Fatal(err)
			}
			wantSessions, wantListeners := int64(0), 0
			if !tc.works {
				wantSessions, wantListeners = 2, 1
			}
			if ended.Sessions != wantSessions || len(ended.Listeners) != wantListeners ||
				wantListeners == 1 && ended.Listeners[0] != l.ID {
				t.Fatalf("ended %+v, want %d sessions and listener %s ×%d", ended, wantSessions, l.ID, wantListeners)
			}
			again, err := st.APIKeys.EndAPIKeyGrants(ctx, m, key, clock.Now(), "listener_closed")
			if err != nil || again.Sessions != 0 || len(again.Listeners) != 0 {
				t.Errorf("a second call ended %+v, %v; want nothing", again, err)
			}
			if _, ended, err := st.Listeners.ListenerExpiry(ctx, l.ID); err != nil || ended == tc.works {
				t.Errorf("the key's listener ended = %v, %v; want %v", ended, err, !tc.works)
			}
			if _, ended, err := st.Listeners.ListenerExpiry(ctx, other.ID); err != nil || ended {
				t.Errorf("the sibling key's listener ended = %v, %v", ended, err)
			}
			if !sessionLive(t, st, "whps_sibling_"+m, clock.Now()) {
				t.Error("the sibling key's session ended")
			}
			for _, d := range ds {
				got, err := st.Views.GetDelivery(ctx, m, d.ID)
				if err != nil {
					t.Fatal(err)
				}
				stopped := got.Status == store.DeliveryFailed && len(got.Attempts) == 1 &&
					got.Attempts[0].Error != nil && *got.Attempts[0].Error == "listener_closed"
				if want := d.SubscriptionID == l.ID && !tc.works; stopped != want ||
					!stopped && got.Status != store.DeliveryPending {
					t.Errorf("delivery to %s: %s with %d attempts; want stopped %v", d.SubscriptionID, got.Status, len(got.Attempts), want)
				}
			}
		})
	}
	// A key webhookd never issued, or another merchant's, ends nothing.
	key := newKey(t, st, "m_end_owner")
	newKeyedSession(t, st, "m_end_owner", "whps_owner", key)
	if _, err := st.APIKeys.RevokeAPIKey(ctx, "m_end_owner", key); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"m_end_stranger", "m_end_owner"} {
		id := key
		if m == "m_end_owner" {
			id = uuid.New()
		}
		if ended, err := st.APIKeys.EndAPIKeyGrants(ctx, m, id, clock.Now(), "listener_closed"); err != nil || ended.Sessions != 0 {
			t.Errorf("EndAPIKeyGrants(%s, %s) = %+v, %v; want nothing ended", m, id, ended, err)
		}
	}
}
