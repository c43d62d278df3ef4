package admin_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/webhookd/webhookd/admin"
)

func TestEventsFiltersAndPages(t *testing.T) {
	t.Parallel()
	h, _ := newPipelineHarness(t)
	key := h.merchant("m1")
	var paid, failed []event
	for range 5 {
		paid = append(paid, h.publish("m1", "payout.paid", `{"status":"paid"}`))
	}
	for range 2 {
		failed = append(failed, h.publish("m1", "payout.failed", `{"status":"failed"}`))
	}
	h.publish("m2", "payout.paid", `{"status":"paid"}`)

	all := listAll[event](h, key, "/v1/events", 2)
	if len(all) != 7 {
		t.Fatalf("walked %d events over pages of 2, want m1's 7", len(all))
	}
	seen := map[string]bool{}
	for i, e := range all {
		if seen[e.ID] {
			t.Fatalf("event %s listed twice", e.ID)
		}
		seen[e.ID] = true
		if i > 0 && e.CreatedAt > all[i-1].CreatedAt {
			t.Fatalf("not newest first at %d: %s after %s", i, e.CreatedAt, all[i-1].CreatedAt)
		}
	}

	tests := []struct {
		query string
		want  []event
	}{
		{"event_type=payout.failed", []event{failed[1], failed[0]}},
		{"event_type=payout.paid&created_at.gte=" + url.QueryEscape(paid[3].CreatedAt), []event{paid[4], paid[3]}},
		{"created_at.gte=" + url.QueryEscape(failed[0].CreatedAt), []event{failed[1], failed[0]}},
		{"event_type=deposit.received", nil},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			got := listAll[event](h, key, "/v1/events?"+tt.query, 1)
			if len(got) != len(tt.want) {
				t.Fatalf("%d events, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if got[i].ID != tt.want[i].ID {
					t.Fatalf("event %d is %s, want %s", i, got[i].ID, tt.want[i].ID)
				}
			}
		})
	}

	// A cursor is bound to its filters.
	r := h.do(request{Method: http.MethodGet, Path: "/v1/events?limit=1&event_type=payout.paid", Key: key})
	p := decode[page[event]](t, r)
	if !p.HasMore || p.NextCursor == nil {
		t.Fatalf("first page %s", r.Body)
	}
	r = h.do(request{Method: http.MethodGet, Path: "/v1/events?limit=1&event_type=payout.failed&cursor=" + url.QueryEscape(*p.NextCursor), Key: key})
	expectError(t, r, http.StatusBadRequest, "cursor_mismatch")

	for _, q := range []string{"event_type=payout.exploded", "created_at.gte=2026-13-01", "limit=101", "cursor=garbage"} {
		r := h.do(request{Method: http.MethodGet, Path: "/v1/events?" + q, Key: key})
		if r.Status != http.StatusBadRequest {
			t.Fatalf("%s: %d %s", q, r.Status, r.Body)
		}
		m := r.JSON(t)
		if name, _, _ := cutEq(q); m["param"] != name {
			t.Errorf("%s: param %v, want %s", q, m["param"], name)
		}
	}
}

func TestEventReadsTheStoredEnvelope(t *testing.T) {
	t.Parallel()
	h, _ := newPipelineHarness(t)
	key := h.merchant("m1")
	readOnly := h.merchant("m1", admin.ScopeRead)
	writeOnly := h.merchant("m1", admin.ScopeWrite)
	otherKey := h.merchant("m2")
	rcv := newHookReceiver(t, http.StatusOK)
	h.createSubscription(key, hookBody(rcv.URL))
	payload := `{"id":"po_1","amount":"10.50","note":"<café & co>","nested":{"list":[1,2.50,null]}}`
	published := h.publish("m1", "payout.paid", payload)
	d := h.deliveriesOf(key, published.ID)[0]
	h.waitDelivery(key, d.ID, "succeeded", settled)

	r := h.do(request{Method: http.MethodGet, Path: "/v1/events/" + published.ID, Key: readOnly})
	if r.Status != http.StatusOK {
		t.Fatalf("get: %d %s", r.Status, r.Body)
	}
	got := decode[event](t, r)
	if got.ID != published.ID || got.Type != "payout.paid" || got.APIVersion != admin.DefaultVersion {
		t.Fatalf("event %+v", got)
	}
	if string(got.Payload) != payload {
		t.Errorf("payload %s, want the published bytes %s", got.Payload, payload)
	}

	// What the receiver got is what the merchant reads: payload bytes and
	// date.
	var delivered struct {
		Payload json.RawMessage `json:"payload"`
		Date    string          `json:"date"`
	}
	if err := json.Unmarshal(rcv.requests()[0].Body, &delivered); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(delivered.Payload, got.Payload) || delivered.Date != got.CreatedAt {
		t.Errorf("delivered payload %s date %s; event resource %s %s", delivered.Payload, delivered.Date, got.Payload, got.CreatedAt)
	}

	expectError(t, h.do(request{Method: http.MethodGet, Path: "/v1/events/" + published.ID, Key: writeOnly}),
		http.StatusForbidden, "insufficient_scope")
	for _, id := range []string{published.ID, "0190a000-0000-7000-8000-000000000000", "po_1"} {
		expectError(t, h.do(request{Method: http.MethodGet, Path: "/v1/events/" + id, Key: otherKey}),
			http.StatusNotFound, "resource_not_found")
	}
}
