package admin_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/webhookd/webhookd/admin"
)

// A session never exceeds the key that minted it (issue 38, rule 6): its
// capabilities are at most what the key's scopes grant, at minting and on
// every request; the sessions of one key spend that key's request budget;
// and a key mints only so many sessions a minute.

// mintWith sends POST /v1/portal_sessions with key and body (nil: an empty
// object).
func (h *harness) mintWith(key string, body map[string]any) response {
	h.t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	return h.do(request{Method: http.MethodPost, Path: "/v1/portal_sessions", Key: key, Body: body})
}

// TestPortalSessionWithinItsKey: what a key may mint, by its scopes and the
// capabilities asked for. The default is cut to what the key grants (a
// write-only key's session cannot read), and a capability beyond the key is
// 403 insufficient_scope naming capabilities and the scope it needs, as the
// key itself is refused a route its scopes do not cover.
func TestPortalSessionWithinItsKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	writeOnly, both := h.merchant("m_within", admin.ScopeWrite), h.merchant("m_within")
	keys := map[string]string{"write": writeOnly, "read+write": both}
	for _, tc := range []struct {
		name, key    string
		capabilities []string // nil: the body names none
		want         []string // the minted session's; nil when refused
		needs        string   // the scope the refusal names
	}{
		{"write key, defaults", "write", nil, []string{"manage_endpoints", "view_secret", "resend"}, ""},
		{"write key, resend", "write", []string{"resend"}, []string{"resend"}, ""},
		{"write key, view", "write", []string{"view"}, nil, admin.ScopeRead},
		{"write key, view and manage_endpoints", "write", []string{"manage_endpoints", "view"}, nil, admin.ScopeRead},
		{"read+write key, defaults", "read+write", nil, []string{"view", "manage_endpoints", "view_secret", "resend"}, ""},
		{"read+write key, resend", "read+write", []string{"resend"}, []string{"view", "resend"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := map[string]any{}
			if tc.capabilities != nil {
				body["capabilities"] = tc.capabilities
			}
			r := h.with(t).mintWith(keys[tc.key], body)
			if tc.want == nil {
				m := expectError(t, r, http.StatusForbidden, "insufficient_scope")
				if scopes, _ := m["required_scopes"].([]any); m["param"] != "capabilities" || len(scopes) != 1 || scopes[0] != tc.needs {
					t.Errorf("param %v, required_scopes %v; want capabilities and [%s]", m["param"], m["required_scopes"], tc.needs)
				}
				return
			}
			if r.Status != http.StatusCreated {
				t.Fatalf("mint: %d %s", r.Status, r.Body)
			}
			if got := decode[mintedSession](t, r).Capabilities; !slices.Equal(got, tc.want) {
				t.Errorf("minted capabilities %v, want %v", got, tc.want)
			}
		})
	}

	// The write-only key's session reads no more events than the key does.
	session := decode[mintedSession](t, h.mintWith(writeOnly, nil))
	for name, credential := range map[string]string{"the write-only key": writeOnly, "its session": session.Token} {
		r := h.do(request{Method: http.MethodGet, Path: "/v1/events", Key: credential})
		if r.Status != http.StatusForbidden {
			t.Errorf("GET /v1/events with %s: %d %s, want 403", name, r.Status, truncate(r.Body, 200))
		}
	}
	// What the key may do, its session may do.
	if r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: session.Token,
		Body: map[string]any{"url": "https://example.com/hook", "events": []string{"*"}}}); r.Status != http.StatusCreated {
		t.Errorf("create with the write-only key's session: %d %s", r.Status, r.Body)
	}
}

// TestPortalSessionFollowsItsKeysScopes: a key's scopes narrowed after it
// minted a session narrow the session on its next request: each request
// is checked against the session's capabilities and the key's scopes now.
func TestPortalSessionFollowsItsKeysScopes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	create := request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions",
		Body: map[string]any{"url": "https://example.com/hook", "events": []string{"*"}}}
	read := request{Method: http.MethodGet, Path: "/v1/events"}
	for _, tc := range []struct {
		name    string
		scopes  []string
		allowed request // still passes
		refused request // now 403
		lacks   string  // the capability the refusal names
	}{
		{"to write", []string{admin.ScopeWrite}, create, read, "view"},
		{"to read", []string{admin.ScopeRead}, read, create, "manage_endpoints"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := h.with(t).issuedKey("m_narrowed")
			session := decode[mintedSession](t, h.with(t).mintWith(key.Key, nil))
			if _, err := h.store.Pool().Exec(t.Context(), `UPDATE api_keys SET scopes = $2 WHERE id = $1`, key.ID, tc.scopes); err != nil {
				t.Fatal(err)
			}
			allowed, refused := tc.allowed, tc.refused
			allowed.Key, refused.Key = session.Token, session.Token
			if r := h.with(t).do(allowed); r.Status/100 != 2 {
				t.Errorf("%s %s within the narrowed key: %d %s", allowed.Method, allowed.Path, r.Status, r.Body)
			}
			m := expectError(t, h.with(t).do(refused), http.StatusForbidden, "insufficient_scope")
			if scopes, _ := m["required_scopes"].([]any); len(scopes) != 1 || scopes[0] != tc.lacks {
				t.Errorf("required_scopes %v, want [%s]", m["required_scopes"], tc.lacks)
			}
		})
	}
}

