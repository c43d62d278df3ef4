package admin

import (
	"net/http"

	"github.com/go-chi/chi/v5"
)

// testEventRoutes is POST /v1/webhook_subscriptions/{id}/send_test_event,
// rate-limited per merchant on top of the API's per-key limit.
func (s *Server) testEventRoutes(r chi.Router) {
	r.With(s.requireScope(ScopeWrite), s.limitRate(s.testEventRateLimit())).
		Post("/webhook_subscriptions/{id}/send_test_event", s.sendTestEvent)
}

// sendTestEvent stores a ping.test event for one subscription and answers
// 202 with its delivery.
func (s *Server) sendTestEvent(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	d, err := s.cfg.Publisher.SendTestEvent(r.Context(), principalOf(r.Context()).Merchant.ID, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, deliveryView(d))
}
