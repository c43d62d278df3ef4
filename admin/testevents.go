package admin

import (
	"fmt"
	"math"
	"net/http"

	"github.com/go-chi/chi/v5"
)

// testEventRoutes is POST /v1/webhook_subscriptions/{id}/send_test_event.
func (s *Server) testEventRoutes(r chi.Router) {
	r.With(s.requireScope(ScopeWrite)).Post("/webhook_subscriptions/{id}/send_test_event", s.sendTestEvent)
}

// testEventRateKey is the Redis key of a merchant's send_test_event budget.
func testEventRateKey(merchantID string) string { return "webhookd:rl:test_event:" + merchantID }

// sendTestEvent stores a ping.test event for one subscription and answers
// 202 with its delivery. It is rate-limited per merchant (GCRA in Redis, so
// the limit holds across instances); over the limit it is 429 with
// Retry-After in whole seconds, rounded up.
func (s *Server) sendTestEvent(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	merchant := principalOf(r.Context()).Merchant.ID
	if s.limiter != nil && s.cfg.TestEventRate.Rate > 0 {
		res, err := s.limiter.Allow(r.Context(), testEventRateKey(merchant), s.cfg.TestEventRate)
		if err != nil {
			s.writeError(w, r, fmt.Errorf("test event rate limit: %w", err))
			return
		}
		if res.Allowed == 0 {
			s.writeError(w, r, errRateLimited(max(1, int(math.Ceil(res.RetryAfter.Seconds())))))
			return
		}
	}
	d, err := s.cfg.Publisher.SendTestEvent(r.Context(), merchant, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, deliveryView(d))
}