// TestPortalSessionMintingIsLimitedPerKey: a key mints at most
// PortalSessionRate sessions; past it the mint is 429 rate_limit_exceeded
// with Retry-After, and stores nothing. Only a request that would mint
// spends the budget: one refused for its body does not. The budget is the
// key's: another key of the merchant, and the core API, still mint.
// Unset, the rate is 10 a minute.
func TestPortalSessionMintingIsLimitedPerKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		rate  redis_rate.Limit
		mints int
	}{
		{"configured", redis_rate.PerMinute(2), 2},
		{"default", redis_rate.Limit{}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(c *admin.Config) { c.PortalSessionRate = tc.rate })
			key, sibling := h.merchant("m_mints"), h.merchant("m_mints")
			// A refused request mints nothing, and spends none of the budget.
			for range tc.mints + 1 {
				expectError(t, h.mintWith(key, map[string]any{"ttl_seconds": 0}), http.StatusBadRequest, "parameter_invalid")
			}
			for i := range tc.mints {
				if r := h.mintWith(key, nil); r.Status != http.StatusCreated {
					t.Fatalf("mint %d of %d: %d %s", i+1, tc.mints, r.Status, r.Body)
				}
			}
			r := h.mintWith(key, nil)
			if m := expectError(t, r, http.StatusTooManyRequests, "rate_limit_exceeded"); m["category"] != "rate_limit_error" {
				t.Errorf("category %v", m["category"])
			}
			expectRetryAfter(t, r, 60)
			if policy := strings.Join(r.Header.Values("RateLimit-Policy"), ", "); !strings.Contains(policy, `"portal_session";q=`) {
				t.Errorf("RateLimit-Policy %q names no portal_session budget", policy)
			}
			var n int
			if err := h.store.Pool().QueryRow(t.Context(), `SELECT count(*) FROM portal_sessions WHERE merchant_id = 'm_mints'`).Scan(&n); err != nil || n != tc.mints {
				t.Errorf("%d sessions stored (%v), want the %d minted", n, err, tc.mints)
			}
			if r := h.mintWith(sibling, nil); r.Status != http.StatusCreated {
				t.Errorf("another key of the merchant: %d %s", r.Status, r.Body)
			}
			h.session("m_mints", nil)
		})
	}
}

// TestPortalSessionsShareTheirKeysBudget: the sessions a key mints spend
// the key's request budget, so that minting more never multiplies the
// key's rate: a burst through two sessions is limited as one through the
// key would be. (A session the core API mints has a budget of its own:
// TestPortalSessionsHaveTheirOwnBudget.)
func TestPortalSessionsShareTheirKeysBudget(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *admin.Config) { c.APIRate = redis_rate.Limit{Rate: 4, Burst: 4, Period: time.Minute} })
	key := h.merchant("m_shared")
	// The two mints spend two of the key's four requests.
	first, second := decode[mintedSession](t, h.mintWith(key, nil)), decode[mintedSession](t, h.mintWith(key, nil))
	list := func(credential string) response {
		return h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions", Key: credential})
	}
	for _, s := range []mintedSession{first, second} {
		if r := list(s.Token); r.Status != http.StatusOK {
			t.Fatalf("within the key's budget: %d %s", r.Status, r.Body)
		}
	}
	for name, credential := range map[string]string{"the first session": first.Token, "the second session": second.Token, "the key": key} {
		r := list(credential)
		if r.Status != http.StatusTooManyRequests {
			t.Fatalf("%s past the key's budget: %d %s, want 429", name, r.Status, r.Body)
		}
		expectError(t, r, http.StatusTooManyRequests, "rate_limit_exceeded")
		expectRetryAfter(t, r, 60)
	}
}
