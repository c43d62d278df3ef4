package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
)

// deliveryActions are what the delivery routes ask of the pipeline (the
// Publisher is one): attempts made on a merchant's demand.
type deliveryActions interface {
	Redeliver(ctx context.Context, merchantID string, deliveryID uuid.UUID) (store.Delivery, error)
	Recover(ctx context.Context, merchantID string, subscriptionID uuid.UUID, since time.Time) (int, error)
	SendTestEvent(ctx context.Context, merchantID string, subscriptionID uuid.UUID) (store.Delivery, error)
}

// deliveryReads is what the delivery routes read.
type deliveryReads interface {
	// GetDelivery reads the merchant's delivery.
	GetDelivery(ctx context.Context, merchantID string, id uuid.UUID) (store.Delivery, error)
	// ListDeliveries reads a page of the merchant's deliveries.
	ListDeliveries(ctx context.Context, merchantID string, f store.DeliveryFilter, p store.Page) ([]store.Delivery, *store.Cursor, error)
}

// deliveryHandlers serve a merchant's deliveries: /v1/webhook_deliveries,
// a redelivery, the bulk recovery of a subscription's failed deliveries,
// and send_test_event. They are separate from the events because they act
// on the pipeline's work: every route but the reads enqueues an attempt.
type deliveryHandlers struct {
	// reads is where list and get read (the replica when there is one).
	reads   deliveryReads
	pages   pager
	actions deliveryActions
	clock   clock.Clock
}

// deliveryJSON is the Webhook delivery resource (DESIGN.md "Resources").
type deliveryJSON struct {
	ID             uuid.UUID            `json:"id"`
	Type           string               `json:"type"`
	EventID        uuid.UUID            `json:"event_id"`
	EventType      string               `json:"event_type"`
	SubscriptionID uuid.UUID            `json:"subscription_id"`
	Status         store.DeliveryStatus `json:"status"`
	Test           bool                 `json:"test"`
	AttemptCount   int                  `json:"attempt_count"`
	NextAttemptAt  *time.Time           `json:"next_attempt_at"`
	Attempts       []attemptJSON        `json:"attempts"`
	CreatedAt      time.Time            `json:"created_at"`
	UpdatedAt      time.Time            `json:"updated_at"`
}

// attemptJSON is one entry of a delivery's attempts.
type attemptJSON struct {
	Number       int                 `json:"number"`
	Status       store.AttemptStatus `json:"status"`
	Trigger      store.Trigger       `json:"trigger"`
	HTTPStatus   *int                `json:"http_status"`
	Error        *string             `json:"error"`
	DurationMS   int                 `json:"duration_ms"`
	ResponseBody string              `json:"response_body"`
	AttemptedAt  time.Time           `json:"attempted_at"`
	// RequestHeaders are the headers the request carried, credentials
	// masked; null for attempts recorded without them.
	RequestHeaders map[string]string `json:"request_headers"`
	// BatchID is the webhook-id of the batch that carried the attempt;
	// null when it went alone.
	BatchID *string `json:"batch_id"`
	// TransformationVersion is the version of the subscription's
	// transformation the attempt ran; null when none ran.
	TransformationVersion *int `json:"transformation_version"`
	// RequestBody is the body a transformed attempt sent; null when the
	// attempt sent the event's envelope as it is.
	RequestBody *string `json:"request_body"`
}

// deliveryView renders a stored delivery.
func deliveryView(d store.Delivery) deliveryJSON {
	out := deliveryJSON{
		ID: d.ID, Type: "webhook_delivery", EventID: d.EventID, EventType: d.EventType,
		SubscriptionID: d.SubscriptionID, Status: d.Status, Test: d.Test, AttemptCount: d.AttemptCount,
		NextAttemptAt: utcPtr(d.NextAttemptAt), Attempts: make([]attemptJSON, 0, len(d.Attempts)),
		CreatedAt: d.CreatedAt.UTC(), UpdatedAt: d.UpdatedAt.UTC(),
	}
	for _, a := range d.Attempts {
		out.Attempts = append(out.Attempts, attemptJSON{
			Number: a.Number, Status: a.Status, Trigger: a.Trigger, HTTPStatus: a.HTTPStatus, Error: a.Error,
			DurationMS: a.DurationMS, ResponseBody: a.ResponseBody, AttemptedAt: a.AttemptedAt.UTC(),
			RequestHeaders: a.RequestHeaders, BatchID: a.BatchID,
			TransformationVersion: a.TransformationVersion, RequestBody: a.RequestBody,
		})
	}
	return out
}

