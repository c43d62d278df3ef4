package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/merchants"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

func TestAPIKeyPrefix(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]string{
		"sandbox.Jq0bXyZ123456789": "sandbox.Jq0bXy",
		"prod.abcdefghij":          "prod.abcdef",
		"prod.abc":                 "prod.abc",
		"nodot":                    "nodot",
		"":                         "",
	} {
		if got := store.APIKeyPrefix(key); got != want {
			t.Errorf("APIKeyPrefix(%q) = %q, want %q", key, got, want)
		}
	}
}

// storeWithKey is a store on a test clock holding one key of merchant m1,
// "sandbox.AAAAAAfirst", with the read scope.
func storeWithKey(t *testing.T) (*store.Store, *testClock, store.APIKey) {
	t.Helper()
	clock := newTestClock(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	st := storetest.NewStore(t, store.WithClock(clock.Now))
	k, err := st.APIKeys.CreateAPIKey(context.Background(), "m1", "2026-05-01", "sandbox", "sandbox.AAAAAAfirst", []string{"webhooks:read"})
	if err != nil {
		t.Fatal(err)
	}
	return st, clock, k
}

// TestAPIKeyLifecycle creates, lists, rolls and revokes keys, and checks
// that one merchant never reaches another's key.
func TestAPIKeyLifecycle(t *testing.T) {
	t.Parallel()
	st, clock, first := storeWithKey(t)
	ctx := context.Background()
	if first.Prefix != "sandbox.AAAAAA" {
		t.Errorf("prefix %q", first.Prefix)
	}
	clock.Advance(time.Second)
	if _, err := st.APIKeys.CreateAPIKey(ctx, "m2", "2026-05-01", "sandbox", "sandbox.BBBBBBother", []string{"webhooks:read"}); err != nil {
		t.Fatal(err)
	}

	// Another merchant's key is not found, whatever is asked of it.
	if _, err := st.APIKeys.GetAPIKey(ctx, "m2", first.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetAPIKey of another merchant's key: %v", err)
	}
	if _, err := st.APIKeys.RevokeAPIKey(ctx, "m2", first.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RevokeAPIKey of another merchant's key: %v", err)
	}
	if _, err := st.APIKeys.RollAPIKey(ctx, "m2", first.ID, "sandbox.CCCCCC", clock.Now(), merchants.MayRoll); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RollAPIKey of another merchant's key: %v", err)
	}

	expires := clock.Now().Add(time.Hour)
	successor, err := st.APIKeys.RollAPIKey(ctx, "m1", first.ID, "sandbox.DDDDDDsuccessor", expires, merchants.MayRoll)
	if err != nil {
		t.Fatal(err)
	}
	if successor.Prefix != "sandbox.DDDDDD" || successor.Environment != "sandbox" || len(successor.Scopes) != 1 || successor.Scopes[0] != "webhooks:read" {
		t.Errorf("successor %+v", successor)
	}
	if _, err := st.APIKeys.RollAPIKey(ctx, "m1", first.ID, "sandbox.EEEEEE", expires, merchants.MayRoll); !errors.Is(err, store.ErrAPIKeyInactive) {
		t.Errorf("rolling a rolled key: %v, want ErrAPIKeyInactive", err)
	}
	k, _, err := st.APIKeys.APIKeyByHash(ctx, store.HashAPIKey("sandbox.AAAAAAfirst"))
	if err != nil || k.ExpiresAt == nil || !k.ExpiresAt.Equal(expires) {
		t.Fatalf("the rolled key by hash: %+v, %v; want expiring at %v", k, err, expires)
	}

	clock.Advance(time.Second)
	revoked, err := st.APIKeys.RevokeAPIKey(ctx, "m1", successor.ID)
	if err != nil || revoked.RevokedAt == nil || !revoked.RevokedAt.Equal(clock.Now().Truncate(time.Microsecond)) {
		t.Fatalf("revoke: %+v, %v", revoked, err)
	}
	clock.Advance(time.Second)
	again, err := st.APIKeys.RevokeAPIKey(ctx, "m1", successor.ID)
	if err != nil || !again.RevokedAt.Equal(*revoked.RevokedAt) {
		t.Errorf("revoking again moved revoked_at: %+v, %v", again, err)
	}
	if _, err := st.APIKeys.RollAPIKey(ctx, "m1", successor.ID, "sandbox.FFFFFF", expires, merchants.MayRoll); !errors.Is(err, store.ErrAPIKeyInactive) {
		t.Errorf("rolling a revoked key: %v, want ErrAPIKeyInactive", err)
	}

	keys, err := st.APIKeys.ListAPIKeysPage(ctx, "m1", everyKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0].ID != successor.ID || keys[1].ID != first.ID {
		t.Fatalf("list: %+v, want the successor then the first key", keys)
	}
	if keys, err := st.APIKeys.ListAPIKeysPage(ctx, "m_unknown", everyKey); err != nil || len(keys) != 0 {
		t.Errorf("list of an unknown merchant: %v, %v", keys, err)
	}
}

