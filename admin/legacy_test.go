package admin_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/admin"
)

// legacySubscription is the legacy resource as a client decodes it.
type legacySubscription struct {
	ID          string            `json:"id"`
	URL         string            `json:"url"`
	Events      []string          `json:"events"`
	Description *string           `json:"description"`
	Status      string            `json:"status"`
	Metadata    map[string]string `json:"metadata"`
	Secret      string            `json:"secret"`
	CreatedAt   time.Time         `json:"createdAt"`
	UpdatedAt   time.Time         `json:"updatedAt"`
}

// legacy calls a legacy route with X-Service-Api-Key; idem "" sends no
// Idempotency-Key (it is optional there).
func (h *harness) legacy(op, key, idem string, body any) response {
	h.t.Helper()
	hdr := map[string]string{"Idempotency-Key": omitHeader}
	if key != "" {
		hdr["X-Service-Api-Key"] = key
	}
	if idem != "" {
		hdr["Idempotency-Key"] = idem
	}
	return h.do(request{Method: http.MethodPost, Path: "/api/service/webhook-subscription/" + op, Body: body, Header: hdr})
}

// expectLegacyError checks the legacy error body: exactly message,
// category and docUrl.
func expectLegacyError(t *testing.T, r response, status int, category string) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status = %d, want %d; body %s", r.Status, status, r.Body)
	}
	m := r.JSON(t)
	if len(m) != 3 || m["message"] == nil || m["category"] != category || !strings.HasPrefix(m["docUrl"].(string), "https://") {
		t.Fatalf("legacy error body %s, want {message, category: %s, docUrl}", r.Body, category)
	}
	return m
}

func TestLegacyLifecycle(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m1")
	r := h.legacy("create", key, "", map[string]any{
		"url": "https://example.com/legacy", "events": []string{"payout.paid"},
		"description": "legacy", "metadata": map[string]string{"k": "v"},
	})
	if r.Status != http.StatusOK {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	for _, snake := range []string{`"created_at"`, `"updated_at"`, `"type"`, `"health"`} {
		if bytes.Contains(r.Body, []byte(snake)) {
			t.Errorf("legacy answer has Banking field %s: %s", snake, r.Body)
		}
	}
	created := decode[legacySubscription](t, r)
	if created.ID == "" || created.Status != "enabled" || !strings.HasPrefix(created.Secret, "whsec_") ||
		created.CreatedAt.IsZero() || created.UpdatedAt.IsZero() || *created.Description != "legacy" || created.Metadata["k"] != "v" {
		t.Fatalf("legacy create %s", r.Body)
	}

	// Made on the legacy surface, seen on /v1 with the same secret.
	v1 := decode[subscription](t, h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + created.ID, Key: key}))
	if v1.URL != created.URL || !slices.Equal(v1.Events, created.Events) || !v1.CreatedAt.Equal(created.CreatedAt) {
		t.Fatalf("/v1 sees %+v", v1)
	}
	if got := h.activeSecrets(created.ID); !slices.Equal(got, []string{created.Secret}) {
		t.Fatal("the stored secret is not the one the legacy create showed")
	}

	r = h.legacy("update", key, "", map[string]any{"id": created.ID, "status": "disabled", "description": nil,
		"events": []string{"*"}})
	if r.Status != http.StatusOK || bytes.Contains(r.Body, []byte(`"secret"`)) {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	upd := decode[legacySubscription](t, r)
	if upd.Status != "disabled" || upd.Description != nil || !slices.Equal(upd.Events, []string{"*"}) || upd.URL != created.URL {
		t.Fatalf("update gave %s", r.Body)
	}
	v1 = decode[subscription](t, h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + created.ID, Key: key}))
	if v1.Status != "disabled" {
		t.Fatal("/v1 does not see the legacy update")
	}

	r = h.legacy("delete", key, "", map[string]any{"id": created.ID})
	if r.Status != http.StatusOK {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if m := r.JSON(t); len(m) != 2 || m["id"] != created.ID || m["deleted"] != true {
		t.Fatalf("delete answered %s", r.Body)
	}
	expectError(t, h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + created.ID, Key: key}),
		http.StatusNotFound, "resource_not_found")
	expectLegacyError(t, h.legacy("delete", key, "", map[string]any{"id": created.ID}), http.StatusNotFound, "invalid_request_error")
}

func TestLegacySeesBankingSubscriptions(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m1")
	sub := h.createSubscription(key, hookBody("https://example.com/v1"))
	r := h.legacy("update", key, "", map[string]any{"id": sub.ID, "url": "https://example.com/moved"})
	if r.Status != http.StatusOK {
		t.Fatalf("legacy update of a /v1 subscription: %d %s", r.Status, r.Body)
	}
	if got := decode[legacySubscription](t, r); got.ID != sub.ID || got.URL != "https://example.com/moved" {
		t.Fatalf("legacy update gave %s", r.Body)
	}
	if r := h.legacy("delete", key, "", map[string]any{"id": sub.ID}); r.Status != http.StatusOK {
		t.Fatalf("legacy delete of a /v1 subscription: %d %s", r.Status, r.Body)
	}
	expectError(t, h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key}),
		http.StatusNotFound, "resource_not_found")
}