// deliveryStatuses are the values of the status filter.
var deliveryStatuses = map[store.DeliveryStatus]bool{
	store.DeliveryPending: true, store.DeliverySucceeded: true, store.DeliveryFailed: true, store.DeliverySkipped: true,
	store.DeliveryErased:    true,
	store.DeliveryScheduled: true, store.DeliveryCancelled: true,
}

// list answers a page of the merchant's deliveries, newest first.
func (h deliveryHandlers) list(w http.ResponseWriter, r *http.Request) error {
	p, err := h.pages.listPage(r, "status", "created_at.gte", "event_id", "subscription_id")
	if err != nil {
		return err
	}
	f, err := deliveryFilter(r)
	if err != nil {
		return err
	}
	ds, resume, err := h.reads.ListDeliveries(r.Context(), principalOf(r.Context()).Merchant.ID, f, p)
	if err != nil {
		return err
	}
	writeList(h.pages, w, r, p, ds, resume,
		func(d store.Delivery) store.Cursor { return store.Cursor{CreatedAt: d.CreatedAt, ID: d.ID.String()} },
		deliveryView)
	return nil
}

// deliveryStatusFilter reads a query parameter holding a delivery status;
// absent, it is "" (no filter).
func deliveryStatusFilter(r *http.Request, name string) (store.DeliveryStatus, error) {
	s := store.DeliveryStatus(r.URL.Query().Get(name))
	if r.URL.Query().Has(name) && !deliveryStatuses[s] {
		return "", errInvalid(name, name+" must be one of pending, scheduled, succeeded, failed, skipped, cancelled, erased.")
	}
	return s, nil
}

// deliveryFilter reads the list filters; a bad value is 400 naming it.
func deliveryFilter(r *http.Request) (store.DeliveryFilter, error) {
	var f store.DeliveryFilter
	var err error
	if f.Status, err = deliveryStatusFilter(r, "status"); err != nil {
		return f, err
	}
	if f.CreatedGTE, err = timeFilter(r, "created_at.gte"); err != nil {
		return f, err
	}
	if f.EventID, err = uuidFilter(r, "event_id"); err != nil {
		return f, err
	}
	if f.SubscriptionID, err = uuidFilter(r, "subscription_id"); err != nil {
		return f, err
	}
	return f, nil
}

// get answers one delivery with its attempts.
func (h deliveryHandlers) get(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	d, err := h.reads.GetDelivery(r.Context(), principalOf(r.Context()).Merchant.ID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, deliveryView(d))
	return nil
}

// redeliver asks the workers for one immediate manual attempt of a
// delivery, whatever its status, and answers 202 with the delivery as it is
// now: the attempt appears in its attempts (trigger manual) within moments.
// The API never dials the receiver itself; another merchant's delivery is
// 404, a disabled or deleted subscription 409.
func (h deliveryHandlers) redeliver(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	d, err := h.actions.Redeliver(r.Context(), principalOf(r.Context()).Merchant.ID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, deliveryView(d))
	return nil
}

// recoveryView is the answer of a bulk replay.
type recoveryView struct {
	Type           string    `json:"type"`
	SubscriptionID string    `json:"subscription_id"`
	Since          time.Time `json:"since"`
	Deliveries     int       `json:"deliveries"`
}

// recoverFailed replays the subscription's deliveries that failed for
// good since the body's `since` (at most 30 days back: older deliveries are
// gone): 202 with how many manual attempts were enqueued.
func (h deliveryHandlers) recoverFailed(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var in struct {
		Since *string `json:"since"`
	}
	if err := decodeJSON(r, &in); err != nil {
		return err
	}
	if in.Since == nil {
		return errMissing("since")
	}
	since, ok := parseTimestamp(*in.Since)
	if !ok {
		return errInvalid("since", "since must be an RFC 3339 timestamp such as 2026-05-01T00:00:00Z.")
	}
	if since.After(h.clock.Now()) {
		return errInvalid("since", "since must not be in the future.")
	}
	n, err := h.actions.Recover(r.Context(), principalOf(r.Context()).Merchant.ID, id, since)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, recoveryView{Type: "webhook_recovery", SubscriptionID: id.String(),
		Since: since.UTC(), Deliveries: n})
	return nil
}
