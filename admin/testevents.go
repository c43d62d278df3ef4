package admin

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/webhookd/webhookd/internal/sessions"
)

// testEventRoutes is POST /v1/webhook_subscriptions/{id}/send_test_event,
// rate-limited per merchant on top of the API's per-key limit.
func (s *Server) testEventRoutes(r chi.Router) {
	r.With(s.requireCapability(sessions.ManageEndpoints), s.limitRate(s.testEventRateLimit())).
		Post("/webhook_subscriptions/{id}/send_test_event", s.handle(s.sendTestEvent))
}

// sendTestEvent stores a ping.test event for one subscription and answers
// 202 with its delivery.
func (s *Server) sendTestEvent(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	d, err := s.cfg.Publisher.SendTestEvent(r.Context(), principalOf(r.Context()).Merchant.ID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, deliveryView(d))
	return nil
}
