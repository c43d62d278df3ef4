package admin_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/internal/merchants"
	"github.com/webhookd/webhookd/internal/store"
)

// issuedKey issues a key of the merchant with both scopes and returns it
// with its stored form (id, prefix…).
func (h *harness) issuedKey(merchant string) merchants.IssuedKey {
	h.t.Helper()
	issued, err := merchants.NewKeyIssuer(h.cfg.Store.APIKeys, "sandbox", admin.DefaultVersion).
		Create(context.Background(), merchant, []string{admin.ScopeRead, admin.ScopeWrite})
	if err != nil {
		h.t.Fatal(err)
	}
	return issued
}

// keyClock is a clock the key tests move by hand.
type keyClock struct{ ns atomic.Int64 }

func (c *keyClock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *keyClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// withKeyClock gives the harness a store on clock, which decides when
// rolled keys expire.
func withKeyClock(t *testing.T, clock *keyClock) func(*admin.Config) {
	clock.ns.Store(time.Now().UnixNano())
	return func(c *admin.Config) { c.Store = databases.newStore(t, store.WithClock(clock.Now)) }
}

// listKeys answers the internal list of the merchant's keys.
func (h *harness) listKeys(merchant string) []map[string]any {
	h.t.Helper()
	r := h.doInternal(request{Method: http.MethodGet, Path: "/internal/v1/merchants/" + merchant + "/api_keys"})
	if r.Status != http.StatusOK {
		h.t.Fatalf("list keys of %s: %d %s", merchant, r.Status, r.Body)
	}
	var out []map[string]any
	for _, k := range r.JSON(h.t)["data"].([]any) {
		out = append(out, k.(map[string]any))
	}
	return out
}

// works tells whether key authenticates a public request.
func (h *harness) works(key string) bool {
	h.t.Helper()
	r := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions", Key: key})
	switch r.Status {
	case http.StatusOK:
		return true
	case http.StatusUnauthorized:
		return false
	}
	h.t.Fatalf("GET /v1/webhook_subscriptions: %d %s", r.Status, r.Body)
	return false
}

// TestAPIKeyLifecycle issues, lists, revokes and rolls keys through the
// internal API, and checks what the public API makes of each.
func TestAPIKeyLifecycle(t *testing.T) {
	t.Parallel()
	clock := &keyClock{}
	h := newHarness(t, withKeyClock(t, clock))

	created := h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/merchants/m_keys/api_keys",
		Body: map[string]any{"scopes": []string{admin.ScopeRead}}})
	if created.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.Status, created.Body)
	}
	first := created.JSON(t)
	key, _ := first["key"].(string)
	prefix, _ := first["prefix"].(string)
	if first["id"] == nil || !strings.HasPrefix(key, prefix) || prefix != key[:len("sandbox.")+6] || first["status"] != "active" {
		t.Fatalf("create answer %s", created.Body)
	}
	if !h.works(key) {
		t.Fatal("a new key is refused")
	}

	// The list shows what webhookd keeps, never the key.
	listed := h.listKeys("m_keys")
	if len(listed) != 1 || listed[0]["id"] != first["id"] || listed[0]["prefix"] != prefix || listed[0]["expires_at"] != nil ||
		listed[0]["revoked_at"] != nil || listed[0]["last_used_at"] != nil {
		t.Fatalf("list %v", listed)
	}
	if _, ok := listed[0]["key"]; ok {
		t.Error("the list shows the key")
	}
	if len(h.listKeys("m_unknown")) != 0 {
		t.Error("a merchant webhookd does not know has keys")
	}

	// Roll with a minute of overlap: both keys work for the minute, then
	// only the new one.
	rolled := h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/merchants/m_keys/api_keys/" + first["id"].(string) + "/roll",
		Body: map[string]any{"overlap_seconds": 60}})
	if rolled.Status != http.StatusCreated {
		t.Fatalf("roll: %d %s", rolled.Status, rolled.Body)
	}
	second := rolled.JSON(t)
	successor, _ := second["key"].(string)
	if successor == "" || successor == key || second["id"] == first["id"] || second["scopes"].([]any)[0] != admin.ScopeRead {
		t.Fatalf("roll answer %s", rolled.Body)
	}
	if !h.works(key) || !h.works(successor) {
		t.Fatal("during the overlap both keys must work")
	}
	listed = h.listKeys("m_keys")
	if len(listed) != 2 || listed[1]["status"] != "expiring" || listed[1]["expires_at"] == nil {
		t.Fatalf("list after the roll: %v", listed)
	}
	clock.Advance(59 * time.Second)
	if !h.works(key) {
		t.Fatal("the old key stopped before its overlap ended")
	}
	clock.Advance(time.Second)
	if h.works(key) {
		t.Fatal("the old key works after its overlap")
	}
	if !h.works(successor) {
		t.Fatal("the successor stopped with the old key")
	}
	if r := h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/merchants/m_keys/api_keys/" + first["id"].(string) + "/roll"}); r.Status != http.StatusConflict {
		t.Errorf("rolling an expired key: %d %s, want 409", r.Status, r.Body)
	}

	// Roll with no overlap: the old key ends now.
	third := h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/merchants/m_keys/api_keys/" + second["id"].(string) + "/roll",
		Body: `{"overlap_seconds":0}`})
	if third.Status != http.StatusCreated {
		t.Fatalf("roll with no overlap: %d %s", third.Status, third.Body)
	}
	if h.works(successor) {
		t.Fatal("a roll with overlap_seconds 0 left the old key working")
	}
	newest, _ := third.JSON(t)["key"].(string)
	thirdID, _ := third.JSON(t)["id"].(string)

	// Another merchant cannot reach the key, nor list it.
	h.issuedKey("m_other")
	for _, req := range []request{
		{Method: http.MethodDelete, Path: "/internal/v1/merchants/m_other/api_keys/" + thirdID},
		{Method: http.MethodPost, Path: "/internal/v1/merchants/m_other/api_keys/" + thirdID + "/roll"},
	} {
		expectError(t, h.doInternal(req), http.StatusNotFound, "resource_not_found")
	}
	if others := h.listKeys("m_other"); len(others) != 1 || others[0]["id"] == thirdID {
		t.Errorf("m_other's list: %v", others)
	}
	if !h.works(newest) {
		t.Fatal("another merchant's attempts ended the key")
	}

	// Revoke: refused at once; revoking again answers the same.
	revoked := h.doInternal(request{Method: http.MethodDelete, Path: "/internal/v1/merchants/m_keys/api_keys/" + thirdID})
	if revoked.Status != http.StatusOK || revoked.JSON(t)["status"] != "revoked" || revoked.JSON(t)["revoked_at"] == nil {
		t.Fatalf("revoke: %d %s", revoked.Status, revoked.Body)
	}
	if h.works(newest) {
		t.Fatal("a revoked key works")
	}
	again := h.doInternal(request{Method: http.MethodDelete, Path: "/internal/v1/merchants/m_keys/api_keys/" + thirdID})
	if again.Status != http.StatusOK || again.JSON(t)["revoked_at"] != revoked.JSON(t)["revoked_at"] {
		t.Errorf("revoking again: %d %s, want the first revocation", again.Status, again.Body)
	}
	statuses := map[string]int{}
	for _, k := range h.listKeys("m_keys") {
		statuses[k["status"].(string)]++
	}
	if statuses["revoked"] != 1 || statuses["expired"] != 2 {
		t.Errorf("statuses after the revocation: %v, want 1 revoked and 2 expired", statuses)
	}
}

