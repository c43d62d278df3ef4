package admin

import (
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"code.dny.dev/ssrf"
)

// Limits on subscription fields (spec 8 for metadata).
const (
	maxURLLength         = 2048
	maxDescriptionLength = 500
	maxMetadataKeys      = 50
	maxMetadataKey       = 40
	maxMetadataValue     = 500
)

// wildcardEvent subscribes to every event type, future ones included.
const wildcardEvent = "*"

// testEventType is sent by send_test_event to one subscription whatever its
// events list says, so subscribing to it would mean nothing.
const testEventType = "ping.test"

// targetGuard decides which IP literals a webhook URL may name. It is the
// same deny list (IANA special-purpose ranges) that the dispatcher applies
// at dial time, after DNS; checking literals here only refuses early what
// could never be delivered. A Guardian is never modified after New.
var targetGuard = ssrf.New(ssrf.WithAnyPort(), ssrf.WithAnyNetwork())

// validateURL checks a webhook target URL and returns it as given. The rules:
// absolute https:// (http:// only with AllowHTTPTargets), at most 2,048
// characters, a host, no credentials, no fragment (never sent), and, unless
// AllowPrivateTargets, no private, loopback, link-local or unspecified IP
// literal and no localhost.
func (s *Server) validateURL(param, raw string) (string, error) {
	if raw == "" {
		return "", errMissing(param)
	}
	if len(raw) > maxURLLength {
		return "", errInvalid(param, fmt.Sprintf("%s must be at most %d characters.", param, maxURLLength))
	}
	if strings.ContainsFunc(raw, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return "", errInvalid(param, param+" must not contain spaces or control characters.")
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" {
		return "", errInvalid(param, param+" must be an absolute URL such as https://example.com/webhooks.")
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !s.cfg.AllowHTTPTargets {
			return "", errInvalid(param, param+" must use https.")
		}
	default:
		return "", errInvalid(param, param+" must use https.")
	}
	if u.User != nil {
		return "", errInvalid(param, param+" must not contain credentials; authenticate deliveries by their signature.")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return "", errInvalid(param, param+" must not contain a fragment.")
	}
	host := u.Hostname()
	if host == "" {
		return "", errInvalid(param, param+" must name a host.")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", errInvalid(param, param+" has an invalid port.")
		}
	}
	if !s.cfg.AllowPrivateTargets {
		if err := publicHost(host); err != nil {
			return "", errInvalid(param, param+" "+err.Error())
		}
	}
	return raw, nil
}

// publicHost refuses hosts that can only reach the service's own network.
// Names are checked again at dial time, after DNS.
func publicHost(host string) error {
	lower := strings.TrimSuffix(strings.ToLower(host), ".")
	if lower == "localhost" || strings.HasSuffix(lower, ".localhost") {
		return fmt.Errorf("must not point at localhost")
	}
	if ip, err := netip.ParseAddr(lower); err == nil {
		if targetGuard.SafeAddr(ip.WithZone("")) != nil {
			return fmt.Errorf("must not point at a private, loopback, link-local or reserved address")
		}
		return nil
	}
	// Numeric forms that some resolvers read as IPv4 (2130706433, 0x7f.1,
	// 127.1): refuse them rather than guess how the dialer will read them.
	if strings.HasPrefix(lower, "0x") || !strings.ContainsFunc(lower, func(r rune) bool { return (r < '0' || r > '9') && r != '.' }) {
		return fmt.Errorf("must use a host name or a dotted IPv4 or IPv6 address")
	}
	return nil
}

// validateEvents checks an events list: not empty, each type in the
// catalogue, or exactly ["*"]. Duplicates are dropped, order kept.
// ping.test is refused: test events reach their subscription regardless.
// A nil list is absent (parameter_missing), an empty one invalid.
func (s *Server) validateEvents(param string, events []string) ([]string, error) {
	if events == nil {
		return nil, errMissing(param)
	}
	if len(events) == 0 {
		return nil, errInvalid(param, param+" must list at least one event type, or be [\"*\"].")
	}
	if slices.Contains(events, wildcardEvent) {
		if len(events) != 1 {
			return nil, errInvalid(param, param+` must be ["*"] alone, or a list of event types without "*".`)
		}
		return events, nil
	}
	out := make([]string, 0, len(events))
	for _, e := range events {
		switch {
		case e == testEventType:
			return nil, errInvalid(param, "ping.test cannot be subscribed to: send_test_event delivers it to its subscription whatever the events list.")
		case !slices.Contains(s.cfg.EventTypes, e):
			return nil, errInvalid(param, fmt.Sprintf("Unknown event type %s; see the event catalogue.", quote(e)))
		case !slices.Contains(out, e):
			out = append(out, e)
		}
	}
	return out, nil
}

// validateDescription checks the optional description.
func validateDescription(param string, d *string) error {
	if d != nil && utf8.RuneCountInString(*d) > maxDescriptionLength {
		return errInvalid(param, fmt.Sprintf("%s must be at most %d characters.", param, maxDescriptionLength))
	}
	return nil
}

// validateMetadata applies spec 8's limits; the param of a bad entry names
// its key, as in metadata[key].
func validateMetadata(param string, m map[string]string) error {
	if len(m) > maxMetadataKeys {
		return errInvalid(param, fmt.Sprintf("%s may hold at most %d keys.", param, maxMetadataKeys))
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the same input always names the same key
	for _, k := range keys {
		p := param + "[" + k + "]"
		switch n := utf8.RuneCountInString(k); {
		case n == 0:
			return errInvalid(param, param+" keys must not be empty.")
		case n > maxMetadataKey:
			return errInvalid(p, fmt.Sprintf("%s keys must be at most %d characters.", param, maxMetadataKey))
		case utf8.RuneCountInString(m[k]) > maxMetadataValue:
			return errInvalid(p, fmt.Sprintf("%s values must be at most %d characters.", param, maxMetadataValue))
		}
	}
	return nil
}
