package admin

import "net/http"

// openAPI serves the OpenAPI document of the public surfaces.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	// TODO(views)
	s.writeError(w, r, errNotFound)
}