// TestRollAPIKeyAsksTheRuleUnderTheLock: the rule sees the key as the lock
// found it, at the store's clock; its refusal writes nothing; and of two
// concurrent rolls of one key, the second sees the first's.
func TestRollAPIKeyAsksTheRuleUnderTheLock(t *testing.T) {
	t.Parallel()
	st, clock, k := storeWithKey(t)
	ctx := context.Background()

	refused := errors.New("refused")
	var seen store.APIKey
	var seenAt time.Time
	_, err := st.APIKeys.RollAPIKey(ctx, "m1", k.ID, "sandbox.BBBBBB", clock.Now(), func(key store.APIKey, now time.Time) error {
		seen, seenAt = key, now
		return refused
	})
	if !errors.Is(err, refused) {
		t.Errorf("a refused roll: %v, want the rule's error", err)
	}
	if seen.ID != k.ID || !seenAt.Equal(st.Now()) {
		t.Errorf("the rule saw %s at %v, want %s at %v", seen.ID, seenAt, k.ID, st.Now())
	}
	if keys, err := st.APIKeys.ListAPIKeysPage(ctx, "m1", everyKey); err != nil || len(keys) != 1 || keys[0].ExpiresAt != nil {
		t.Errorf("after a refused roll: %+v, %v; want the one key, unexpired", keys, err)
	}

	errs := make(chan error, 2)
	for _, newKey := range []string{"sandbox.CCCCCC", "sandbox.DDDDDD"} {
		go func() {
			_, err := st.APIKeys.RollAPIKey(ctx, "m1", k.ID, newKey, clock.Now().Add(time.Hour), merchants.MayRoll)
			errs <- err
		}()
	}
	var rolled, inactive int
	for range 2 {
		switch err := <-errs; {
		case err == nil:
			rolled++
		case errors.Is(err, store.ErrAPIKeyInactive):
			inactive++
		default:
			t.Errorf("concurrent roll: %v", err)
		}
	}
	if rolled != 1 || inactive != 1 {
		t.Errorf("two concurrent rolls: %d rolled, %d inactive; want one of each", rolled, inactive)
	}
}

// TestRecordAPIKeyUsage writes many keys' last use in one call and never
// moves a last use back.
func TestRecordAPIKeyUsage(t *testing.T) {
	t.Parallel()
	st := storetest.NewStore(t)
	ctx := context.Background()
	a, err := st.APIKeys.CreateAPIKey(ctx, "m1", "2026-05-01", "sandbox", "sandbox.a", []string{"webhooks:read"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.APIKeys.CreateAPIKey(ctx, "m1", "2026-05-01", "sandbox", "sandbox.b", []string{"webhooks:read"})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	if err := st.APIKeys.RecordAPIKeyUsage(ctx, map[uuid.UUID]time.Time{a.ID: at, b.ID: at.Add(time.Minute), uuid.New(): at}); err != nil {
		t.Fatal(err)
	}
	if err := st.APIKeys.RecordAPIKeyUsage(ctx, map[uuid.UUID]time.Time{a.ID: at.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[uuid.UUID]time.Time{a.ID: at, b.ID: at.Add(time.Minute)} {
		k, err := st.APIKeys.GetAPIKey(ctx, "m1", id)
		if err != nil || k.LastUsedAt == nil || !k.LastUsedAt.Equal(want) {
			t.Errorf("key %s: last used %v (%v), want %v", id, k.LastUsedAt, err, want)
		}
	}
	if err := st.APIKeys.RecordAPIKeyUsage(ctx, nil); err != nil {
		t.Errorf("nothing to record: %v", err)
	}
}
