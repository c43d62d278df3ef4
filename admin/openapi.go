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

// openAPIInternalDocument is the OpenAPI 3.1 document of the internal
// listener: publishing events, merchant settings, API keys, health,
// readiness, metrics and profiles. The admin tests check that it describes
// every route of Internal() and nothing else, and validate exchanges with
// the internal listener against it.
//
//go:embed openapi_internal.json
var openAPIInternalDocument []byte

// OpenAPI returns a copy of the OpenAPI document (for tools and tests).
func OpenAPI() []byte { return append([]byte(nil), openAPIDocument...) }

// OpenAPIInternal returns a copy of the internal listener's OpenAPI
// document (for tools, tests and docs/).
func OpenAPIInternal() []byte { return append([]byte(nil), openAPIInternalDocument...) }

// openAPI serves the document, publicly (no key needed).
func openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDocument)
}

// openAPIInternal serves the internal listener's document at
// GET /internal/v1/openapi.json, like the public one: without the ingest
// token. It holds no secret (it is in the repository), and tools that
// read it (client generators, viewers) should not need the token that
// publishes events and issues API keys.
func openAPIInternal(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIInternalDocument)
}
