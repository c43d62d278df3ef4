package admin_test

import (
	"bytes"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/webhookd/webhookd/admin"
)

// The portal's API: sessions minted on both listeners, used as Bearer
// tokens on /v1 within their merchant and capabilities, ended by expiry
// and by revocation.

const testPublicURL = "https://hooks.example.com"

// mintedSession is the answer of a mint.
type mintedSession struct {
	URL          string    `json:"url"`
	Token        string    `json:"token"`
	ExpiresAt    time.Time `json:"expires_at"`
	Capabilities []string  `json:"capabilities"`
}

// currentSession is GET /v1/portal_sessions/current.
type currentSession struct {
	MerchantID   string     `json:"merchant_id"`
	Capabilities []string   `json:"capabilities"`
	ExpiresAt    *time.Time `json:"expires_at"`
	Branding     struct {
		AccentColor *string `json:"accent_color"`
		LogoURL     *string `json:"logo_url"`
	} `json:"branding"`
	Environment string `json:"environment"`
}

// session mints a session for merchant on the internal listener.
func (h *harness) session(merchant string, body any) mintedSession {
	h.t.Helper()
	r := h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/merchants/" + merchant + "/portal_sessions", Body: body})
	if r.Status != http.StatusCreated {
		h.t.Fatalf("mint a session for %s: %d %s", merchant, r.Status, r.Body)
	}
	return decode[mintedSession](h.t, r)
}

// movableClock is the API's clock in these tests: real time plus an offset.
type movableClock struct{ offset atomic.Int64 }

func (c *movableClock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *movableClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

func withPublicURL(c *admin.Config) { c.PublicURL = testPublicURL }

func TestPortalSessionMintedInternally(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withPublicURL)
	h.merchant("m_portal")
	t.Run("defaults", func(t *testing.T) {
		before := time.Now()
		s := h.with(t).session("m_portal", nil)
		if !strings.HasPrefix(s.Token, "whps_") || len(s.Token) != len("whps_")+43 {
			t.Errorf("token %q, want whps_ and 32 random bytes in base64url", s.Token)
		}
		if s.URL != testPublicURL+"/portal/#token="+s.Token {
			t.Errorf("url %q", s.URL)
		}
		if !slices.Equal(s.Capabilities, []string{"view", "manage_endpoints", "view_secret", "resend"}) {
			t.Errorf("capabilities %v, want all four", s.Capabilities)
		}
		if d := s.ExpiresAt.Sub(before); d < time.Hour-time.Second || d > time.Hour+5*time.Second {
			t.Errorf("expires in %v, want an hour", d)
		}
		// Only the token's hash is stored.
		for table, rows := range databaseRows(t, h.store.Pool()) {
			for _, row := range rows {
				if strings.Contains(row, s.Token[len("whps_"):]) {
					t.Errorf("table %s holds the token in clear: %s", table, row)
				}
			}
		}
	})
	t.Run("capabilities, ttl and branding", func(t *testing.T) {
		before := time.Now()
		s := h.with(t).session("m_portal", map[string]any{"capabilities": []string{"resend", "resend"}, "ttl_seconds": 120,
			"branding": map[string]any{"accent_color": "#1A2B3C", "logo_url": "https://cdn.example.com/logo.png"}})
		if !slices.Equal(s.Capabilities, []string{"view", "resend"}) {
			t.Errorf("capabilities %v, want view added and the duplicate dropped", s.Capabilities)
		}
		if d := s.ExpiresAt.Sub(before); d < 119*time.Second || d > 125*time.Second {
			t.Errorf("expires in %v, want 120 s", d)
		}
		cur := decode[currentSession](t, h.with(t).do(request{Method: http.MethodGet, Path: "/v1/portal_sessions/current", Key: s.Token}))
		if cur.MerchantID != "m_portal" || !slices.Equal(cur.Capabilities, s.Capabilities) || cur.ExpiresAt == nil ||
			!cur.ExpiresAt.Equal(s.ExpiresAt) || cur.Environment != "sandbox" ||
			cur.Branding.AccentColor == nil || *cur.Branding.AccentColor != "#1A2B3C" ||
			cur.Branding.LogoURL == nil || *cur.Branding.LogoURL != "https://cdn.example.com/logo.png" {
			t.Errorf("current %+v", cur)
		}
	})
	t.Run("unknown merchant", func(t *testing.T) {
		r := h.with(t).doInternal(request{Method: http.MethodPost, Path: "/internal/v1/merchants/m_nobody/portal_sessions", Body: map[string]any{}})
		expectError(t, r, http.StatusNotFound, "resource_not_found")
	})
}

func TestPortalSessionMintedByAKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withPublicURL)
	full := h.merchant("m_keys")
	readOnly := h.merchant("m_keys", admin.ScopeRead)
	r := h.do(request{Method: http.MethodPost, Path: "/v1/portal_sessions", Key: full, Body: map[string]any{"capabilities": []string{"view"}}})
	if r.Status != http.StatusCreated {
		t.Fatalf("mint with a write key: %d %s", r.Status, r.Body)
	}
	s := decode[mintedSession](t, r)
	if !slices.Equal(s.Capabilities, []string{"view"}) || s.URL != testPublicURL+"/portal/#token="+s.Token {
		t.Errorf("minted %+v", s)
	}
	if cur := decode[currentSession](t, h.do(request{Method: http.MethodGet, Path: "/v1/portal_sessions/current", Key: s.Token})); cur.MerchantID != "m_keys" {
		t.Errorf("the session is of %q, want m_keys", cur.MerchantID)
	}
	for name, key := range map[string]string{"a read-only key": readOnly, "a session": s.Token,
		"a session holding every capability": h.session("m_keys", nil).Token} {
		r := h.do(request{Method: http.MethodPost, Path: "/v1/portal_sessions", Key: key, Body: map[string]any{}})
		m := expectError(t, r, http.StatusForbidden, "insufficient_scope")
		if scopes, _ := m["required_scopes"].([]any); len(scopes) != 1 || scopes[0] != admin.ScopeWrite {
			t.Errorf("%s: required_scopes %v, want [webhooks:write]", name, m["required_scopes"])
		}
	}
	// An API key describes itself too: its scopes' capabilities, no expiry,
	// the merchant's branding.
	set := h.doInternal(request{Method: http.MethodPut, Path: "/internal/v1/merchants/m_keys",
		Body: map[string]any{"portal_accent_color": "#abcdef"}})
	if set.Status != http.StatusOK || !bytes.Contains(set.Body, []byte(`"portal_accent_color":"#abcdef"`)) {
		t.Fatalf("merchant settings: %d %s", set.Status, set.Body)
	}
	for _, tc := range []struct {
		key  string
		caps []string
	}{{full, []string{"view", "manage_endpoints", "view_secret", "resend"}}, {readOnly, []string{"view"}}} {
		cur := decode[currentSession](t, h.do(request{Method: http.MethodGet, Path: "/v1/portal_sessions/current", Key: tc.key}))
		if !slices.Equal(cur.Capabilities, tc.caps) || cur.ExpiresAt != nil || cur.Branding.AccentColor == nil ||
			*cur.Branding.AccentColor != "#abcdef" || cur.Branding.LogoURL != nil {
			t.Errorf("current of a key: %+v, want %v", cur, tc.caps)
		}
	}
	// The session's own branding wins over the merchant's.
	own := h.session("m_keys", map[string]any{"branding": map[string]any{"accent_color": "#000000"}})
	if cur := decode[currentSession](t, h.do(request{Method: http.MethodGet, Path: "/v1/portal_sessions/current", Key: own.Token})); cur.Branding.AccentColor == nil || *cur.Branding.AccentColor != "#000000" {
		t.Errorf("branding %+v, want the session's colour", cur.Branding)
	}
}

func TestPortalBrandingRefusesPlainHTTPLogosInProduction(t *testing.T) {
	t.Parallel()
	h := newHarness(t, strict)
	h.merchant("m_strict")
	for _, c := range []struct {
		req   request
		param string
	}{
		{request{Method: http.MethodPost, Path: "/internal/v1/merchants/m_strict/portal_sessions",
			Body: map[string]any{"branding": map[string]any{"logo_url": "http://cdn.example.com/l.png"}}}, "branding.logo_url"},
		{request{Method: http.MethodPut, Path: "/internal/v1/merchants/m_strict",
			Body: map[string]any{"portal_logo_url": "http://cdn.example.com/l.png"}}, "portal_logo_url"},
	} {
		m := expectError(t, h.doInternal(c.req), http.StatusBadRequest, "parameter_invalid")
		if m["param"] != c.param {
			t.Errorf("param %v, want %s", m["param"], c.param)
		}
	}
}

