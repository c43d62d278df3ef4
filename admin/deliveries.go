package admin

import "github.com/go-chi/chi/v5"

// deliveryRoutes are the /v1/webhook_deliveries routes.
func (s *Server) deliveryRoutes(r chi.Router) {
	// TODO(views)
}
