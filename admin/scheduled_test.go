package admin_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestScheduledEventPublishListAndCancel publishes an event with
// deliver_at: it is stored at once (202, deliver_at in the answer) and its
// delivery reads and lists as scheduled, due at deliver_at. The merchant
// cancels it (another merchant's cancel is 404), again without harm, and
// the core API's cancel too; an event published for at once cannot be
// cancelled (409).
func TestScheduledEventPublishListAndCancel(t *testing.T) {
	t.Parallel()
	h := newIngestHarness(t)
	key, other := h.merchant("m1"), h.merchant("m2")
	h.createSubscription(key, hookBody("https://example.com/hooks"))
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	id := uuid.NewString()
	r := h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/events", Body: map[string]any{
		"id": id, "merchant_id": "m1", "type": "payout.paid", "payload": map[string]any{"id": "po_1"},
		"deliver_at": at.In(time.FixedZone("", 2*3600)).Format(time.RFC3339)}})
	if r.Status != http.StatusAccepted {
		t.Fatalf("publish: %d %s", r.Status, r.Body)
	}
	if got := r.JSON(t)["deliver_at"]; got != at.Format(time.RFC3339) {
		t.Errorf("deliver_at %v, want %s (UTC)", got, at.Format(time.RFC3339))
	}
	deliveryStatus := func(query string) (int, string) {
		t.Helper()
		l := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_deliveries?" + query, Key: key})
		if l.Status != http.StatusOK {
			t.Fatalf("list: %d %s", l.Status, l.Body)
		}
		data, _ := l.JSON(t)["data"].([]any)
		if len(data) == 0 {
			return 0, ""
		}
		d := data[0].(map[string]any)
		if d["status"] == "scheduled" && d["next_attempt_at"] != at.Format(time.RFC3339) {
			t.Errorf("scheduled delivery's next_attempt_at %v, want deliver_at %s", d["next_attempt_at"], at.Format(time.RFC3339))
		}
		return len(data), d["status"].(string)
	}
	if n, status := deliveryStatus("event_id=" + id); n != 1 || status != "scheduled" {
		t.Fatalf("the event's deliveries: %d, %q; want one scheduled", n, status)
	}
	if n, _ := deliveryStatus("status=scheduled"); n != 1 {
		t.Errorf("status=scheduled lists %d deliveries, want 1", n)
	}
	if n, _ := deliveryStatus("status=pending"); n != 0 {
		t.Errorf("status=pending lists %d deliveries, want 0", n)
	}
	if ev := h.do(request{Method: http.MethodGet, Path: "/v1/events/" + id, Key: key}); ev.JSON(t)["deliver_at"] != at.Format(time.RFC3339) {
		t.Errorf("event read: %s", ev.Body)
	}

	expectError(t, h.do(request{Method: http.MethodPost, Path: "/v1/events/" + id + "/cancel", Key: other}), http.StatusNotFound, "resource_not_found")
	for range 2 {
		c := h.do(request{Method: http.MethodPost, Path: "/v1/events/" + id + "/cancel", Key: key})
		if c.Status != http.StatusOK || c.JSON(t)["id"] != id {
			t.Fatalf("cancel: %d %s", c.Status, c.Body)
		}
	}
	if c := h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/events/" + id + "/cancel"}); c.Status != http.StatusOK {
		t.Fatalf("the core API's cancel: %d %s", c.Status, c.Body)
	}
	if n, status := deliveryStatus("event_id=" + id); n != 1 || status != "cancelled" {
		t.Fatalf("after the cancel: %d, %q; want one cancelled", n, status)
	}
	if n, _ := deliveryStatus("status=cancelled"); n != 1 {
		t.Errorf("status=cancelled lists %d deliveries, want 1", n)
	}

	now := uuid.NewString()
	if r := h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/events", Body: map[string]any{
		"id": now, "merchant_id": "m1", "type": "payout.paid", "payload": map[string]any{}}}); r.Status != http.StatusAccepted {
		t.Fatalf("publish: %d %s", r.Status, r.Body)
	}
	expectError(t, h.do(request{Method: http.MethodPost, Path: "/v1/events/" + now + "/cancel", Key: key}), http.StatusConflict, "conflict")
	expectError(t, h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/events/" + uuid.NewString() + "/cancel"}),
		http.StatusNotFound, "resource_not_found")
	expectError(t, h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/events/po_1/cancel"}),
		http.StatusNotFound, "resource_not_found")
}

// TestPublishRefusesBadDeliverAt: a deliver_at that is not an RFC 3339
// timestamp, in the past, now, or more than 30 days ahead is 400 naming
// deliver_at, on the single and the batch route, and stores nothing.
func TestPublishRefusesBadDeliverAt(t *testing.T) {
	t.Parallel()
	h := newIngestHarness(t)
	h.merchant("m1")
	for _, tc := range []struct {
		name string
		at   any
	}{
		{"not a timestamp", "tomorrow"},
		{"empty", ""},
		{"a date alone", "2030-01-01"},
		{"no offset", "2030-01-01T10:00:00"},
		{"a month 13", "2030-13-01T10:00:00Z"},
		{"very long", "2030-01-01T10:00:00." + strings.Repeat("0", 100) + "Z"},
		{"in the past", time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)},
		{"more than 30 days ahead", time.Now().Add(31 * 24 * time.Hour).UTC().Format(time.RFC3339)},
		{"a number", 1893456000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			event := map[string]any{"merchant_id": "m1", "type": "payout.paid", "payload": map[string]any{}, "deliver_at": tc.at}
			m := expectError(t, h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/events", Body: event}),
				http.StatusBadRequest, "parameter_invalid")
			if m["param"] != "deliver_at" {
				t.Errorf("param %v, want deliver_at", m["param"])
			}
			m = expectError(t, h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/events/batch",
				Body: map[string]any{"events": []any{event}}}), http.StatusBadRequest, "parameter_invalid")
			if m["param"] != "events[0].deliver_at" {
				t.Errorf("batch param %v, want events[0].deliver_at", m["param"])
			}
		})
	}
	if r := h.do(request{Method: http.MethodGet, Path: "/v1/events", Key: h.merchant("m1")}); strings.Contains(string(r.Body), `"id"`) {
		t.Errorf("events stored: %s", r.Body)
	}
}
