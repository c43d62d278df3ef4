// Package customheaders is the one rule for the request headers a merchant
// adds to a delivery: a subscription's headers, and the headers a
// transformation returns. Each is hostile input that ends up in an HTTP
// request webhookd sends, so it is read by allow-list and bounded.
package customheaders

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"

	"github.com/webhookd/webhookd/internal/invalid"
)

// Bounds of a delivery's custom headers.
const (
	// MaxHeaders is how many headers a delivery may carry.
	MaxHeaders = 20
	// MaxNameBytes bounds a header's name.
	MaxNameBytes = 256
	// MaxValueBytes bounds a header's value.
	MaxValueBytes = 4096
)

// reserved are the headers webhookd sets itself or that belong to the
// connection, not to the request: a merchant may not set them. Every
// webhook-* header is reserved too (the signature's).
var reserved = []string{
	"content-type", "content-length", "host", "user-agent",
	"connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
	"te", "trailer", "transfer-encoding", "upgrade",
}

// Reserved reports whether a merchant may not set the header name: webhookd
// sets it, or it belongs to the connection (hop-by-hop).
func Reserved(name string) bool {
	lower := strings.ToLower(name)
	return strings.HasPrefix(lower, "webhook-") || strings.HasPrefix(lower, "proxy-") ||
		slices.Contains(reserved, lower) || lower == "trailers"
}

// Check applies the rules of custom request headers, naming param in its
// error. The param of a bad entry names its header, as in
// headers.Connection; a name that is no valid header name cannot be shown
// there, so then it is param alone.
func Check(param string, h map[string]string) error {
	if len(h) > MaxHeaders {
		return invalid.Value(param, "headers_too_many", fmt.Sprintf("%s may hold at most %d headers.", param, MaxHeaders))
	}
	seen := make(map[string]bool, len(h))
	// Sorted: the same input always names the same header.
	for _, name := range slices.Sorted(maps.Keys(h)) {
		p := param + "." + name
		lower := strings.ToLower(name)
		value := h[name]
		switch {
		case name == "" || len(name) > MaxNameBytes || !httpguts.ValidHeaderFieldName(name):
			return invalid.Value(param, "header_name_invalid", fmt.Sprintf(
				"%s names must be HTTP header names (letters, digits and !#$%%&'*+-.^_`|~), at most %d characters.", param, MaxNameBytes))
		case Reserved(name):
			return invalid.Value(p, "header_reserved", fmt.Sprintf(
				"%s cannot be set: webhookd sets it, or it belongs to the connection.", name))
		case seen[lower]:
			return invalid.Value(p, "header_duplicate", fmt.Sprintf("%s is given twice (header names ignore case).", name))
		case value == "":
			// Also what a null value decodes to.
			return invalid.Value(p, "header_value_empty", fmt.Sprintf("%s values must be non-empty strings.", param))
		case len(value) > MaxValueBytes:
			return invalid.Value(p, "header_value_too_long", fmt.Sprintf("%s values must be at most %d bytes.", param, MaxValueBytes))
		case !utf8.ValidString(value) || !httpguts.ValidHeaderFieldValue(value):
			return invalid.Value(p, "header_value_invalid", param+" values must not contain control characters (CR, LF, NUL).")
		}
		seen[lower] = true
	}
	return nil
}
