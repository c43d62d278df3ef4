package admin_test

import (
	"crypto/sha256"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/merchants"
)

// The /v1 conventions of spec 4.1, 5, 7 and 9, seen from outside.

func TestAuthentication(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	good := h.merchant("m_auth")
	readOnly := h.merchant("m_auth", admin.ScopeRead)
	prod, err := merchants.NewAPIKey("production")
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		header map[string]string
		status int
		code   string
	}{
		{"no key", nil, 401, "authentication_required"},
		{"not bearer", map[string]string{"Authorization": "Basic " + good}, 401, "authentication_required"},
		{"unknown key", map[string]string{"Authorization": "Bearer sandbox.nope"}, 401, "authentication_required"},
		{"other environment", map[string]string{"Authorization": "Bearer " + prod}, 401, "authentication_required"},
		{"valid key", map[string]string{"Authorization": "Bearer " + good}, 200, ""},
		{"bearer is case-insensitive", map[string]string{"Authorization": "bearer " + good}, 200, ""},
		{"read scope lists", map[string]string{"Authorization": "Bearer " + readOnly}, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.do(request{Method: "GET", Path: "/v1/webhook_subscriptions", Header: tt.header})
			if tt.code == "" {
				if r.Status != tt.status {
					t.Fatalf("status %d, want %d: %s", r.Status, tt.status, r.Body)
				}
				return
			}
			m := expectError(t, r, tt.status, tt.code)
			if m["category"] != "authentication_error" {
				t.Errorf("category = %v", m["category"])
			}
		})
	}
}

func TestInsufficientScopeNamesTheScope(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	readOnly := h.merchant("m_scope", admin.ScopeRead)
	r := h.do(request{Method: "POST", Path: "/v1/webhook_subscriptions", Key: readOnly,
		Body: map[string]any{"url": "https://example.com/hook", "events": []string{"*"}}})
	m := expectError(t, r, 403, "insufficient_scope")
	scopes, _ := m["required_scopes"].([]any)
	if len(scopes) != 1 || scopes[0] != admin.ScopeWrite {
		t.Fatalf("required_scopes = %v, want [webhooks:write]", m["required_scopes"])
	}
}

func TestErrorFormat(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *admin.Config) { c.MaxBodyBytes = 2048 })
	key := h.merchant("m_err")
	tests := []struct {
		name   string
		req    request
		status int
		code   string
		param  any
	}{
		{"unknown route", request{Method: "GET", Path: "/v1/nothing_here", Key: key}, 404, "resource_not_found", nil},
		{"unknown top-level route", request{Method: "GET", Path: "/elsewhere"}, 404, "resource_not_found", nil},
		{"method not allowed", request{Method: "PATCH", Path: "/v1/api_versions"}, 405, "method_not_allowed", nil},
		{"POST without Idempotency-Key", request{Method: "POST", Path: "/v1/webhook_subscriptions", Key: key,
			Body: map[string]any{"url": "https://example.com"}, Header: map[string]string{"Idempotency-Key": omitHeader}},
			400, "idempotency_key_required", "Idempotency-Key"},
		{"Idempotency-Key too long", request{Method: "POST", Path: "/v1/webhook_subscriptions", Key: key,
			Body: map[string]any{}, Header: map[string]string{"Idempotency-Key": strings.Repeat("k", 256)}},
			400, "parameter_invalid", "Idempotency-Key"},
		{"body too large", request{Method: "POST", Path: "/v1/webhook_subscriptions", Key: key,
			Body: `{"url":"` + strings.Repeat("a", 4096) + `"}`}, 413, "payload_too_large", nil},
		{"malformed JSON", request{Method: "POST", Path: "/v1/webhook_subscriptions", Key: key, Body: `{"url":`},
			400, "validation_error", nil},
		{"unknown field", request{Method: "POST", Path: "/v1/webhook_subscriptions", Key: key,
			Body: `{"url":"https://example.com/h","events":["*"],"colour":"blue"}`}, 400, "validation_error", "colour"},
		{"wrong type", request{Method: "POST", Path: "/v1/webhook_subscriptions", Key: key,
			Body: `{"url":42,"events":["*"]}`}, 400, "parameter_invalid", "url"},
		{"unknown api-version", request{Method: "GET", Path: "/v1/webhook_subscriptions", Key: key,
			Header: map[string]string{"api-version": "1999-01-01"}}, 400, "api_version_error", "api-version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.do(tt.req)
			m := expectError(t, r, tt.status, tt.code)
			if m["param"] != tt.param {
				t.Errorf("param = %v, want %v", m["param"], tt.param)
			}
			if strings.HasPrefix(tt.req.Path, "/v1/") && r.Header.Get("api-version") == "" {
				t.Errorf("no api-version header on a /v1 error")
			}
		})
	}
}

func TestInternalErrorLeaksNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m_500")
	// Break the database under the API: the answer must be a bare 500.
	if _, err := h.store.Pool().Exec(t.Context(), `ALTER TABLE subscriptions RENAME TO subscriptions_gone`); err != nil {
		t.Fatal(err)
	}
	r := h.do(request{Method: "GET", Path: "/v1/webhook_subscriptions", Key: key})
	m := expectError(t, r, 500, "internal_error")
	if strings.Contains(string(r.Body), "subscriptions") || m["category"] != "api_error" {
		t.Fatalf("500 body leaks detail or has the wrong category: %s", r.Body)
	}
}

func TestAPIVersions(t *testing.T) {
	t.Parallel()
	deprecated := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	sunset := time.Date(2027, 5, 1, 0, 0, 0, 0, time.UTC)
	versions, err := admin.ParseVersions(`[
		{"name":"2024-01-01","deprecated_at":"2025-01-01T00:00:00Z","sunset_at":"2025-06-01T00:00:00Z"},
		{"name":"2025-06-01","deprecated_at":"2026-05-01T00:00:00Z","sunset_at":"2027-05-01T00:00:00Z"},
		{"name":"2026-05-01"}]`)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(c *admin.Config) {
		c.Versions = versions
		c.Clock = clock.Func(func() time.Time { return time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC) })
	})
	key := h.merchant("m_versions")

	t.Run("catalogue is public, oldest to newest", func(t *testing.T) {
		r := h.do(request{Method: "GET", Path: "/v1/api_versions"})
		if r.Status != 200 {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		data := r.JSON(t)["data"].([]any)
		if len(data) != 3 {
			t.Fatalf("%d versions, want 3", len(data))
		}
		for i, want := range []string{"2024-01-01", "2025-06-01", "2026-05-01"} {
			v := data[i].(map[string]any)
			if v["name"] != want || v["is_latest"] != (i == 2) {
				t.Errorf("entry %d = %v", i, v)
			}
		}
		last := data[2].(map[string]any)
		if last["deprecated_at"] != nil || last["sunset_at"] != nil {
			t.Errorf("latest version carries deprecation dates: %v", last)
		}
	})
	tests := []struct {
		name, header, want string
		status             int
		deprecation        bool
	}{
		{"absent: the merchant's pinned version", "", admin.DefaultVersion, 200, false},
		{"current version", "2026-05-01", "2026-05-01", 200, false},
		{"deprecated version works, with Deprecation and Sunset", "2025-06-01", "2025-06-01", 200, true},
		{"sunset version is refused", "2024-01-01", "2026-05-01", 400, false},
		{"unknown version is refused", "2030-01-01", "2026-05-01", 400, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tt.header != "" {
				hdr["api-version"] = tt.header
			}
			r := h.do(request{Method: "GET", Path: "/v1/webhook_subscriptions", Key: key, Header: hdr})
			if r.Status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tt.status, r.Body)
			}
			if tt.status == 400 {
				expectError(t, r, 400, "api_version_error")
			}
			if got := r.Header.Get("api-version"); got != tt.want {
				t.Errorf("api-version = %q, want %q", got, tt.want)
			}
			if got := r.Header.Get("Deprecation") != ""; got != tt.deprecation {
				t.Errorf("Deprecation header present = %v, want %v", got, tt.deprecation)
			}
			if tt.deprecation && r.Header.Get("Sunset") != sunset.Format(http.TimeFormat) {
				t.Errorf("Sunset = %q", r.Header.Get("Sunset"))
			}
			_ = deprecated
		})
	}

	t.Run("pinned version follows the merchant's setting", func(t *testing.T) {
		r := h.doInternal(request{Method: "PUT", Path: "/internal/v1/merchants/m_versions", Body: map[string]any{"api_version": "2025-06-01"}})
		if r.Status != 200 {
			t.Fatalf("PUT merchant: %d %s", r.Status, r.Body)
		}
		r = h.do(request{Method: "GET", Path: "/v1/webhook_subscriptions", Key: key})
		if r.Header.Get("api-version") != "2025-06-01" || r.Header.Get("Deprecation") == "" {
			t.Fatalf("api-version = %q, Deprecation = %q", r.Header.Get("api-version"), r.Header.Get("Deprecation"))
		}
	})
}

