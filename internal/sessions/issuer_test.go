package sessions_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/merchants"
	"github.com/webhookd/webhookd/internal/sessions"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

func TestIssue(t *testing.T) {
	// One database for every case: each issues a session of its own.
	st := storetest.NewStore(t)
	if _, err := st.Merchants.EnsureMerchant(context.Background(), "m_known", "2026-01-01"); err != nil {
		t.Fatal(err)
	}
	ptr := func(s string) *string { return &s }
	secs := func(n int64) *int64 { return &n }
	for _, tc := range []struct {
		name     string
		merchant string
		req      sessions.Request
		wantTTL  time.Duration
		wantCaps []string
		param    string // the param refused; "" when issued
	}{
		{"defaults", "m_known", sessions.Request{}, time.Hour, sessions.All(), ""},
		{"one minute, view alone", "m_known", sessions.Request{Capabilities: []string{}, TTLSeconds: secs(60)}, time.Minute, []string{"view"}, ""},
		{"seven days", "m_known", sessions.Request{TTLSeconds: secs(604800)}, 7 * 24 * time.Hour, sessions.All(), ""},
		{"branding", "m_known", sessions.Request{Branding: merchants.Branding{AccentColor: ptr("#00ff00"), LogoURL: ptr("https://example.com/l.svg")}},
			time.Hour, sessions.All(), ""},
		{"ttl zero", "m_known", sessions.Request{TTLSeconds: secs(0)}, 0, nil, "ttl_seconds"},
		{"ttl past seven days", "m_known", sessions.Request{TTLSeconds: secs(604801)}, 0, nil, "ttl_seconds"},
		{"unknown capability", "m_known", sessions.Request{Capabilities: []string{"root"}}, 0, nil, "capabilities"},
		{"colour", "m_known", sessions.Request{Branding: merchants.Branding{AccentColor: ptr("green")}}, 0, nil, "branding.accent_color"},
		{"empty colour", "m_known", sessions.Request{Branding: merchants.Branding{AccentColor: ptr("")}}, 0, nil, "branding.accent_color"},
		{"plain-HTTP logo", "m_known", sessions.Request{Branding: merchants.Branding{LogoURL: ptr("http://example.com/l.svg")}}, 0, nil, "branding.logo_url"},
		{"bad merchant id", strings.Repeat("m", 256), sessions.Request{}, 0, nil, "merchant_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			token, s, err := sessions.NewIssuer(st.PortalSessions, "production", false).Issue(ctx, tc.merchant, tc.req)
			if tc.param != "" {
				if e := invalid.As(err); e == nil || e.Param != tc.param {
					t.Fatalf("Issue = %v, want a refusal of %s", err, tc.param)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			stored, _, err := st.PortalSessions.PortalSessionByHash(ctx, store.HashAPIKey(token), time.Now())
			if err != nil {
				t.Fatalf("the issued token is not stored: %v", err)
			}
			if stored.ID != s.ID || stored.Environment != "production" || !slices.Equal(stored.Capabilities, tc.wantCaps) ||
				stored.ExpiresAt.Sub(stored.CreatedAt) != tc.wantTTL {
				t.Errorf("stored %+v, want capabilities %v for %v", stored, tc.wantCaps, tc.wantTTL)
			}
			if tc.req.Branding.AccentColor != nil && (stored.AccentColor == nil || *stored.AccentColor != *tc.req.Branding.AccentColor) {
				t.Errorf("stored colour %v", stored.AccentColor)
			}
		})
	}
}

func TestIssueForAnUnknownMerchant(t *testing.T) {
	st := storetest.NewStore(t)
	_, _, err := sessions.NewIssuer(st.PortalSessions, "sandbox", true).Issue(context.Background(), "m_nobody", sessions.Request{})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Issue for an unknown merchant = %v, want store.ErrNotFound", err)
	}
}

// TestIssueWithinTheKey: a session minted with an API key is cut to what
// the key's scopes grant, and asking for more is refused before anything
// is stored; the core API (no key) may grant every capability.
func TestIssueWithinTheKey(t *testing.T) {
	st := storetest.NewStore(t)
	ctx := context.Background()
	writeOnly := []string{merchants.ScopeWrite}
	key, err := st.APIKeys.CreateAPIKey(ctx, "m_key", "2026-01-01", "sandbox", "sandbox.write-only", writeOnly)
	if err != nil {
		t.Fatal(err)
	}
	issuer := sessions.NewIssuer(st.PortalSessions, "sandbox", false)
	_, s, err := issuer.Issue(ctx, "m_key", sessions.Request{APIKeyID: key.ID, KeyScopes: writeOnly})
	if err != nil || !slices.Equal(s.Capabilities, []string{"manage_endpoints", "view_secret", "resend"}) {
		t.Fatalf("default session of a write-only key: %v, %v; want no view", s.Capabilities, err)
	}
	_, _, err = issuer.Issue(ctx, "m_key", sessions.Request{APIKeyID: key.ID, KeyScopes: writeOnly, Capabilities: []string{"view"}})
	var beyond *sessions.BeyondKeyError
	if !errors.As(err, &beyond) || !slices.Equal(beyond.Scopes, []string{merchants.ScopeRead}) {
		t.Fatalf("view from a write-only key: %v, want a BeyondKeyError needing webhooks:read", err)
	}
	var n int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM portal_sessions WHERE api_key_id = $1`, key.ID).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d sessions stored (%v), want only the first", n, err)
	}
	if _, s, err := issuer.Issue(ctx, "m_key", sessions.Request{}); err != nil || !slices.Equal(s.Capabilities, sessions.All()) {
		t.Errorf("the core API's session: %v, %v; want every capability", s.Capabilities, err)
	}
}
