package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

func TestPortalSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.NewStore(t)
	now := time.Now()
	for _, m := range []string{"m_a", "m_b"} {
		if _, err := st.Merchants.EnsureMerchant(ctx, m, "2026-01-01"); err != nil {
			t.Fatal(err)
		}
	}
	create := func(merchant, token string, ttl time.Duration) store.PortalSession {
		t.Helper()
		s, err := st.PortalSessions.CreatePortalSession(ctx, store.NewPortalSession{MerchantID: merchant, Environment: "sandbox", Token: token,
			Capabilities: []string{"view"}, TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	live := func(token string, at time.Time) bool {
		t.Helper()
		_, _, err := st.PortalSessions.PortalSessionByHash(ctx, store.HashAPIKey(token), at)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}

	s := create("m_a", "whps_one", time.Minute)
	got, m, err := st.PortalSessions.PortalSessionByHash(ctx, store.HashAPIKey("whps_one"), now)
	if err != nil || got.ID != s.ID || m.ID != "m_a" || !slices.Equal(got.Capabilities, []string{"view"}) || got.RevokedAt != nil {
		t.Fatalf("lookup: %+v of %+v, %v", got, m, err)
	}
	if live("whps_one", s.ExpiresAt) {
		t.Error("a session is live at its expiry")
	}

	create("m_a", "whps_two", time.Hour)
	create("m_b", "whps_three", time.Hour)
	if err := st.PortalSessions.RevokePortalSession(ctx, "m_b", s.ID); err != nil {
		t.Fatal(err)
	}
	if !live("whps_one", now) {
		t.Error("another merchant revoked m_a's session")
	}
	if err := st.PortalSessions.RevokePortalSession(ctx, "m_a", s.ID); err != nil {
		t.Fatal(err)
	}
	if live("whps_one", now) {
		t.Error("a revoked session is live")
	}
	n, err := st.PortalSessions.RevokeMerchantPortalSessions(ctx, "m_a")
	if err != nil || n != 1 {
		t.Fatalf("revoke m_a's: %d, %v; want the one still live", n, err)
	}
	if live("whps_two", now) || !live("whps_three", now) {
		t.Error("revoking m_a's sessions did not end exactly m_a's")
	}

	if _, err := st.PortalSessions.CreatePortalSession(ctx, store.NewPortalSession{MerchantID: "m_nobody", Environment: "sandbox",
		Token: "whps_four", Capabilities: []string{"view"}, TTL: time.Hour}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a session of an unknown merchant: %v, want ErrNotFound", err)
	}
}

func TestMerchantPortalBranding(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.NewStore(t)
	ptr := func(s string) *string { return &s }
	m, err := st.Merchants.UpdateMerchant(ctx, "m_brand", "2026-01-01", store.MerchantSettings{PortalAccentColor: ptr("#123456"), PortalLogoURL: ptr("https://example.com/l.png")})
	if err != nil || m.PortalAccentColor == nil || *m.PortalAccentColor != "#123456" || m.PortalLogoURL == nil {
		t.Fatalf("set: %+v, %v", m, err)
	}
	// Absent leaves a setting; empty clears it.
	m, err = st.Merchants.UpdateMerchant(ctx, "m_brand", "2026-01-01", store.MerchantSettings{PortalLogoURL: ptr("")})
	if err != nil || m.PortalAccentColor == nil || *m.PortalAccentColor != "#123456" || m.PortalLogoURL != nil {
		t.Fatalf("clear the logo: %+v, %v", m, err)
	}
	if got, err := st.Merchants.GetMerchant(ctx, "m_brand"); err != nil || got.PortalLogoURL != nil || got.PortalAccentColor == nil {
		t.Fatalf("read back: %+v, %v", got, err)
	}
}

// TestPortalSessionReadsItsKeysScopes: the lookup of a session minted with
// a key carries the key's scopes as they are now (a key narrowed after
// minting narrows its sessions); a session of the core API carries none.
func TestPortalSessionReadsItsKeysScopes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.NewStore(t)
	key, err := st.APIKeys.CreateAPIKey(ctx, "m_scopes", "2026-01-01", "sandbox", "sandbox.scopes", []string{"webhooks:read", "webhooks:write"})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []store.NewPortalSession{
		{MerchantID: "m_scopes", Environment: "sandbox", Token: "whps_keyed", Capabilities: []string{"view"}, TTL: time.Hour, APIKeyID: key.ID},
		{MerchantID: "m_scopes", Environment: "sandbox", Token: "whps_core", Capabilities: []string{"view"}, TTL: time.Hour},
	} {
		if _, err := st.PortalSessions.CreatePortalSession(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	scopes := func(token string) []string {
		t.Helper()
		s, _, err := st.PortalSessions.PortalSessionByHash(ctx, store.HashAPIKey(token), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return s.KeyScopes
	}
	if got := scopes("whps_keyed"); !slices.Equal(got, []string{"webhooks:read", "webhooks:write"}) {
		t.Errorf("the key's session reads scopes %v, want the key's", got)
	}
	if _, err := st.Pool().Exec(ctx, `UPDATE api_keys SET scopes = '{webhooks:write}' WHERE id = $1`, key.ID); err != nil {
		t.Fatal(err)
	}
	if got := scopes("whps_keyed"); !slices.Equal(got, []string{"webhooks:write"}) {
		t.Errorf("after narrowing the key, its session reads scopes %v, want [webhooks:write]", got)
	}
	if got := scopes("whps_core"); got != nil {
		t.Errorf("the core API's session reads scopes %v, want none", got)
	}
}
