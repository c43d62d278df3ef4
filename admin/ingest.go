package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/webhookd/webhookd/store"
)

// Publisher is what the HTTP surfaces need of the delivery pipeline.
type Publisher interface {
	// Publish stores the event and its deliveries in one transaction and
	// schedules them; created is false when the event id already existed.
	Publish(ctx context.Context, e store.NewEvent) (ev store.Event, created bool, err error)
	// Redeliver enqueues one immediate manual attempt of a delivery, which
	// a worker makes and appends to its attempts.
	Redeliver(ctx context.Context, merchantID string, deliveryID uuid.UUID) (store.Delivery, error)
	// Recover replays the subscription's deliveries that failed for good
	// since a time, one manual attempt each, and says how many.
	Recover(ctx context.Context, merchantID string, subscriptionID uuid.UUID, since time.Time) (int, error)
	// SendTestEvent stores a ping.test event for one subscription and
	// schedules its delivery.
	SendTestEvent(ctx context.Context, merchantID string, subscriptionID uuid.UUID) (store.Delivery, error)
}

// pingTestType is reserved for send_test_event: producers cannot publish it.
const pingTestType = "ping.test"

// maxBatchEvents bounds one batch publish, so that one request stays well
// inside the request timeout.
const maxBatchEvents = 100

// ingestRoutes are the internal publishing routes.
func (s *Server) ingestRoutes(r chi.Router) {
	r.Post("/events", s.ingestEvent)
	r.Post("/events/batch", s.ingestBatch)
}

// ingestRequest is the body of POST /internal/v1/events, one element of a
// batch. Pointers tell a missing field from an empty one.
type ingestRequest struct {
	ID         *string         `json:"id"`
	MerchantID *string         `json:"merchant_id"`
	Type       *string         `json:"type"`
	Payload    json.RawMessage `json:"payload"`
	APIVersion *string         `json:"api_version"`
}

// ingestEvent publishes one event: 202 once it is durable, 200 when the id
// was already published (nothing changes).
func (s *Server) ingestEvent(w http.ResponseWriter, r *http.Request) {
	var req ingestRequest
	if err := decodeJSON(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	e, err := s.validateIngest(req, "")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ev, created, err := s.cfg.Publisher.Publish(r.Context(), e)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusAccepted
	}
	writeJSON(w, status, eventView(ev))
}

// ingestBatch publishes up to maxBatchEvents events: all are validated
// before any is published, then each is published in order. The answer is
// 202 if any event was new and 200 if all were already published; data
// lists the events in request order. A failure part-way answers the error:
// the events before it are stored, and retrying the batch is safe because
// publishing is idempotent on the id.
func (s *Server) ingestBatch(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Events []ingestRequest `json:"events"`
	}
	if err := decodeJSON(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	switch {
	case req.Events == nil:
		s.writeError(w, r, errMissing("events"))
		return
	case len(req.Events) == 0 || len(req.Events) > maxBatchEvents:
		s.writeError(w, r, errInvalid("events", fmt.Sprintf("events must hold 1 to %d events.", maxBatchEvents)))
		return
	}
	events := make([]store.NewEvent, len(req.Events))
	for i, e := range req.Events {
		ne, err := s.validateIngest(e, fmt.Sprintf("events[%d].", i))
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		events[i] = ne
	}
	status := http.StatusOK
	data := make([]eventJSON, 0, len(events))
	for _, e := range events {
		ev, created, err := s.cfg.Publisher.Publish(r.Context(), e)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if created {
			status = http.StatusAccepted
		}
		data = append(data, eventView(ev))
	}
	writeJSON(w, status, map[string]any{"data": data})
}

// validateIngest checks one event; prefix qualifies the parameter names in
// errors (for batches).
func (s *Server) validateIngest(req ingestRequest, prefix string) (store.NewEvent, error) {
	var e store.NewEvent
	if req.MerchantID == nil || *req.MerchantID == "" {
		return e, errMissing(prefix + "merchant_id")
	}
	if err := checkMerchantID(prefix+"merchant_id", *req.MerchantID); err != nil {
		return e, err
	}
	if req.Type == nil || *req.Type == "" {
		return e, errMissing(prefix + "type")
	}
	if *req.Type == pingTestType || !slices.Contains(s.cfg.EventTypes, *req.Type) {
		return e, errInvalid(prefix+"type", fmt.Sprintf("Unknown event type %s; %s is reserved for send_test_event.",
			quote(*req.Type), pingTestType))
	}
	payload := bytes.TrimSpace(req.Payload)
	if len(payload) == 0 || bytes.Equal(payload, []byte("null")) {
		return e, errMissing(prefix + "payload")
	}
	if payload[0] != '{' {
		return e, errInvalid(prefix+"payload", "payload must be a JSON object.")
	}
	if s.cfg.MaxPayloadBytes > 0 && len(payload) > s.cfg.MaxPayloadBytes {
		tooLarge := *errPayloadTooLarge
		tooLarge.Message = fmt.Sprintf("payload is larger than %d bytes.", s.cfg.MaxPayloadBytes)
		return e, tooLarge.withParam(prefix + "payload")
	}
	if req.ID != nil {
		id, err := uuid.Parse(*req.ID)
		if err != nil || len(*req.ID) != 36 {
			return e, errInvalid(prefix+"id", "id must be a UUID.")
		}
		e.ID = &id
	}
	if req.APIVersion != nil {
		if !s.cfg.Versions.Usable(*req.APIVersion, s.cfg.Now()) {
			return e, errInvalid(prefix+"api_version", "Unknown or sunset api_version "+quote(*req.APIVersion)+".")
		}
		e.APIVersion = *req.APIVersion
	}
	e.MerchantID, e.Type, e.Payload = *req.MerchantID, *req.Type, payload
	return e, nil
}