func TestHTTPSIsRequiredOffLoopback(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *admin.Config) { c.RequireHTTPS = true })
	key := h.merchant("m_tls")
	r := h.do(request{Method: "GET", Path: "/v1/webhook_subscriptions", Key: key})
	expectError(t, r, 403, "permission_denied")
	// X-Forwarded-Proto counts only from a trusted proxy; none is configured.
	r = h.do(request{Method: "GET", Path: "/v1/webhook_subscriptions", Key: key, Header: map[string]string{"X-Forwarded-Proto": "https"}})
	expectError(t, r, 403, "permission_denied")
}

func TestInternalRoutes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	t.Run("ingest token is required", func(t *testing.T) {
		r := h.doInternal(request{Method: "POST", Path: "/internal/v1/merchants/m1/api_keys",
			Body: map[string]any{"scopes": []string{"webhooks:read"}}, Header: map[string]string{"Authorization": "Bearer wrong"}})
		expectError(t, r, 401, "authentication_required")
	})
	t.Run("no token configured refuses everything", func(t *testing.T) {
		h2 := newHarness(t, func(c *admin.Config) { c.IngestToken = "" })
		r := h2.doInternal(request{Method: "POST", Path: "/internal/v1/merchants/m1/api_keys",
			Body: map[string]any{"scopes": []string{"webhooks:read"}}, Header: map[string]string{"Authorization": "Bearer "}})
		expectError(t, r, 401, "authentication_required")
	})
	t.Run("a key made on the internal route works on /v1", func(t *testing.T) {
		r := h.doInternal(request{Method: "POST", Path: "/internal/v1/merchants/m_new/api_keys",
			Body: map[string]any{"scopes": []string{"webhooks:read"}}})
		if r.Status != 201 {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		key, _ := r.JSON(t)["key"].(string)
		if !strings.HasPrefix(key, "sandbox.") {
			t.Fatalf("key %q lacks the sandbox. prefix", key)
		}
		if r := h.do(request{Method: "GET", Path: "/v1/webhook_subscriptions", Key: key}); r.Status != 200 {
			t.Fatalf("new key refused: %d %s", r.Status, r.Body)
		}
		var n int
		if err := h.store.Pool().QueryRow(t.Context(), `SELECT count(*) FROM api_keys WHERE key_hash = sha256(convert_to($1, 'UTF8'))`, key).Scan(&n); err != nil || n != 1 {
			t.Fatalf("key not stored as its SHA-256: n=%d err=%v", n, err)
		}
	})
	t.Run("unknown scope", func(t *testing.T) {
		r := h.doInternal(request{Method: "POST", Path: "/internal/v1/merchants/m1/api_keys", Body: map[string]any{"scopes": []string{"payouts:write"}}})
		expectError(t, r, 400, "parameter_invalid")
	})
	t.Run("merchant settings", func(t *testing.T) {
		r := h.doInternal(request{Method: "PUT", Path: "/internal/v1/merchants/m_set", Body: map[string]any{"notification_email": "ops@example.com"}})
		if r.Status != 200 || r.JSON(t)["api_version"] != admin.DefaultVersion || r.JSON(t)["notification_email"] != "ops@example.com" {
			t.Fatalf("PUT merchant: %d %s", r.Status, r.Body)
		}
		r = h.doInternal(request{Method: "PUT", Path: "/internal/v1/merchants/m_set", Body: map[string]any{"notification_email": "not an address"}})
		expectError(t, r, 400, "parameter_invalid")
		r = h.doInternal(request{Method: "PUT", Path: "/internal/v1/merchants/m_set", Body: map[string]any{"api_version": "1990-01-01"}})
		expectError(t, r, 400, "parameter_invalid")
	})
	t.Run("health", func(t *testing.T) {
		if r := h.doInternal(request{Method: "GET", Path: "/healthz"}); r.Status != 200 {
			t.Fatalf("healthz %d", r.Status)
		}
		if r := h.doInternal(request{Method: "GET", Path: "/readyz"}); r.Status != 200 {
			t.Fatalf("readyz %d %s", r.Status, r.Body)
		}
	})
}

