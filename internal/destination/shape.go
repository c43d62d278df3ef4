package destination

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/webhookd/webhookd/internal/invalid"
)

// Limits every kind's fields share.
const (
	// MaxField is the longest name or credential field.
	MaxField = 255
	// MaxURL is the longest URL field.
	MaxURL = 2048
	// Masked is what a read shows of a credential.
	Masked = "••••••"
)

// Decode reads raw into v by allow-list: an unknown member anywhere (a
// nested object's too) or a member of the wrong JSON type is an
// *invalid.Error naming param's field; "type" is the registry's and is
// skipped. Its messages never quote the input.
func Decode(param string, raw json.RawMessage, v any) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return invalid.Value(param, "destination_not_object", param+` must be an object such as {"type": "rabbitmq", ...}.`)
	}
	delete(fields, "type")
	rest, _ := json.Marshal(fields)
	dec := json.NewDecoder(strings.NewReader(string(rest)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		field := param
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			field = param + "." + typeErr.Field
		}
		return invalid.Value(field, "destination_field_invalid", field+" has the wrong JSON type or an unknown member (see the destination's fields).")
	}
	return nil
}

// Name checks a name or credential field: at most MaxField characters,
// none a control character; "" is missing when required.
func Name(param, v string, required bool) error {
	if v == "" {
		if required {
			return invalid.Missing(param)
		}
		return nil
	}
	if len(v) > MaxField || strings.ContainsFunc(v, IsControl) {
		return invalid.Value(param, "destination_name_invalid", fmt.Sprintf("%s must be at most %d characters, none of them a control character.", param, MaxField))
	}
	return nil
}

// IsControl is a control character: never part of a name or a credential.
func IsControl(r rune) bool { return r < ' ' || r == 0x7f }

// HostPort checks a host:port field (a broker, an endpoint) and returns
// its host.
func HostPort(param, v, example string) (host string, err error) {
	host, port, splitErr := net.SplitHostPort(v)
	if splitErr != nil || port == "" {
		return "", invalid.Value(param, "destination_broker_invalid", param+" must be host:port, such as "+example+".")
	}
	return host, CheckHostPort(param, host, port, true)
}

// CheckHostPort checks a host, a DNS name or an IP address (what a dialer
// can take and nothing it would read otherwise), and its port, in range;
// requirePort when the field must name one.
func CheckHostPort(param, host, port string, requirePort bool) error {
	if host == "" {
		return invalid.Value(param, "destination_no_host", param+" must name a host.")
	}
	if !HostName(host) {
		return invalid.Value(param, "destination_host_invalid", param+" must name a host by a DNS name or an IP address.")
	}
	if port == "" && !requirePort {
		return nil
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return invalid.Value(param, "destination_port", param+" has an invalid port.")
	}
	return nil
}

// HostName reports whether host is an IP address without a zone or a DNS
// name: dot-separated labels of letters, digits, '-' and '_', at most 63
// characters each and 253 in all.
func HostName(host string) bool {
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Zone() == ""
	}
	if len(host) > 253 {
		return false
	}
	for label := range strings.SplitSeq(strings.TrimSuffix(host, "."), ".") {
		if label == "" || len(label) > 63 || strings.ContainsFunc(label, func(r rune) bool {
			return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '-' && r != '_'
		}) {
			return false
		}
	}
	return true
}

// ServiceURL checks an http(s) URL a kind's client requests (an AWS
// endpoint, a queue URL): absolute, no credentials, query or fragment, a
// valid host and port. Whether http:// is allowed and whether the host
// may be private are the operator's rules (Address.URL), applied by the
// registry's caller.
func ServiceURL(param, raw, example string) (*url.URL, error) {
	bad := invalid.Value(param, "destination_endpoint_invalid", param+" must be an https URL without credentials, query or fragment, such as "+example+".")
	if raw == "" {
		return nil, invalid.Missing(param)
	}
	if len(raw) > MaxURL || strings.ContainsFunc(raw, func(r rune) bool { return r <= ' ' || r == 0x7f }) || strings.ContainsAny(raw, "?#") {
		return nil, bad
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" || (u.Scheme != "https" && u.Scheme != "http") || u.User != nil {
		return nil, bad
	}
	if err := CheckHostPort(param, u.Hostname(), u.Port(), false); err != nil {
		return nil, err
	}
	return u, nil
}

// WebURL checks the shape of an http(s) URL a merchant gives: absolute
// https:// (http:// too when allowHTTP), at most 2,048 characters, a host
// and a port in range, no credentials, no fragment (never sent).
func WebURL(param, raw string, allowHTTP bool) (*url.URL, error) {
	if raw == "" {
		return nil, invalid.Missing(param)
	}
	if len(raw) > MaxURL {
		return nil, invalid.Value(param, "url_too_long", fmt.Sprintf("%s must be at most %d characters.", param, MaxURL))
	}
	if strings.ContainsFunc(raw, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return nil, invalid.Value(param, "url_control_characters", param+" must not contain spaces or control characters.")
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" {
		return nil, invalid.Value(param, "url_not_absolute", param+" must be an absolute URL such as https://example.com/webhooks.")
	}
	if u.Scheme != "https" && (u.Scheme != "http" || !allowHTTP) {
		return nil, invalid.Value(param, "url_not_https", param+" must use https.")
	}
	if u.User != nil {
		return nil, invalid.Value(param, "url_credentials", param+" must not contain credentials; authenticate deliveries by their signature.")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return nil, invalid.Value(param, "url_fragment", param+" must not contain a fragment.")
	}
	if u.Hostname() == "" {
		return nil, invalid.Value(param, "url_no_host", param+" must name a host.")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, invalid.Value(param, "url_port", param+" has an invalid port.")
		}
	}
	return u, nil
}
