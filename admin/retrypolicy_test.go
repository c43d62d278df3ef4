package admin_test

import (
	"fmt"
	"net/http"
	"testing"
)

// TestRetryPolicyOnBothSurfaces: retry_policy is set on create, shown on
// read, changed and cleared (null) on update on /v1; the legacy routes
// take and show it as retryPolicy with timeoutSeconds; a bad value is a
// 400 naming the exact field; a poll subscription refuses one.
func TestRetryPolicyOnBothSurfaces(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m1")
	policyOf := func(r response, name string) string {
		t.Helper()
		if r.Status != http.StatusOK && r.Status != http.StatusCreated {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		return fmt.Sprint(r.JSON(t)[name])
	}
	created := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key, Body: map[string]any{
		"url": "https://example.com/h", "events": []string{"*"},
		"retry_policy": map[string]any{"schedule": []string{"5s", "90s", "2h", "1d"}, "timeout_seconds": 10}}})
	if got := policyOf(created, "retry_policy"); got != "map[schedule:[5s 1m30s 2h 1d] timeout_seconds:10]" {
		t.Fatalf("created with %s", got)
	}
	id := created.JSON(t)["id"].(string)
	path := "/v1/webhook_subscriptions/" + id
	if got := policyOf(h.do(request{Method: http.MethodGet, Path: path, Key: key}), "retry_policy"); got != "map[schedule:[5s 1m30s 2h 1d] timeout_seconds:10]" {
		t.Fatalf("read %s", got)
	}
	// An update of another field leaves it; one of it replaces it whole.
	if got := policyOf(h.do(request{Method: http.MethodPost, Path: path, Key: key, Body: map[string]any{"description": "d"}}), "retry_policy"); got != "map[schedule:[5s 1m30s 2h 1d] timeout_seconds:10]" {
		t.Fatalf("after another field's update %s", got)
	}
	if got := policyOf(h.do(request{Method: http.MethodPost, Path: path, Key: key, Body: map[string]any{
		"retry_policy": map[string]any{"timeout_seconds": 3}}}), "retry_policy"); got != "map[schedule:<nil> timeout_seconds:3]" {
		t.Fatalf("after a timeout alone %s", got)
	}
	if got := policyOf(h.do(request{Method: http.MethodPost, Path: path, Key: key, Body: map[string]any{"retry_policy": nil}}), "retry_policy"); got != "<nil>" {
		t.Fatalf("after null %s", got)
	}

	for body, param := range map[string]string{
		`{"schedule": ["5s", "1m", "1h", "1.5h"]}`: "retry_policy.schedule[3]",
		`{"schedule": ["0s"]}`:                     "retry_policy.schedule[0]",
		`{"schedule": ["20d", "11d"]}`:             "retry_policy.schedule[1]",
		`{"timeout_seconds": 26}`:                  "retry_policy.timeout_seconds",
		`{"attempts": 3}`:                          "retry_policy",
	} {
		expectParam(t, h.do(request{Method: http.MethodPost, Path: path, Key: key, Body: `{"retry_policy": ` + body + `}`}), param)
	}
	expectParam(t, h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key, Body: map[string]any{
		"events": []string{"*"}, "destination": map[string]any{"type": "poll"}, "retry_policy": map[string]any{"schedule": []string{"1s"}}}}),
		"retry_policy")
	poll := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key, Body: map[string]any{
		"events": []string{"*"}, "destination": map[string]any{"type": "poll"}}})
	if poll.Status != http.StatusCreated {
		t.Fatalf("poll create: %d %s", poll.Status, poll.Body)
	}
	expectParam(t, h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + poll.JSON(t)["id"].(string), Key: key,
		Body: map[string]any{"retry_policy": map[string]any{"timeout_seconds": 5}}}), "retry_policy")

	legacy := h.legacy("create", key, "", map[string]any{"url": "https://example.com/l", "events": []string{"*"},
		"retryPolicy": map[string]any{"schedule": []string{"1m"}, "timeoutSeconds": 7}})
	if got := policyOf(legacy, "retryPolicy"); got != "map[schedule:[1m] timeoutSeconds:7]" {
		t.Fatalf("legacy create %s", got)
	}
	lid := legacy.JSON(t)["id"].(string)
	if got := policyOf(h.legacy("update", key, "", map[string]any{"id": lid, "retryPolicy": map[string]any{"schedule": []string{}}}), "retryPolicy"); got != "map[schedule:[] timeoutSeconds:<nil>]" {
		t.Fatalf("legacy update %s", got)
	}
	expectLegacyError(t, h.legacy("update", key, "", map[string]any{"id": lid, "retryPolicy": map[string]any{"timeout_seconds": 3}}),
		http.StatusBadRequest, "invalid_request_error")
}
