package admin_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/testfixtures/testpki"
)

// TestMTLSExpiresSoonOnRead: a read of an mtls subscription says whether
// its client certificate expires within 14 days, on both surfaces.
func TestMTLSExpiresSoonOnRead(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m1")
	now := time.Now()
	ca := testpki.NewCA(t, "client CA")
	for _, tc := range []struct {
		name     string
		lifetime time.Duration
		want     bool
	}{
		{"ten days left", 10 * 24 * time.Hour, true},
		{"ninety days left", 90 * 24 * time.Hour, false},
	} {
		cert := ca.Client(t, tc.name, now.Add(-time.Hour), now.Add(tc.lifetime))
		r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key, Body: map[string]any{
			"url": "https://example.com/h", "events": []string{"*"},
			"authentication": map[string]any{"type": "mtls", "client_certificate": cert.CertPEM, "client_key": cert.KeyPEM}}})
		shown := decode[struct {
			ID             string         `json:"id"`
			Authentication map[string]any `json:"authentication"`
		}](t, r)
		if r.Status != http.StatusCreated || shown.Authentication["expires_soon"] != tc.want {
			t.Fatalf("%s: %d %s, want expires_soon %v", tc.name, r.Status, r.Body, tc.want)
		}
		legacy := h.legacy("update", key, "", map[string]any{"id": shown.ID, "description": "read on the legacy surface"})
		if got := decode[struct {
			Authentication map[string]any `json:"authentication"`
		}](t, legacy); got.Authentication["expiresSoon"] != tc.want {
			t.Fatalf("%s: legacy read %d %s, want expiresSoon %v", tc.name, legacy.Status, legacy.Body, tc.want)
		}
	}
}
