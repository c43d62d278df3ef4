package admin

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/sessions"
)

// eventTypeRoutes is GET /v1/event_types: the types a subscription may
// name, with what each means and an example payload, for the portal's
// event picker and for merchants writing handlers.
func (s *Server) eventTypeRoutes(r chi.Router) {
	r.With(s.requireCapability(sessions.View)).Get("/event_types", s.handle(s.listEventTypes))
}

// listEventTypes answers the whole catalogue in one page, in the list
// envelope: it is small and fixed by the configuration, so has_more is
// always false and next_cursor null. It takes no parameter and ignores
// any it is given (limit included): every answer is the whole catalogue.
func (s *Server) listEventTypes(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, list[catalogue.EventType]{Data: catalogue.New(s.cfg.EventTypes).Entries()})
	return nil
}
