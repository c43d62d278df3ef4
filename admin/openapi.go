package admin

import (
	_ "embed"
	"net/http"
)

// openAPIDocument is the OpenAPI 3.1 document of the public surfaces: the
// whole /v1 API and the legacy webhook-subscription routes. The admin test
// suite validates every request it sends and every answer it gets against
// it, so that it cannot drift from the code.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPI returns a copy of the OpenAPI document (for tools and tests).
func OpenAPI() []byte { return append([]byte(nil), openAPIDocument...) }

// openAPI serves the document, publicly (no key needed).
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDocument)
}
