package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"time"

	"github.com/webhookd/webhookd/internal/merchants"
	"github.com/webhookd/webhookd/internal/store"
)

// eventEraser erases an event's content (store.Erasures is one).
type eventEraser interface {
	EraseEvent(ctx context.Context, req store.EraseRequest) (store.Erasure, error)
}

// auditReader reads the audit trail (store.Audit is one).
type auditReader interface {
	ListAudit(ctx context.Context, merchantID string, p store.Page) ([]store.AuditEntry, error)
}

// erasureHandlers serve the core API's compliance routes on the internal
// listener: POST /internal/v1/events/{id}/erase and GET
// /internal/v1/audit (docs/erasure.md).
type erasureHandlers struct {
	eraser eventEraser
	audit  auditReader
	pages  pager
}

// erasureJSON answers an erasure: what it replaced, and when. Erasing
// again answers the same.
type erasureJSON struct {
	EventID         string    `json:"event_id"`
	MerchantID      string    `json:"merchant_id"`
	Erased          bool      `json:"erased"`
	ErasedAt        time.Time `json:"erased_at"`
	Deliveries      int       `json:"deliveries"`
	DeliveriesEnded int       `json:"deliveries_ended"`
	Attempts        int       `json:"attempts"`
}

// erase erases an event's content. The body is optional: merchant_id,
// when sent, must be the event's merchant (another merchant's event is
// 404, as an unknown one).
func (h erasureHandlers) erase(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var req struct {
		MerchantID *string `json:"merchant_id"`
	}
	if len(requestBody(r)) > 0 {
		if err := decodeJSON(r, &req); err != nil {
			return err
		}
	}
	er := store.EraseRequest{EventID: id}
	if req.MerchantID != nil {
		if err := merchants.CheckID("merchant_id", *req.MerchantID); err != nil {
			return err
		}
		er.MerchantID = *req.MerchantID
	}
	if er.Actor, err = internalActor(r); err != nil {
		return err
	}
	e, err := h.eraser.EraseEvent(r.Context(), er)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, erasureJSON{EventID: e.EventID.String(), MerchantID: e.MerchantID, Erased: true,
		ErasedAt: e.ErasedAt.UTC().Truncate(time.Second), Deliveries: e.Deliveries, DeliveriesEnded: e.DeliveriesEnded, Attempts: e.Attempts})
	return nil
}

// auditEntryJSON is one line of the audit trail.
type auditEntryJSON struct {
	ID         string          `json:"id"`
	MerchantID string          `json:"merchant_id"`
	Actor      string          `json:"actor"`
	Action     string          `json:"action"`
	Target     string          `json:"target"`
	Details    json.RawMessage `json:"details"`
	CreatedAt  time.Time       `json:"created_at"`
}

// listAudit answers a page of one merchant's audit trail, newest first.
func (h erasureHandlers) listAudit(w http.ResponseWriter, r *http.Request) error {
	p, err := h.pages.listPage(r, "merchant_id")
	if err != nil {
		return err
	}
	merchantID := r.URL.Query().Get("merchant_id")
	if !r.URL.Query().Has("merchant_id") {
		return errMissing("merchant_id")
	}
	if err := merchants.CheckID("merchant_id", merchantID); err != nil {
		return err
	}
	entries, err := h.audit.ListAudit(r.Context(), merchantID, p)
	if err != nil {
		return err
	}
	writeList(h.pages, w, r, p, entries, nil, func(e store.AuditEntry) store.Cursor {
		return store.Cursor{CreatedAt: e.CreatedAt, ID: e.ID.String()}
	}, func(e store.AuditEntry) auditEntryJSON {
		details, _ := json.Marshal(e.Details)
		return auditEntryJSON{ID: e.ID.String(), MerchantID: e.MerchantID, Actor: e.Actor, Action: e.Action,
			Target: e.Target, Details: details, CreatedAt: e.CreatedAt.UTC()}
	})
	return nil
}

// actorName is what the Webhookd-Actor header may hold: a person's or a
// service's name as the core API knows it, never free text.
var actorName = regexp.MustCompile(`^[A-Za-z0-9._@:+-]{1,100}$`)

// internalActor is who makes an internal change, for the audit trail:
// "internal" (the ingest token's holder), followed by the name the core
// API gives in Webhookd-Actor when it gives one.
func internalActor(r *http.Request) (string, error) {
	name := r.Header.Get("Webhookd-Actor")
	if name == "" {
		return "internal", nil
	}
	if !actorName.MatchString(name) {
		return "", errInvalid("Webhookd-Actor", "Webhookd-Actor must be 1 to 100 letters, digits or . _ @ : + -.")
	}
	return "internal:" + name, nil
}
