package admin

import (
	"net/http"
	"net/netip"
)

// documentHandlers serve what the public API publishes to anyone, without
// a key: the API versions and the addresses deliveries leave from (the
// OpenAPI documents, fixed at build time, need no group). They are
// separate because they read only configuration: no store, no caller.
type documentHandlers struct {
	versions        Versions
	sourceAddresses []netip.Prefix
}

// listSourceAddresses answers GET /v1/webhook_source_addresses: the
// addresses the operator declares deliveries leave from
// (WEBHOOKD_SOURCE_ADDRESSES), for receivers that allow-list their
// callers. It needs no key: it is the same for every merchant, and a
// receiver's operator may need it before holding one.
func (d documentHandlers) listSourceAddresses(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"data": sourceAddressList(d.sourceAddresses)})
}

// sourceAddressList renders prefixes in CIDR notation, never null.
func sourceAddressList(prefixes []netip.Prefix) []string {
	out := make([]string, 0, len(prefixes))
	for _, p := range prefixes {
		out = append(out, p.String())
	}
	return out
}