// TestAPIKeyLastUsed: authenticated requests write no last use; a flush
// writes each key's latest, once, however many requests there were.
func TestAPIKeyLastUsed(t *testing.T) {
	t.Parallel()
	clock := &keyClock{}
	var usage *merchants.KeyUsage
	h := newHarness(t, withKeyClock(t, clock), func(c *admin.Config) {
		usage = merchants.NewKeyUsage(c.Store.APIKeys, c.Store.Now, nil)
		c.KeyUsage = usage
	})
	issued := h.issuedKey("m_used")
	idle := h.issuedKey("m_used")
	for range 20 {
		if !h.works(issued.Key) {
			t.Fatal("the key is refused")
		}
		clock.Advance(time.Second)
	}
	lastUse := clock.Now().Add(-time.Second)
	for _, k := range h.listKeys("m_used") {
		if k["last_used_at"] != nil {
			t.Fatalf("last_used_at written before a flush: %v", k)
		}
	}
	if err := usage.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, k := range h.listKeys("m_used") {
		switch k["id"] {
		case issued.ID.String():
			got, err := time.Parse(time.RFC3339Nano, k["last_used_at"].(string))
			if err != nil || !got.Equal(lastUse.Truncate(time.Microsecond)) {
				t.Errorf("last_used_at %v, want %v", k["last_used_at"], lastUse)
			}
		case idle.ID.String():
			if k["last_used_at"] != nil {
				t.Errorf("an unused key has last_used_at %v", k["last_used_at"])
			}
		}
	}
	// A refused key is not counted as used.
	if _, err := h.cfg.Store.APIKeys.RevokeAPIKey(context.Background(), "m_used", idle.ID); err != nil {
		t.Fatal(err)
	}
	if h.works(idle.Key) {
		t.Fatal("a revoked key works")
	}
	if err := usage.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if k, _ := h.cfg.Store.APIKeys.GetAPIKey(context.Background(), "m_used", idle.ID); k.LastUsedAt != nil {
		t.Errorf("a refused request set last_used_at %v", k.LastUsedAt)
	}
}
