package admin_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

// controls are the delivery-control fields of both surfaces.
type controls struct {
	RateLimit       *int            `json:"rate_limit"`
	LegacyRateLimit *int            `json:"rateLimit"`
	Ordering        json.RawMessage `json:"ordering"`
}

func TestSubscriptionControlsLifecycle(t *testing.T) {
	h := newHarness(t, strict)
	key := h.merchant("m1")
	created := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key, Body: map[string]any{
		"url": "https://example.com/hooks", "events": []string{"*"}}})
	c := decode[controls](t, created)
	id := decode[subscription](t, created).ID
	if created.Status != http.StatusCreated || c.RateLimit != nil || string(c.Ordering) != `"none"` {
		t.Fatalf("defaults: %d %s", created.Status, created.Body)
	}
	path := "/v1/webhook_subscriptions/" + id
	for _, step := range []struct {
		body      map[string]any
		rateLimit *int
		ordering  string
	}{
		{map[string]any{"rate_limit": 5}, ptr(5), `"none"`},
		{map[string]any{"ordering": map[string]string{"key": "payload.account_id"}}, ptr(5), `{"key":"payload.account_id"}`},
		{map[string]any{"description": "unchanged controls"}, ptr(5), `{"key":"payload.account_id"}`},
		{map[string]any{"rate_limit": nil, "ordering": "none"}, nil, `"none"`},
		{map[string]any{"rate_limit": 10000, "ordering": nil}, ptr(10000), `"none"`},
	} {
		r := h.do(request{Method: http.MethodPost, Path: path, Key: key, Body: step.body})
		got := decode[controls](t, r)
		if r.Status != http.StatusOK || !equalPtr(got.RateLimit, step.rateLimit) || string(got.Ordering) != step.ordering {
			t.Fatalf("update %v: %d %s", step.body, r.Status, r.Body)
		}
		read := decode[controls](t, h.do(request{Method: http.MethodGet, Path: path, Key: key}))
		if !equalPtr(read.RateLimit, step.rateLimit) || string(read.Ordering) != step.ordering {
			t.Fatalf("read after %v: %+v", step.body, read)
		}
	}

	// Created with both, on each surface.
	r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key, Body: map[string]any{
		"url": "https://example.com/b", "events": []string{"*"}, "rate_limit": 3, "ordering": map[string]string{"key": "type"}}})
	if got := decode[controls](t, r); r.Status != http.StatusCreated || !equalPtr(got.RateLimit, ptr(3)) || string(got.Ordering) != `{"key":"type"}` {
		t.Fatalf("create with controls: %d %s", r.Status, r.Body)
	}
	r = h.legacy("create", key, "", map[string]any{"url": "https://example.com/l", "events": []string{"*"}, "rateLimit": 7,
		"ordering": map[string]string{"key": "payload.id"}})
	got := decode[controls](t, r)
	if r.Status != http.StatusOK || !equalPtr(got.LegacyRateLimit, ptr(7)) || string(got.Ordering) != `{"key":"payload.id"}` {
		t.Fatalf("legacy create with controls: %d %s", r.Status, r.Body)
	}
	legacyID := decode[subscription](t, r).ID
	r = h.legacy("update", key, "", map[string]any{"id": legacyID, "rateLimit": nil, "ordering": "none"})
	if got := decode[controls](t, r); r.Status != http.StatusOK || got.LegacyRateLimit != nil || string(got.Ordering) != `"none"` {
		t.Fatalf("legacy update of controls: %d %s", r.Status, r.Body)
	}
}

func TestSubscriptionControlsValidation(t *testing.T) {
	h := newHarness(t, strict)
	key := h.merchant("m1")
	sub := h.createSubscription(key, hookBody("https://example.com/"))
	for _, tc := range []struct {
		name  string
		field string
		value any
	}{
		{"rate limit zero", "rate_limit", 0},
		{"rate limit negative", "rate_limit", -1},
		{"rate limit too high", "rate_limit", 10001},
		{"rate limit fraction", "rate_limit", 2.5},
		{"rate limit string", "rate_limit", "5"},
		{"ordering unknown word", "ordering", "fifo"},
		{"ordering number", "ordering", 1},
		{"ordering without key", "ordering", map[string]any{}},
		{"ordering extra field", "ordering", map[string]any{"key": "payload.id", "by": "x"}},
		{"ordering key not a string", "ordering", map[string]any{"key": 1}},
		{"ordering key empty", "ordering", map[string]any{"key": ""}},
		{"ordering key outside the envelope", "ordering", map[string]any{"key": "data.id"}},
		{"ordering key empty segment", "ordering", map[string]any{"key": "payload..id"}},
		{"ordering key bad character", "ordering", map[string]any{"key": "payload.a b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := hookBody("https://example.com/")
			body[tc.field] = tc.value
			m := expectError(t, h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key, Body: body}),
				http.StatusBadRequest, "parameter_invalid")
			if m["param"] != tc.field {
				t.Errorf("create: param %v, want %s", m["param"], tc.field)
			}
			m = expectError(t, h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key,
				Body: map[string]any{tc.field: tc.value}}), http.StatusBadRequest, "parameter_invalid")
			if m["param"] != tc.field {
				t.Errorf("update: param %v, want %s", m["param"], tc.field)
			}
		})
	}
}

func equalPtr(a, b *int) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
func ptr(n int) *int          { return &n }
