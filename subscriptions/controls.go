package subscriptions

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"

	"github.com/webhookd/webhookd/filter"
	"github.com/webhookd/webhookd/invalid"
)

// Limits on a subscription's extra headers.
const (
	maxHeaders     = 20
	maxHeaderName  = 256
	maxHeaderValue = 4096
)

// reservedHeaders are the headers webhookd sets itself or that belong to
// the connection, not to the request: a subscription may not set them.
// Every webhook-* header is reserved too (the signature's).
var reservedHeaders = []string{
	"content-type", "content-length", "host", "user-agent",
	"connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
	"te", "trailer", "transfer-encoding", "upgrade",
}

// checkFilter compiles a filter expression; a nil one is none. The
// compiler's message says what is wrong, for the merchant who wrote it.
func checkFilter(c *filter.Compiler, param string, expr *string) error {
	if expr == nil {
		return nil
	}
	if _, err := c.Compile(*expr); err != nil {
		return invalid.Value(param, "filter_invalid", param+" is not a valid filter expression: "+err.Error())
	}
	return nil
}

// checkHeaders applies the rules of extra request headers. The param of a
// bad entry names its header, as in headers.Connection; a name that is no
// valid header name cannot be shown there, so then it is headers.
func checkHeaders(param string, h map[string]string) error {
	if len(h) > maxHeaders {
		return invalid.Value(param, "headers_too_many", fmt.Sprintf("%s may hold at most %d headers.", param, maxHeaders))
	}
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	slices.Sort(names) // the same input always names the same header
	seen := make(map[string]bool, len(h))
	for _, name := range names {
		p := param + "." + name
		lower := strings.ToLower(name)
		value := h[name]
		switch {
		case name == "" || len(name) > maxHeaderName || !httpguts.ValidHeaderFieldName(name):
			return invalid.Value(param, "header_name_invalid", fmt.Sprintf(
				"%s names must be HTTP header names (letters, digits and !#$%%&'*+-.^_`|~), at most %d characters.", param, maxHeaderName))
		case strings.HasPrefix(lower, "webhook-") || slices.Contains(reservedHeaders, lower):
			return invalid.Value(p, "header_reserved", fmt.Sprintf(
				"%s cannot be set: webhookd sets it, or it belongs to the connection.", name))
		case seen[lower]:
			return invalid.Value(p, "header_duplicate", fmt.Sprintf("%s is given twice (header names ignore case).", name))
		case value == "":
			// Also what a null value decodes to.
			return invalid.Value(p, "header_value_empty", fmt.Sprintf("%s values must be non-empty strings.", param))
		case len(value) > maxHeaderValue:
			return invalid.Value(p, "header_value_too_long", fmt.Sprintf("%s values must be at most %d bytes.", param, maxHeaderValue))
		case !utf8.ValidString(value) || !httpguts.ValidHeaderFieldValue(value):
			return invalid.Value(p, "header_value_invalid", param+" values must not contain control characters (CR, LF, NUL).")
		}
		seen[lower] = true
	}
	return nil
}

// maskedValue is what a read shows of a header value: its first four
// characters when it is long enough that they give nothing away (the
// scheme of "Bearer …", say), then dots; a short value shows dots only.
func maskedValue(v string) string {
	const dots = "••••••"
	if utf8.RuneCountInString(v) < 16 {
		return dots
	}
	r := []rune(v)
	return string(r[:4]) + "…" + dots
}
