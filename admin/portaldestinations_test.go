package admin_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/internal/testfixtures/kindstest"
)

// TestPortalSessionDestinations: the portal learns from
// GET /v1/portal_sessions/current which destination types the server
// lets a subscription use, so that its endpoint form offers only those:
// the configured ones, or every type when none are configured, as the
// registry allows then.
func TestPortalSessionDestinations(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		configured []string
		want       []string
	}{
		{"configured", []string{"webhook", "rabbitmq"}, []string{"webhook", "rabbitmq"}},
		{"none configured", nil, subscriptions.DestinationTypes(kindstest.Registry(t, nil))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(c *admin.Config) { c.Destinations = tc.configured })
			key := h.merchant("m_dest")
			for name, token := range map[string]string{"a session": h.session("m_dest", nil).Token, "an API key": key} {
				r := h.do(request{Method: http.MethodGet, Path: "/v1/portal_sessions/current", Key: token})
				cur := decode[struct {
					Destinations []string `json:"destinations"`
				}](t, r)
				if !slices.Equal(cur.Destinations, tc.want) {
					t.Errorf("%s: destinations %v, want %v", name, cur.Destinations, tc.want)
				}
			}
		})
	}
}