func TestLegacyIdempotency(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m1")
	idem := uuid.NewString()
	body := map[string]any{"url": "https://example.com/legacy", "events": []string{"payout.paid"}}
	first, again := h.legacy("create", key, idem, body), h.legacy("create", key, idem, body)
	if first.Status != http.StatusOK || again.Status != http.StatusOK {
		t.Fatalf("statuses %d, %d: %s", first.Status, again.Status, again.Body)
	}
	a, b := decode[legacySubscription](t, first), decode[legacySubscription](t, again)
	if a.ID != b.ID || a.Secret == "" || a.Secret != b.Secret {
		t.Fatal("the replay made another subscription or secret")
	}
	conflict := h.legacy("create", key, idem, map[string]any{"url": "https://example.com/other", "events": []string{"payout.paid"}})
	expectLegacyError(t, conflict, http.StatusConflict, "idempotency_error")
	// The key is global across routes (spec 4.4 rule 1).
	expectLegacyError(t, h.legacy("delete", key, idem, map[string]any{"id": a.ID}), http.StatusConflict, "idempotency_error")

	list := decode[listPage](t, h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions", Key: key}))
	if len(list.Data) != 1 || list.Data[0].ID != a.ID {
		t.Fatalf("%d subscriptions after replays, want 1", len(list.Data))
	}
	// Without a key each request runs: no guarantee, two subscriptions.
	h.legacy("create", key, "", body)
	h.legacy("create", key, "", body)
	if list := decode[listPage](t, h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions", Key: key})); len(list.Data) != 3 {
		t.Fatalf("%d subscriptions, want 3", len(list.Data))
	}
}

func TestLegacyErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t, strict)
	key := h.merchant("m1")
	stranger := h.merchant("m2")
	readOnly := h.merchant("m1", admin.ScopeRead)
	sub := h.createSubscription(key, hookBody("https://example.com/"))
	for _, tc := range []struct {
		name, op, key string
		body          any
		status        int
		category      string
		mentions      string
	}{
		{"bad url", "create", key, hookBody("http://example.com/"), 400, "invalid_request_error", "url"},
		{"unknown event", "create", key, hookBody("https://example.com/", "nope.nope"), 400, "invalid_request_error", "nope.nope"},
		{"snake_case field", "create", key, map[string]any{"url": "https://example.com/", "events": []string{"*"}, "created_at": "x"}, 400, "invalid_request_error", "created_at"},
		{"update without id", "update", key, map[string]any{"status": "disabled"}, 400, "invalid_request_error", "id"},
		{"update bad status", "update", key, map[string]any{"id": sub.ID, "status": "off"}, 400, "invalid_request_error", "status"},
		{"delete without id", "delete", key, map[string]any{}, 400, "invalid_request_error", "id"},
		{"another merchant's update", "update", stranger, map[string]any{"id": sub.ID, "status": "disabled"}, 404, "invalid_request_error", ""},
		{"another merchant's delete", "delete", stranger, map[string]any{"id": sub.ID}, 404, "invalid_request_error", ""},
		{"malformed id", "delete", key, map[string]any{"id": "42"}, 404, "invalid_request_error", ""},
		{"read-only key", "create", readOnly, hookBody("https://example.com/"), 403, "invalid_request_error", "scope"},
		{"no key", "create", "", hookBody("https://example.com/"), 401, "authentication_error", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := expectLegacyError(t, h.legacy(tc.op, tc.key, "", tc.body), tc.status, tc.category)
			if !strings.Contains(m["message"].(string), tc.mentions) {
				t.Errorf("message %q does not mention %q", m["message"], tc.mentions)
			}
		})
	}
	// A Banking Bearer key is not how the legacy surface authenticates.
	r := h.do(request{Method: http.MethodPost, Path: "/api/service/webhook-subscription/create", Key: key,
		Body: hookBody("https://example.com/"), Header: map[string]string{"Idempotency-Key": omitHeader}})
	expectLegacyError(t, r, http.StatusUnauthorized, "authentication_error")

	got := decode[subscription](t, h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key}))
	if got.Status != "enabled" {
		t.Fatal("a refused legacy request changed the subscription")
	}
	var list listPage
	if err := json.Unmarshal(h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions", Key: key}).Body, &list); err != nil || len(list.Data) != 1 {
		t.Fatalf("refused legacy creates stored subscriptions: %d", len(list.Data))
	}
}
