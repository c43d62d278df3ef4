package admin

import "github.com/go-chi/chi/v5"

// subscriptionRoutes are the /v1/webhook_subscriptions routes.
func (s *Server) subscriptionRoutes(r chi.Router) {
	// TODO(subscriptions)
}
