package admin_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestEraseEventRoute: the internal erase route replaces the payload the
// merchant API shows with the tombstone, ends the waiting delivery as
// erased, answers the same counts and erased_at when called again, and
// records one audit entry naming the caller; bad input is a 4xx in the
// spec's format.
func TestEraseEventRoute(t *testing.T) {
	t.Parallel()
	h := newIngestHarness(t)
	key := h.merchant("m1")
	h.merchant("m2")
	// Never reached: the harness runs no worker, so the delivery waits.
	h.createSubscription(key, hookBody("http://127.0.0.1:9/hook"))
	secret := "subject-" + uuid.NewString()
	ev := h.publish("m1", "payout.paid", `{"id":"po_1","note":"`+secret+`"}`)

	erase := func(id, body string, header map[string]string) response {
		req := request{Method: http.MethodPost, Path: "/internal/v1/events/" + id + "/erase", Header: header}
		if body != "" {
			req.Body = body
		}
		return h.doInternal(req)
	}
	first := erase(ev.ID, `{"merchant_id":"m1"}`, map[string]string{"Webhookd-Actor": "dpo@example.com"})
	if first.Status != http.StatusOK {
		t.Fatalf("erase: %d %s", first.Status, first.Body)
	}
	got := first.JSON(t)
	if got["event_id"] != ev.ID || got["erased"] != true || got["deliveries"] != 1.0 || got["deliveries_ended"] != 1.0 || got["attempts"] != 0.0 {
		t.Fatalf("erase answered %s", first.Body)
	}
	if again := erase(ev.ID, "", nil); again.Status != http.StatusOK || string(again.Body) != string(first.Body) {
		t.Fatalf("second erase: %d %s, want the first answer %s", again.Status, again.Body, first.Body)
	}

	r := h.do(request{Method: http.MethodGet, Path: "/v1/events/" + ev.ID, Key: key})
	shown := decode[event](t, r)
	want := `{"erased":true,"erased_at":"` + got["erased_at"].(string) + `"}`
	if r.Status != http.StatusOK || string(shown.Payload) != want || strings.Contains(string(r.Body), secret) {
		t.Fatalf("event after erasure: %d %s, want payload %s", r.Status, r.Body, want)
	}
	ds := h.deliveriesOf(key, ev.ID)
	if len(ds) != 1 || ds[0].Status != "erased" || ds[0].NextAttemptAt != nil {
		t.Fatalf("deliveries after erasure: %+v", ds)
	}
	if erased := listAll[delivery](h, key, "/v1/webhook_deliveries?status=erased", 10); len(erased) != 1 {
		t.Fatalf("status=erased lists %d deliveries, want 1", len(erased))
	}

	audit := h.doInternal(request{Method: http.MethodGet, Path: "/internal/v1/audit?merchant_id=m1"})
	var entries page[map[string]any]
	if err := json.Unmarshal(audit.Body, &entries); err != nil || audit.Status != http.StatusOK || len(entries.Data) != 1 ||
		entries.Data[0]["action"] != "event.erased" || entries.Data[0]["actor"] != "internal:dpo@example.com" ||
		entries.Data[0]["target"] != ev.ID {
		t.Fatalf("audit: %d %s", audit.Status, audit.Body)
	}

	for _, tc := range []struct {
		name, id, body string
		header         map[string]string
		status         int
		code           string
	}{
		{"unknown event", uuid.NewString(), "", nil, http.StatusNotFound, "resource_not_found"},
		{"not an id", "evt_1", "", nil, http.StatusNotFound, "resource_not_found"},
		{"another merchant's event", ev.ID, `{"merchant_id":"m2"}`, nil, http.StatusNotFound, "resource_not_found"},
		{"unknown field", ev.ID, `{"merchant":"m1"}`, nil, http.StatusBadRequest, "validation_error"},
		{"merchant id not text", ev.ID, `{"merchant_id":7}`, nil, http.StatusBadRequest, "parameter_invalid"},
		{"actor with spaces", ev.ID, "", map[string]string{"Webhookd-Actor": "drop table"}, http.StatusBadRequest, "parameter_invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := erase(tc.id, tc.body, tc.header)
			if r.Status != tc.status {
				t.Fatalf("%d %s, want %d", r.Status, r.Body, tc.status)
			}
			expectError(t, r, tc.status, tc.code)
		})
	}
}

// TestRetentionDaysSetting: retention_days on the merchant settings route
// takes a whole number of days from 1 to 30 and nothing else, defaults
// to 30, and each change (not a repeat) is one audit entry, newest first.
func TestRetentionDaysSetting(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	put := func(body string) response {
		return h.doInternal(request{Method: http.MethodPut, Path: "/internal/v1/merchants/m_ret", Body: body})
	}
	if r := put(`{}`); r.Status != http.StatusOK || r.JSON(t)["retention_days"] != 30.0 {
		t.Fatalf("new merchant: %d %s, want retention_days 30", r.Status, r.Body)
	}
	for _, bad := range []string{`0`, `31`, `-1`, `2.5`, `1e1`, `"7"`, `null`, `true`, `[7]`, `99999999999999999999`} {
		r := put(`{"retention_days":` + bad + `}`)
		if m := expectError(t, r, http.StatusBadRequest, "parameter_invalid"); m["param"] != "retention_days" {
			t.Errorf("retention_days %s: param %v", bad, m["param"])
		}
	}
	for range 2 {
		if r := put(`{"retention_days":7}`); r.Status != http.StatusOK || r.JSON(t)["retention_days"] != 7.0 {
			t.Fatalf("retention_days 7: %d %s", r.Status, r.Body)
		}
	}
	if r := put(`{"notification_email":"ops@example.com"}`); r.JSON(t)["retention_days"] != 7.0 {
		t.Fatalf("another setting changed the retention: %s", r.Body)
	}
	if r := put(`{"retention_days":3}`); r.Status != http.StatusOK {
		t.Fatalf("retention_days 3: %d %s", r.Status, r.Body)
	}
	audit := h.doInternal(request{Method: http.MethodGet, Path: "/internal/v1/audit?merchant_id=m_ret&limit=1"})
	entries := decode[page[map[string]any]](t, audit)
	if len(entries.Data) != 1 || !entries.HasMore || entries.Data[0]["action"] != "merchant.retention_changed" {
		t.Fatalf("audit page: %s", audit.Body)
	}
	if d, _ := entries.Data[0]["details"].(map[string]any); d["from_days"] != 7.0 || d["to_days"] != 3.0 {
		t.Fatalf("audit details: %s", audit.Body)
	}
	for _, bad := range []string{"", "?merchant_id=m_ret&limit=0", "?merchant_id=m_ret&merchant_id=m2", "?merchant_id=m_ret&kind=x", "?merchant_id=m%00"} {
		r := h.doInternal(request{Method: http.MethodGet, Path: "/internal/v1/audit" + bad})
		if r.Status != http.StatusBadRequest {
			t.Errorf("audit%s: %d %s, want 400", bad, r.Status, r.Body)
		}
	}
}
