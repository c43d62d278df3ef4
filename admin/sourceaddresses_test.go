package admin_test

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"slices"
	"testing"

	"github.com/webhookd/webhookd/admin"
)

// TestWebhookSourceAddresses lists the declared addresses without a key,
// in CIDR notation, and an empty list (never null) when none is declared.
func TestWebhookSourceAddresses(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		declared []netip.Prefix
		want     []string
	}{
		{"none declared", nil, []string{}},
		{"addresses and ranges", []netip.Prefix{
			netip.MustParsePrefix("203.0.113.7/32"), netip.MustParsePrefix("198.51.100.0/28"),
			netip.MustParsePrefix("2001:db8:1::/48"),
		}, []string{"203.0.113.7/32", "198.51.100.0/28", "2001:db8:1::/48"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *admin.Config) { c.SourceAddresses = tc.declared })
			r := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_source_addresses"})
			if r.Status != http.StatusOK {
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
			var body struct {
				Data []string `json:"data"`
			}
			if err := json.Unmarshal(r.Body, &body); err != nil || body.Data == nil {
				t.Fatalf("body %s: %v, want a data list", r.Body, err)
			}
			if !slices.Equal(body.Data, tc.want) {
				t.Errorf("data = %v, want %v", body.Data, tc.want)
			}
		})
	}
}