func TestPortalSessionEnds(t *testing.T) {
	t.Parallel()
	clock := &movableClock{}
	h := newHarness(t, func(c *admin.Config) { c.Clock = clock })
	h.merchant("m_end")
	h.merchant("m_other")
	works := func(token string) bool {
		t.Helper()
		r := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions", Key: token})
		if r.Status == http.StatusOK {
			return true
		}
		expectError(t, r, http.StatusUnauthorized, "authentication_required")
		return false
	}

	short := h.session("m_end", map[string]any{"ttl_seconds": 60})
	if !works(short.Token) {
		t.Fatal("a fresh session is refused")
	}
	clock.Advance(61 * time.Second)
	if works(short.Token) {
		t.Error("an expired session is accepted")
	}

	signedOut := h.session("m_end", nil)
	if r := h.do(request{Method: http.MethodDelete, Path: "/v1/portal_sessions/current", Key: signedOut.Token}); r.Status != http.StatusNoContent {
		t.Fatalf("sign out: %d %s", r.Status, r.Body)
	}
	if works(signedOut.Token) {
		t.Error("a signed-out session is accepted")
	}

	first, second, other := h.session("m_end", nil), h.session("m_end", nil), h.session("m_other", nil)
	if r := h.doInternal(request{Method: http.MethodDelete, Path: "/internal/v1/merchants/m_end/portal_sessions"}); r.Status != http.StatusNoContent {
		t.Fatalf("end all: %d %s", r.Status, r.Body)
	}
	if works(first.Token) || works(second.Token) {
		t.Error("a session of a merchant whose sessions were all ended is accepted")
	}
	if !works(other.Token) {
		t.Error("ending m_end's sessions ended another merchant's")
	}
	// A token looking like a session but unknown, and a session on the
	// legacy surface, are refused.
	if works("whps_" + strings.Repeat("A", 43)) {
		t.Error("an unknown session token is accepted")
	}
	legacy := h.legacy("create", other.Token, "", hookBody("https://example.com/hook"))
	expectLegacyError(t, legacy, http.StatusUnauthorized, "authentication_error")
}

// pollRoute is the poll read, which no session may use.
const pollRoute = "GET /v1/webhook_subscriptions/{id}/poll"

// capabilityOf is the capability each public route requires of a session,
// or the scope for those a session can never use (minting a session,
// opening a listener).
func capabilityOf(route string) string {
	method, path, _ := strings.Cut(route, " ")
	switch {
	case route == "POST /v1/portal_sessions", route == "GET /v1/listen":
		return admin.ScopeWrite
	case route == pollRoute:
		// A read acknowledges what the one before read: a reader's key,
		// never a person's session.
		return admin.ScopeRead
	case strings.HasSuffix(path, "/secret"):
		return "view_secret"
	case method == http.MethodGet || route == "DELETE /v1/portal_sessions/current":
		return "view"
	case strings.HasSuffix(path, "/redeliver") || strings.HasSuffix(path, "/recover") || strings.HasSuffix(path, "/replay"):
		return "resend"
	default:
		return "manage_endpoints"
	}
}

