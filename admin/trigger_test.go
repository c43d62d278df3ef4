package admin_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/merchants"
)

// TestTriggerPublishesTheExample triggers payout.paid: the event carries
// the catalogue's example payload, reaches the merchant's own matching
// subscription and no other merchant's, and a retry with the same
// Idempotency-Key answers the same event.
func TestTriggerPublishesTheExample(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withIngestPipeline(t))
	key, other := h.merchant("m1"), h.merchant("m2")
	for _, k := range []string{key, other} {
		if r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: k,
			Body: map[string]any{"url": "https://example.com/hook", "events": []string{"payout.paid"}}}); r.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
	}
	req := request{Method: http.MethodPost, Path: "/v1/event_types/payout.paid/trigger", Key: key,
		Header: map[string]string{"Idempotency-Key": "trigger-1"}}
	r := h.do(req)
	if r.Status != http.StatusAccepted {
		t.Fatalf("trigger = %d %s, want 202", r.Status, r.Body)
	}
	var ev struct {
		ID      string          `json:"id"`
		Type    string          `json:"type"`
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(r.Body, &ev); err != nil || ev.Type != "payout.paid" || ev.ID == "" {
		t.Fatalf("trigger answered %s (%v), want the payout.paid event", r.Body, err)
	}
	var want, got any
	_ = json.Unmarshal(catalogue.For([]string{"payout.paid"})[0].Example, &want)
	_ = json.Unmarshal(ev.Payload, &got)
	if a, b := mustJSON(t, want), mustJSON(t, got); !bytes.Equal(a, b) {
		t.Errorf("payload = %s, want the catalogue's example %s", b, a)
	}
	if again := h.do(req); again.Status != http.StatusAccepted || !bytes.Contains(again.Body, []byte(ev.ID)) {
		t.Errorf("the same Idempotency-Key = %d %s, want the same event", again.Status, again.Body)
	}

	own := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_deliveries?event_id=" + ev.ID, Key: key})
	if n := len(own.JSON(t)["data"].([]any)); own.Status != http.StatusOK || n != 1 {
		t.Errorf("the merchant's deliveries of the event = %d %s, want one", own.Status, own.Body)
	}
	if n, err := h.store.Pool().Exec(t.Context(), `SELECT 1 FROM deliveries WHERE merchant_id = 'm2'`); err != nil || n.RowsAffected() != 0 {
		t.Errorf("the other merchant got %d deliveries (%v)", n.RowsAffected(), err)
	}
}

// TestTriggerRefusals checks the refusals: production, a key without
// webhooks:write.
func TestTriggerRefusals(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withIngestPipeline(t))
	readOnly := h.merchant("m1", admin.ScopeRead)
	if r := h.do(request{Method: http.MethodPost, Path: "/v1/event_types/payout.paid/trigger", Key: readOnly}); r.Status != http.StatusForbidden ||
		!bytes.Contains(r.Body, []byte(admin.ScopeWrite)) {
		t.Errorf("read-only key = %d %s, want 403 naming %s", r.Status, r.Body, admin.ScopeWrite)
	}

	prod := h.twin(func(c *admin.Config) { c.Environment = "production" })
	key, err := merchants.NewKeyIssuer(h.store.APIKeys, "production", admin.DefaultVersion).Issue(t.Context(), "m2",
		[]string{admin.ScopeRead, admin.ScopeWrite})
	if err != nil {
		t.Fatal(err)
	}
	r := prod.do(request{Method: http.MethodPost, Path: "/v1/event_types/payout.paid/trigger", Key: key})
	if r.Status != http.StatusForbidden || !bytes.Contains(r.Body, []byte(`"permission_denied"`)) || !bytes.Contains(r.Body, []byte("sandbox")) {
		t.Errorf("production = %d %s, want 403 permission_denied naming the sandbox", r.Status, r.Body)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
