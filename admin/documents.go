package admin

import "net/netip"

// documentHandlers serve what the public API publishes to anyone, without
// a key: the API versions and the addresses deliveries leave from (the
// OpenAPI documents, fixed at build time, need no group). They are
// separate because they read only configuration: no store, no caller.
type documentHandlers struct {
	versions        Versions
	sourceAddresses []netip.Prefix
	// asyncAPIDocument is GET /v1/asyncapi.json's answer, built once by
	// New from the configuration (asyncapi.go).
	asyncAPIDocument []byte
}
