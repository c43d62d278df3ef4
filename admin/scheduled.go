package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
)

// canceller cancels a scheduled event's deliveries that have not started
// (the store's Events is one).
type canceller interface {
	CancelScheduled(ctx context.Context, merchantID string, id uuid.UUID) (store.Event, []store.CancelledDelivery, error)
}

// scheduledHandlers serve the cancel of a scheduled event: the core API's
// POST /internal/v1/events/{id}/cancel (any merchant's event) and the
// merchant's POST /v1/events/{id}/cancel (its own only). Both answer 200
// with the event; its deliveries read cancelled.
type scheduledHandlers struct {
	events canceller
}

// cancelForMerchant is POST /v1/events/{id}/cancel.
func (h scheduledHandlers) cancelForMerchant(w http.ResponseWriter, r *http.Request) error {
	return h.cancel(w, r, principalOf(r.Context()).Merchant.ID)
}

// cancelAny is POST /internal/v1/events/{id}/cancel.
func (h scheduledHandlers) cancelAny(w http.ResponseWriter, r *http.Request) error {
	return h.cancel(w, r, "")
}

// cancel cancels event {id} of merchantID ("" for any merchant).
func (h scheduledHandlers) cancel(w http.ResponseWriter, r *http.Request, merchantID string) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	ev, _, err := h.events.CancelScheduled(r.Context(), merchantID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, eventView(ev))
	return nil
}

// maxDeliverAtLength bounds the deliver_at text parsed: an RFC 3339
// timestamp with nanoseconds and an offset is 35 characters.
const maxDeliverAtLength = 40

// parseDeliverAt reads a published event's deliver_at: absent (nil) is no
// schedule; anything but an RFC 3339 timestamp is a 400 naming the field.
// Whether it is ahead and not too far is the publisher's rule.
func parseDeliverAt(s *string) (*time.Time, error) {
	if s == nil {
		return nil, nil
	}
	if len(*s) <= maxDeliverAtLength {
		if at, err := time.Parse(time.RFC3339, *s); err == nil {
			at = at.UTC()
			return &at, nil
		}
	}
	return nil, invalid.Value("deliver_at", "deliver_at_invalid",
		"deliver_at must be an RFC 3339 timestamp, such as 2026-12-01T09:00:00Z.")
}
