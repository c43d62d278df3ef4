package admin

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/sessions"
	"github.com/webhookd/webhookd/producer"
)

// sandbox is the environment where events may be triggered by hand.
const sandbox = "sandbox"

// errTriggerLive refuses a trigger outside the sandbox: a made-up event
// would reach a merchant's real endpoints as if money had moved.
var errTriggerLive = newError(http.StatusForbidden, catInvalidRequest, "permission_denied",
	"Events can be triggered only in the sandbox environment; this engine serves production.")

// catalogue is the catalogue of the configured event types, which judges
// every event type the API is given.
func (s *Server) catalogue() catalogue.Catalogue { return catalogue.New(s.cfg.EventTypes) }

// triggerRoutes is POST /v1/event_types/{type}/trigger.
func (s *Server) triggerRoutes(r chi.Router) {
	r.With(s.requireCapability(sessions.ManageEndpoints)).Post("/event_types/{type}/trigger", s.handle(s.triggerEvent))
}

// triggerEvent publishes an event of the type named in the path, with the
// catalogue's example payload, to the merchant's own subscriptions (and
// listeners), exactly as a real one: same fan-out, signing and retries.
// It answers 202 with the Event.
func (s *Server) triggerEvent(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Environment != sandbox {
		return errTriggerLive
	}
	typ := chi.URLParam(r, "type")
	types := s.catalogue()
	if bad := types.CheckTrigger("type", typ); bad != nil {
		return bad
	}
	ev, _, err := s.cfg.Publisher.Publish(r.Context(), producer.Event{MerchantID: principalOf(r.Context()).Merchant.ID,
		Type: typ, Payload: types.Example(typ)})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, eventView(ev))
	return nil
}
