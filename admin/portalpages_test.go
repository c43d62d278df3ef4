package admin_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/internal/portal"
)

func TestPortalMountedOnThePublicListener(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *admin.Config) { c.Portal = portal.New(portal.Config{}) })
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	cases := []struct {
		path     string
		status   int
		contains string
		location string
	}{
		{"/portal/", http.StatusOK, `src="js/app.js"`, ""},
		{"/portal/js/app.js", http.StatusOK, "portal_sessions/current", ""},
		{"/portal", http.StatusMovedPermanently, "", "/portal/"},
		{"/portal/nothing-here.js", http.StatusNotFound, "", ""},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			resp, err := client.Get(h.public.URL + c.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.status)
			}
			if !strings.Contains(string(body), c.contains) {
				t.Errorf("body lacks %q", c.contains)
			}
			if got := resp.Header.Get("Location"); got != c.location {
				t.Errorf("Location %q, want %q", got, c.location)
			}
			if c.status != http.StatusMovedPermanently && !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
				t.Errorf("no Content-Security-Policy: %v", resp.Header)
			}
		})
	}
	// The API beside it is unchanged: /v1 still wants a key.
	resp, err := http.Get(h.public.URL + "/v1/webhook_subscriptions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/v1 without a key: %d, want 401", resp.StatusCode)
	}
}

func TestNoPortalWhenNotConfigured(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	resp, err := http.Get(h.public.URL + "/portal/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/portal/ without a portal: %d, want 404", resp.StatusCode)
	}
}
