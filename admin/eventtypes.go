package admin

import (
	"net/http"
	"slices"

	"github.com/go-chi/chi/v5"

	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/invalid"
)

// listTypes answers GET /v1/event_types: the types a subscription may
// name, with what each means and an example payload, for the portal's
// event picker and for merchants writing handlers. It answers the whole
// catalogue in one page, in the list envelope: it is small and fixed by
// the configuration, so has_more is always false and next_cursor null. It takes no parameter and ignores
// any it is given (limit included): every answer is the whole catalogue.
// It leaves each type's schema out, to stay light for the picker: GET
// /v1/event_types/{name} shows one, GET /v1/asyncapi.json all of them.
func (h eventHandlers) listTypes(w http.ResponseWriter, _ *http.Request) error {
	entries := h.types.Entries()
	for i := range entries {
		entries[i].Schema = nil
	}
	writeJSON(w, http.StatusOK, list[catalogue.EventType]{Data: entries})
	return nil
}

// getType answers GET /v1/event_types/{name}: one type of the catalogue
// (ping.test included) with the JSON Schema of its payload; a name the
// catalogue does not hold is 404.
func (h eventHandlers) getType(w http.ResponseWriter, r *http.Request) error {
	name := chi.URLParam(r, "type")
	entries := h.types.Entries()
	i := slices.IndexFunc(entries, func(et catalogue.EventType) bool { return et.Name == name })
	if i < 0 {
		return newError(http.StatusNotFound, catInvalidRequest, "resource_not_found",
			"Unknown event type "+invalid.Quote(name)+"; GET /v1/event_types lists them.")
	}
	writeJSON(w, http.StatusOK, entries[i])
	return nil
}