// TestPortalSessionCapabilities walks every public route with sessions of
// merchant A: a read-only session is refused every route needing more
// than view (403 naming the capability) and passes the others; a session
// holding every capability passes them all on A's resources; on B's it
// finds nothing, like B's key; the legacy routes refuse sessions.
func TestPortalSessionCapabilities(t *testing.T) {
	t.Parallel()
	h, a, b := newTenants(t)
	tw := h.twin()
	tw.coversPublic()
	readOnly := h.session(a.merchant, map[string]any{"capabilities": []string{"view"}})
	resendOnly := h.session(a.merchant, map[string]any{"capabilities": []string{"resend"}})
	full := h.session(a.merchant, nil)

	before := databaseRows(t, h.store.Pool())
	tw.walkPublic(a, func(route string, rc routeCase, c call) {
		if c.legacy {
			for _, s := range []mintedSession{readOnly, full} {
				if msg := refusal(tw.do(c.as(s.Token)), true, http.StatusUnauthorized, "authentication_required"); msg != "" {
					t.Errorf("%s with a session: %s", c, msg)
				}
			}
			return
		}
		if route == "DELETE /v1/portal_sessions/current" {
			return // it would end the session: checked last
		}
		for _, s := range []mintedSession{readOnly, resendOnly} {
			need := capabilityOf(route)
			if slices.Contains(s.Capabilities, need) {
				continue
			}
			m := expectError(t, tw.do(c.as(s.Token)), http.StatusForbidden, "insufficient_scope")
			if scopes, _ := m["required_scopes"].([]any); len(scopes) != 1 || scopes[0] != need {
				t.Errorf("%s with capabilities %v: required_scopes %v, want [%s]", c, s.Capabilities, m["required_scopes"], need)
			}
		}
		if capabilityOf(route) == "view" {
			if r := tw.do(c.as(readOnly.Token)); r.Status != http.StatusOK {
				t.Errorf("%s with a read-only session: %d %s", c, r.Status, truncate(r.Body, 200))
			}
		}
	})
	if after := databaseRows(t, h.store.Pool()); !rowsEqual(t, before, after) {
		t.Error("refused calls changed the database")
	}

	// A's session on B's resources: nothing of B's is read or changed.
	tw.walkPublic(b, func(route string, rc routeCase, c call) {
		if c.legacy || rc.rule == own || rc.rule == ownElsewhere || rc.rule == created || route == pollRoute {
			return // the poll read refuses every session (403), whoever's resource
		}
		r := tw.do(c.as(full.Token))
		if leaked := slices.DeleteFunc(b.ids(), func(id string) bool { return !bytes.Contains(r.Body, []byte(id)) }); len(leaked) > 0 {
			t.Errorf("%s by A's session shows B's %v", c, leaked)
		}
		if rc.rule == refused {
			if msg := refusal(r, false, http.StatusNotFound, "resource_not_found"); msg != "" {
				t.Errorf("%s by A's session on B's resource: %s", c, msg)
			}
		}
	})

	// A's session holding every capability passes every route on A's own
	// resources (deletes last).
	var deletes []call
	tw.walkPublic(a, func(route string, rc routeCase, c call) {
		switch {
		case c.legacy, route == "POST /v1/portal_sessions", route == "DELETE /v1/portal_sessions/current", route == pollRoute,
			rc.rule == ownElsewhere: // a WebSocket, a sandbox-only route: listen_test.go, trigger_test.go
		case c.method == http.MethodDelete:
			deletes = append(deletes, c)
		default:
			tw.expectOwnerCall(c, full.Token)
		}
	})
	for _, c := range deletes {
		tw.expectOwnerCall(c, full.Token)
	}
	// Signing out needs only view.
	if r := tw.do(request{Method: http.MethodDelete, Path: "/v1/portal_sessions/current", Key: readOnly.Token}); r.Status != http.StatusNoContent {
		t.Errorf("sign out with a read-only session: %d %s", r.Status, r.Body)
	}
}

// TestPortalSessionOfTheOtherEnvironment: a sandbox engine's session is
// refused by a production engine on the same database.
func TestPortalSessionOfTheOtherEnvironment(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.merchant("m_env")
	s := h.session("m_env", nil)
	production := h.twin(func(c *admin.Config) { c.Environment = "production" })
	r := production.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions", Key: s.Token})
	expectError(t, r, http.StatusUnauthorized, "authentication_required")
	if r := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions", Key: s.Token}); r.Status != http.StatusOK {
		t.Fatalf("the session on its own engine: %d %s", r.Status, r.Body)
	}
}

// TestPortalSessionsHaveTheirOwnBudget: each session the core API mints
// spends its own API budget, not a budget shared by every session (a
// session a key mints spends the key's: TestPortalSessionsShareTheirKeysBudget).
func TestPortalSessionsHaveTheirOwnBudget(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *admin.Config) { c.APIRate = redis_rate.Limit{Rate: 2, Burst: 2, Period: time.Minute} })
	h.merchant("m_budget")
	first, second := h.session("m_budget", nil), h.session("m_budget", nil)
	list := func(s mintedSession) response {
		return h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions", Key: s.Token})
	}
	for range 2 {
		if r := list(first); r.Status != http.StatusOK {
			t.Fatalf("within the budget: %d %s", r.Status, r.Body)
		}
	}
	expectError(t, list(first), http.StatusTooManyRequests, "rate_limit_exceeded")
	if r := list(second); r.Status != http.StatusOK {
		t.Errorf("another session is limited by the first one's use: %d %s", r.Status, r.Body)
	}
}