func TestIdempotency(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m_idem")
	other := h.merchant("m_idem_other")
	body := map[string]any{"url": "https://example.com/hook", "events": []string{"*"}}
	post := func(k, idem string, b any) response {
		return h.do(request{Method: "POST", Path: "/v1/webhook_subscriptions", Key: k, Body: b,
			Header: map[string]string{"Idempotency-Key": idem}})
	}

	first := post(key, "idem-1", body)
	if first.Status != 201 {
		t.Fatalf("create: %d %s", first.Status, first.Body)
	}
	again := post(key, "idem-1", body)
	if again.Status != 201 || string(again.Body) != string(first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay = %d %s, want the first answer", again.Status, again.Body)
	}
	expectError(t, post(key, "idem-1", map[string]any{"url": "https://example.com/other", "events": []string{"*"}}), 409, "idempotency_key_already_used")
	// Keys are scoped to the merchant.
	if r := post(other, "idem-1", body); r.Status != 201 {
		t.Fatalf("another merchant's same key: %d %s", r.Status, r.Body)
	}
	// A failed request releases its key (spec 4.4 rule 5).
	expectError(t, post(key, "idem-2", map[string]any{"url": "ftp://bad", "events": []string{"*"}}), 400, "parameter_invalid")
	if r := post(key, "idem-2", body); r.Status != 201 {
		t.Fatalf("reuse after failure: %d %s", r.Status, r.Body)
	}
	var n int
	if err := h.store.Pool().QueryRow(t.Context(), `SELECT count(*) FROM subscriptions WHERE merchant_id = 'm_idem'`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d subscriptions for m_idem, want 2 (one per successful key): %v", n, err)
	}
}

func TestConcurrentRequestWithSameKeyIsInProgress(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m_busy")
	body := `{"url":"https://example.com/hook","events":["*"]}`
	// The same request is still running elsewhere: its claim is held.
	sum := sha256.Sum256([]byte("POST /v1/webhook_subscriptions\n" + body))
	if _, _, err := h.store.IdempotencyKeys.ClaimIdempotencyKey(t.Context(), "m_busy", "busy", sum[:], time.Minute); err != nil {
		t.Fatal(err)
	}
	r := h.do(request{Method: "POST", Path: "/v1/webhook_subscriptions", Key: key, Body: body,
		Header: map[string]string{"Idempotency-Key": "busy"}})
	expectError(t, r, 409, "request_in_progress")
}
