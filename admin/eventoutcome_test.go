package admin_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestEventsByDeliveryOutcome: ?delivery_status= keeps the events with a
// delivery in that status, pages through them with the cursor, and refuses
// a status that is none.
func TestEventsByDeliveryOutcome(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m_outcome")
	sub := decode[subscription](t, h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
		Body: hookBody("https://example.com/hook")}))
	id := uuid.MustParse(sub.ID)
	now := time.Now().UTC()
	// Three events whose delivery succeeded, two failed for good, one
	// still pending (no attempt yet).
	for range 3 {
		recordDelivery(t, h.store, "m_outcome", id, false, attemptAt{now, true})
	}
	for range 2 {
		recordDelivery(t, h.store, "m_outcome", id, false, attemptAt{now, false})
	}
	recordDelivery(t, h.store, "m_outcome", id, false)

	for _, c := range []struct {
		status string
		want   int
	}{{"succeeded", 3}, {"failed", 2}, {"pending", 1}, {"skipped", 0}} {
		t.Run(c.status, func(t *testing.T) {
			events := listAll[event](h, key, "/v1/events?delivery_status="+c.status, 1)
			if len(events) != c.want {
				t.Fatalf("%d events, want %d", len(events), c.want)
			}
			for _, e := range events {
				ds := h.deliveriesOf(key, e.ID)
				if len(ds) != 1 || ds[0].Status != c.status {
					t.Errorf("event %s listed, its deliveries %+v", e.ID, ds)
				}
			}
		})
	}
	if all := listAll[event](h, key, "/v1/events", 10); len(all) != 6 {
		t.Errorf("%d events unfiltered, want 6", len(all))
	}
	expectError(t, h.do(request{Method: http.MethodGet, Path: "/v1/events?delivery_status=retrying", Key: key}),
		http.StatusBadRequest, "parameter_invalid")
}
