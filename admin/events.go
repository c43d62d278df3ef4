package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/go-chi/chi/v5"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/producer"
)

// eventPublisher publishes an event (the Publisher is one).
type eventPublisher interface {
	Publish(ctx context.Context, e producer.Event) (ev store.Event, created bool, err error)
}

// eventReads is what the event routes read.
type eventReads interface {
	// GetEvent reads the merchant's event.
	GetEvent(ctx context.Context, merchantID string, id uuid.UUID) (store.Event, error)
	// ListEvents reads a page of the merchant's events.
	ListEvents(ctx context.Context, merchantID string, f store.EventFilter, p store.Page) ([]store.Event, *store.Cursor, error)
}

// eventHandlers serve a merchant's events: /v1/events, the catalogue of
// event types (GET /v1/event_types) and the sandbox's trigger (POST
// /v1/event_types/{type}/trigger). They are separate from the deliveries
// because they read and make events, judged by the catalogue, where the
// deliveries' routes act on the pipeline's work.
type eventHandlers struct {
	// reads is where list and get read (the replica when there is one).
	reads eventReads
	pages pager
	// types is the catalogue of the configured event types, which judges
	// every event type the API is given.
	types     catalogue.Catalogue
	publisher eventPublisher
	// environment is "sandbox" or "production": only the sandbox
	// triggers.
	environment string
}

// eventJSON is the Event resource (DESIGN.md "Resources"). Payload and
// CreatedAt are cut from the stored envelope bytes, never re-serialised, so
// that the merchant reads exactly what was delivered.
type eventJSON struct {
	ID         uuid.UUID       `json:"id"`
	Type       string          `json:"type"`
	APIVersion string          `json:"api_version"`
	Payload    json.RawMessage `json:"payload"`
	CreatedAt  json.RawMessage `json:"created_at"`
	// DeliverAt is a scheduled event's; absent for one delivered at once.
	DeliverAt *time.Time `json:"deliver_at,omitempty"`
}

// envelope is the part of a stored envelope that the Event resource shows.
type envelope struct {
	Payload json.RawMessage `json:"payload"`
	Date    json.RawMessage `json:"date"`
}

// readEnvelope reads the payload and date of a stored envelope. The
// one-pass decoder reads every envelope webhookd writes (one object, each
// key once, in its case, UTF-8 throughout) in a pass over its bytes, where
// encoding/json takes three; anything else it refuses is read by
// encoding/json, as it was before.
func readEnvelope(body []byte) (envelope, bool) {
	var env envelope
	if jsonv2.Unmarshal(body, &env) == nil {
		return env, true
	}
	env = envelope{}
	return env, json.Unmarshal(body, &env) == nil
}

// eventView renders a stored event. An envelope that does not parse cannot
// happen (webhookd wrote it); should it, the columns still answer.
func eventView(e store.Event) eventJSON {
	out := eventJSON{ID: e.ID, Type: e.Type, APIVersion: e.APIVersion, DeliverAt: e.DeliverAt}
	if env, ok := readEnvelope(e.Body); ok {
		out.Payload, out.CreatedAt = env.Payload, env.Date
	}
	if len(out.Payload) == 0 {
		out.Payload = json.RawMessage("null")
	}
	if len(out.CreatedAt) == 0 {
		out.CreatedAt, _ = json.Marshal(e.CreatedAt.UTC())
	}
	return out
}

// pathID reads the {id} of a route (see parseID).
func pathID(r *http.Request) (uuid.UUID, error) {
	return parseID(pathParam(r, "id"))
}

// pathParam is the route parameter name, percent-decoded whatever the case
// of its hex digits. chi matches on r.URL.RawPath when net/url kept one
// (the path holds an escape other than the one it would write itself, such
// as %c3 or %2F) and on the decoded r.URL.Path otherwise, so chi.URLParam
// alone would give m%c3%a4x as sent but m%C3%A4x decoded: two ids for one.
func pathParam(r *http.Request, name string) string {
	v := chi.URLParam(r, name)
	if r.URL.RawPath == "" {
		return v
	}
	decoded, err := url.PathUnescape(v)
	if err != nil {
		return v // net/url checked RawPath's escapes already: not reached
	}
	return decoded
}

// uuidFilter parses a query parameter holding a UUID. Present, it must
// hold one: an empty value is no UUID.
func uuidFilter(r *http.Request, name string) (*uuid.UUID, error) {
	if !r.URL.Query().Has(name) {
		return nil, nil
	}
	id, err := uuid.Parse(r.URL.Query().Get(name))
	if err != nil {
		return nil, errInvalid(name, invalid.MustBeUUID(name))
	}
	return &id, nil
}

// list answers a page of the merchant's events, newest first.
func (h eventHandlers) list(w http.ResponseWriter, r *http.Request) error {
	p, err := h.pages.listPage(r, "event_type", "created_at.gte", "delivery_status")
	if err != nil {
		return err
	}
	f := store.EventFilter{Type: r.URL.Query().Get("event_type")}
	if f.DeliveryStatus, err = deliveryStatusFilter(r, "delivery_status"); err != nil {
		return err
	}
	if r.URL.Query().Has("event_type") {
		if bad := h.types.CheckFilter("event_type", f.Type); bad != nil {
			return bad
		}
	}
	if f.CreatedGTE, err = timeFilter(r, "created_at.gte"); err != nil {
		return err
	}
	events, resume, err := h.reads.ListEvents(r.Context(), principalOf(r.Context()).Merchant.ID, f, p)
	if err != nil {
		return err
	}
	writeList(h.pages, w, r, p, events, resume,
		func(e store.Event) store.Cursor { return store.Cursor{CreatedAt: e.CreatedAt, ID: e.ID.String()} },
		eventView)
	return nil
}

// get answers one event. ?snapshot=true asks for the payload as it was
// published, which is what every read answers: an event's stored envelope
// is never changed after it is written, so the plain read already is that
// snapshot, and the parameter is accepted (and checked) for clients written
// against engines where the two differ.
func (h eventHandlers) get(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if _, err := boolQuery(r, "snapshot"); err != nil {
		return err
	}
	e, err := h.reads.GetEvent(r.Context(), principalOf(r.Context()).Merchant.ID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, eventView(e))
	return nil
}
