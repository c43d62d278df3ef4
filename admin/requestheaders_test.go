package admin_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
)

// TestAttemptShowsItsRequestHeaders: a delivery's attempt shows the
// headers its request carried, the signature as the receiver got it, the
// subscription's own header values and Authorization masked as the
// subscription read masks them, and neither the header values nor the
// signing secret anywhere in the answer.
func TestAttemptShowsItsRequestHeaders(t *testing.T) {
	t.Parallel()
	h, _ := newPipelineHarness(t)
	key := h.merchant("m1")
	rcv := newHookReceiver(t, http.StatusOK)
	const token = "Bearer sk_live_0123456789abcdef"
	created := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
		Body: map[string]any{"url": rcv.URL + "/hooks", "events": []string{"*"},
			"headers": map[string]string{"Authorization": token, "X-Tenant": "t-42"}}})
	if created.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.Status, created.Body)
	}
	secret := decode[struct {
		Secret string `json:"secret"`
	}](t, created).Secret
	ev := h.publish("m1", "payout.paid", `{"id":"po_1"}`)
	d := h.waitDelivery(key, h.deliveriesOf(key, ev.ID)[0].ID, "succeeded", settled)

	r := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_deliveries/" + d.ID, Key: key})
	var got struct {
		Attempts []struct {
			RequestHeaders map[string]string `json:"request_headers"`
		} `json:"attempts"`
	}
	if err := json.Unmarshal(r.Body, &got); err != nil || len(got.Attempts) != 1 {
		t.Fatalf("delivery %s (%v)", r.Body, err)
	}
	sent := rcv.requests()[0].Header
	want := map[string]string{
		"Authorization":     "Bearer ••••••",
		"X-Tenant":          "••••••",
		"Webhook-Id":        sent.Get("Webhook-Id"),
		"Webhook-Timestamp": sent.Get("Webhook-Timestamp"),
		"Webhook-Signature": sent.Get("Webhook-Signature"),
		"Content-Type":      "application/json",
	}
	shown := got.Attempts[0].RequestHeaders
	for name, v := range want {
		if shown[name] != v || v == "" {
			t.Errorf("%s shown as %q, want %q", name, shown[name], v)
		}
	}
	for _, secretPart := range []string{"sk_live", "t-42", secret, "whsec_"} {
		if bytes.Contains(r.Body, []byte(secretPart)) {
			t.Errorf("the delivery read shows %q:\n%s", secretPart, r.Body)
		}
	}
}
