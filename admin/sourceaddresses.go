package admin

import (
	"net/http"
	"net/netip"
)

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
