package admin_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/internal/testfixtures/kindstest"
)

// TestSQSEngineCredentialsAPI: over HTTP, an sqs destination without a
// key is 400 naming destination.access_key_id (missing when the operator
// allows no queue, invalid outside the listed ones), and reads of one
// under a listed prefix show "credentials": "engine" and no key.
func TestSQSEngineCredentialsAPI(t *testing.T) {
	t.Parallel()
	const prefix = "https://sqs.eu-west-1.amazonaws.com/123456789012/"
	keyless := func(queueURL string) map[string]any {
		return map[string]any{"events": []string{"*"}, "destination": map[string]any{"type": "sqs", "queue_url": queueURL, "region": "eu-west-1"}}
	}
	off := newHarness(t)
	r := off.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: off.merchant("m1"), Body: keyless(prefix + "payouts")})
	if m := expectError(t, r, http.StatusBadRequest, "parameter_missing"); m["param"] != "destination.access_key_id" {
		t.Errorf("variable unset: param %v (%v)", m["param"], m["message"])
	}

	on := newHarness(t, func(c *admin.Config) { c.Kinds = kindstest.Registry(t, []string{prefix}) })
	key := on.merchant("m1")
	r = on.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
		Body: keyless("https://sqs.eu-west-1.amazonaws.com/999999999999/payouts")})
	if m := expectError(t, r, http.StatusBadRequest, "parameter_invalid"); m["param"] != "destination.access_key_id" ||
		strings.Contains(m["message"].(string), "123456789012") {
		t.Errorf("queue outside the list: param %v, message %v", m["param"], m["message"])
	}
	r = on.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key, Body: keyless(prefix + "payouts")})
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	sub := decode[struct {
		ID          string         `json:"id"`
		Destination map[string]any `json:"destination"`
	}](t, r)
	r = on.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key})
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"credentials":"engine"`) || strings.Contains(string(r.Body), "access_key") {
		t.Fatalf("read: %d %s; want credentials engine and no key", r.Status, r.Body)
	}
}
