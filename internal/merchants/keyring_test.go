package merchants_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/merchants"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// settableClock is a clock a test moves by hand.
type settableClock struct{ ns atomic.Int64 }

func newSettableClock() *settableClock {
	c := &settableClock{}
	c.ns.Store(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *settableClock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *settableClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

func TestKeyUsable(t *testing.T) {
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	past, future := now.Add(-time.Second), now.Add(time.Second)
	for _, tc := range []struct {
		name   string
		key    store.APIKey
		want   bool
		status string
	}{
		{"in use", store.APIKey{}, true, merchants.KeyActive},
		{"rolled, within its overlap", store.APIKey{ExpiresAt: &future}, true, merchants.KeyExpiring},
		{"rolled, at its expiry", store.APIKey{ExpiresAt: &now}, false, merchants.KeyExpired},
		{"rolled, past its expiry", store.APIKey{ExpiresAt: &past}, false, merchants.KeyExpired},
		{"revoked", store.APIKey{RevokedAt: &past}, false, merchants.KeyRevoked},
		{"revoked during its overlap", store.APIKey{ExpiresAt: &future, RevokedAt: &past}, false, merchants.KeyRevoked},
	} {
		if got := merchants.KeyUsable(tc.key, now); got != tc.want {
			t.Errorf("%s: KeyUsable = %t, want %t", tc.name, got, tc.want)
		}
		if got := merchants.KeyStatus(tc.key, now); got != tc.status {
			t.Errorf("%s: KeyStatus = %s, want %s", tc.name, got, tc.status)
		}
	}
}

// TestKeyRing rolls and revokes keys on a real database, by the rules.
func TestKeyRing(t *testing.T) {
	t.Parallel()
	clock := newSettableClock()
	st := storetest.NewStore(t, store.WithClock(clock.Now))
	ctx := context.Background()
	issuer := merchants.NewKeyIssuer(st.APIKeys, "production", "2026-05-01")
	ring := merchants.NewKeyRing(st.APIKeys)
	issued, err := issuer.Create(ctx, "m1", []string{merchants.ScopeRead})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(issued.Key, issued.Prefix) || len(issued.Prefix) != len("prod.")+6 {
		t.Errorf("key %q, prefix %q", issued.Key, issued.Prefix)
	}

	// Bad input names its field.
	minute, negative, tooLong, huge := int64(60), int64(-1), int64(merchants.MaxRollOverlap/time.Second)+1, int64(1<<62)
	for _, tc := range []struct {
		name, merchant, key string
		overlap             *int64
		param, rule         string
	}{
		{"a key id not a UUID", "m1", "k_1", nil, "key_id", merchants.RuleKeyIDMalformed},
		{"a key id in braces", "m1", "{" + issued.ID.String() + "}", nil, "key_id", merchants.RuleKeyIDMalformed},
		{"no merchant", "", issued.ID.String(), nil, "merchant_id", invalid.RuleMissing},
		{"a negative overlap", "m1", issued.ID.String(), &negative, "overlap_seconds", merchants.RuleOverlapRange},
		{"an overlap over the maximum", "m1", issued.ID.String(), &tooLong, "overlap_seconds", merchants.RuleOverlapRange},
		{"an overlap past a Duration", "m1", issued.ID.String(), &huge, "overlap_seconds", merchants.RuleOverlapRange},
	} {
		_, err := ring.Roll(ctx, tc.merchant, tc.key, tc.overlap)
		if bad := invalid.As(err); bad == nil || bad.Param != tc.param || bad.Rule != tc.rule {
			t.Errorf("Roll with %s: %v, want %s %s", tc.name, err, tc.param, tc.rule)
		}
	}
	if _, err := ring.Revoke(ctx, "m1", "nope"); invalid.As(err) == nil {
		t.Errorf("Revoke of a malformed id: %v", err)
	}
	if _, err := ring.Roll(ctx, "m2", issued.ID.String(), nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Roll of another merchant's key: %v, want not found", err)
	}
	if _, err := ring.Revoke(ctx, "m1", uuid.NewString()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Revoke of no key: %v, want not found", err)
	}

	// A roll keeps the environment and scopes, and the overlap.
	successor, err := ring.Roll(ctx, "m1", issued.ID.String(), &minute)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(successor.Key, "prod.") || successor.Scopes[0] != merchants.ScopeRead || successor.ID == issued.ID {
		t.Errorf("successor %+v", successor)
	}
	old, err := st.APIKeys.GetAPIKey(ctx, "m1", issued.ID)
	if err != nil || old.ExpiresAt == nil || !old.ExpiresAt.Equal(clock.Now().Add(time.Minute)) {
		t.Fatalf("the rolled key: %+v, %v", old, err)
	}
	if !merchants.KeyUsable(old, clock.Now()) {
		t.Error("the rolled key stopped working before its overlap ended")
	}
	clock.Advance(time.Minute)
	if merchants.KeyUsable(old, clock.Now()) {
		t.Error("the rolled key still works after its overlap")
	}
	if _, err := ring.Roll(ctx, "m1", issued.ID.String(), nil); !errors.Is(err, store.ErrAPIKeyInactive) {
		t.Errorf("rolling a rolled key again: %v", err)
	}

	// Zero overlap ends the old key now; the default is a day.
	zero := int64(0)
	third, err := ring.Roll(ctx, "m1", successor.ID.String(), &zero)
	if err != nil {
		t.Fatal(err)
	}
	if k, _ := st.APIKeys.GetAPIKey(ctx, "m1", successor.ID); merchants.KeyUsable(k, clock.Now()) {
		t.Error("a roll with no overlap left the old key working")
	}
	if _, err := ring.Roll(ctx, "m1", third.ID.String(), nil); err != nil {
		t.Fatal(err)
	}
	if k, _ := st.APIKeys.GetAPIKey(ctx, "m1", third.ID); k.ExpiresAt == nil || !k.ExpiresAt.Equal(clock.Now().Add(merchants.DefaultRollOverlap)) {
		t.Errorf("default overlap: expires at %v", k.ExpiresAt)
	}

	revoked, err := ring.Revoke(ctx, "m1", third.ID.String())
	if err != nil || revoked.RevokedAt == nil || merchants.KeyUsable(revoked, clock.Now()) {
		t.Fatalf("revoke: %+v, %v", revoked, err)
	}
	keys, err := ring.List(ctx, "m1", store.Page{Limit: 100})
	if err != nil || len(keys) != 4 {
		t.Fatalf("list: %d keys, %v; want 4 (revoked and expired included)", len(keys), err)
	}
	if _, err := ring.List(ctx, "m\x00", store.Page{Limit: 100}); invalid.As(err) == nil {
		t.Errorf("List of a malformed merchant id: %v", err)
	}
}
