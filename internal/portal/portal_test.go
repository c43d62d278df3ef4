package portal_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/internal/portal"
)

func TestServesAssetsWithSecurityHeaders(t *testing.T) {
	srv := httptest.NewServer(http.StripPrefix("/portal", portal.New(portal.Config{})))
	t.Cleanup(srv.Close)
	cases := []struct {
		path, contentType, contains string
	}{
		{"/portal/", "text/html", `<script type="module" src="js/app.js">`},
		{"/portal/index.html", "text/html", `<link rel="icon" href="favicon.svg"`},
		{"/portal/portal.css", "text/css", "--accent"},
		{"/portal/js/app.js", "text/javascript", "portal_sessions/current"},
		{"/portal/js/api.js", "text/javascript", "Idempotency-Key"},
		{"/portal/js/poll.js", "text/javascript", "pollFacts"},
		// Its own icon, named by the page: a browser then never asks
		// for /favicon.ico, which the engine does not serve (a 404 on
		// every page).
		{"/portal/favicon.svg", "image/svg+xml", "<svg"},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			resp, err := http.Get(srv.URL + c.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if got := resp.Header.Get("Content-Type"); !strings.HasPrefix(got, c.contentType) {
				t.Errorf("Content-Type %q, want %s", got, c.contentType)
			}
			if !strings.Contains(string(body), c.contains) {
				t.Errorf("body lacks %q", c.contains)
			}
			want := map[string]string{
				"X-Content-Type-Options": "nosniff",
				"Referrer-Policy":        "no-referrer",
			}
			for k, v := range want {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			csp := resp.Header.Get("Content-Security-Policy")
			for _, directive := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'",
				"img-src 'self' https:", "connect-src 'self'", "frame-ancestors 'none'"} {
				if !strings.Contains(csp, directive) {
					t.Errorf("Content-Security-Policy %q lacks %q", csp, directive)
				}
			}
			if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
				t.Errorf("Content-Security-Policy %q allows inline code", csp)
			}
		})
	}
}

func TestFrameAncestorsInThePolicy(t *testing.T) {
	h := portal.New(portal.Config{FrameAncestors: []string{"https://dashboard.example.com", "https://admin.example.com:8443"}})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	csp := rec.Header().Get("Content-Security-Policy")
	if !strings.HasSuffix(csp, "frame-ancestors https://dashboard.example.com https://admin.example.com:8443") {
		t.Errorf("Content-Security-Policy %q does not end with the configured frame-ancestors", csp)
	}
}

func TestRefusesOtherMethodsAndUnknownFiles(t *testing.T) {
	h := portal.New(portal.Config{})
	cases := []struct {
		method, path string
		want         int
	}{
		{http.MethodPost, "/", http.StatusMethodNotAllowed},
		{http.MethodDelete, "/js/app.js", http.StatusMethodNotAllowed},
		{http.MethodGet, "/missing.js", http.StatusNotFound},
		{http.MethodHead, "/", http.StatusOK},
	}
	for _, c := range cases {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(c.method, "http://x"+c.path, nil))
		if rec.Code != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, rec.Code, c.want)
		}
		if rec.Header().Get("Content-Security-Policy") == "" {
			t.Errorf("%s %s: no Content-Security-Policy", c.method, c.path)
		}
	}
}
