package admin

import "github.com/go-chi/chi/v5"

// eventRoutes are the /v1/events routes.
func (s *Server) eventRoutes(r chi.Router) {
	// TODO(views)
}
