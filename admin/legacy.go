package admin

import "github.com/go-chi/chi/v5"

// legacyRoutes are POST /api/service/webhook-subscription/create|update|delete.
func (s *Server) legacyRoutes(r chi.Router) {
	// TODO(subscriptions)
}
