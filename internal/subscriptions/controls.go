package subscriptions

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/webhookd/webhookd/internal/filter"
	"github.com/webhookd/webhookd/internal/invalid"
)

// Bounds of the delivery controls.
const (
	// MaxRateLimit is the highest rate_limit, in deliveries per second.
	MaxRateLimit = 10000
	// maxOrderingKeyPath bounds the ordering key's path, in characters.
	maxOrderingKeyPath = 200
	// maxOrderingKeyDepth bounds its number of segments.
	maxOrderingKeyDepth = 8
)

// OrderingNone is the ordering of a subscription whose deliveries are not
// ordered.
const OrderingNone = "none"

// envelopeFields are the top-level fields of the delivered envelope: an
// ordering key's path starts at one of them.
var envelopeFields = []string{"id", "type", "api_version", "payload", "date"}

// pathSegment is one name of an ordering key's dotted path.
var pathSegment = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// CheckRateLimit checks a rate limit: nil (none) or 1 to MaxRateLimit
// deliveries per second.
func CheckRateLimit(param string, limit *int) error {
	if limit != nil && (*limit < 1 || *limit > MaxRateLimit) {
		return invalid.Value(param, "rate_limit_range", fmt.Sprintf(
			"%s must be an integer from 1 to %d (deliveries per second), or null for no limit.", param, MaxRateLimit))
	}
	return nil
}

// ParseOrdering reads an ordering as the API takes it: "none" (or null)
// for unordered deliveries, or {"key": "payload.account_id"}, a dotted path
// into the delivered envelope whose value orders the deliveries. It
// returns the key's path, nil for none.
func ParseOrdering(param string, raw json.RawMessage) (*string, error) {
	bad := invalid.Value(param, "ordering_invalid", param+
		` must be "none" or an object {"key": "<path>"} naming a dotted path into the event envelope, such as "payload.account_id".`)
	trimmed := bytes.TrimSpace(raw)
	if bytes.Equal(trimmed, []byte("null")) {
		return nil, nil
	}
	var none string
	if json.Unmarshal(trimmed, &none) == nil {
		if none != OrderingNone {
			return nil, bad
		}
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &obj); err != nil || len(obj) != 1 {
		return nil, bad
	}
	rawKey, ok := obj["key"]
	var key string
	if !ok || json.Unmarshal(rawKey, &key) != nil {
		return nil, bad
	}
	if err := checkKeyPath(param, key); err != nil {
		return nil, err
	}
	return &key, nil
}

// checkKeyPath checks an ordering key's path: dot-separated names of
// letters, digits, "_" and "-", starting at a field of the envelope.
func checkKeyPath(param, key string) error {
	segments := strings.Split(key, ".")
	if key == "" || len(key) > maxOrderingKeyPath || len(segments) > maxOrderingKeyDepth ||
		!slices.Contains(envelopeFields, segments[0]) {
		return invalid.Value(param, "ordering_key_path", fmt.Sprintf(
			"%s.key must be a dotted path of at most %d names starting at a field of the envelope (%s), such as \"payload.account_id\".",
			param, maxOrderingKeyDepth, strings.Join(envelopeFields, ", ")))
	}
	for _, s := range segments {
		if !pathSegment.MatchString(s) {
			return invalid.Value(param, "ordering_key_path",
				param+".key must be names of letters, digits, \"_\" and \"-\" separated by dots.")
		}
	}
	return nil
}

// OrderingView is how the API shows an ordering key's path: "none", or
// the object that names it.
func OrderingView(key *string) any {
	if key == nil {
		return OrderingNone
	}
	return map[string]string{"key": *key}
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

// MaskedValue is what a read shows of a header value: nothing of it but,
// when it is an authorization scheme and a credential ("Bearer …",
// "Basic …"), the scheme's name, which a merchant debugging a receiver
// needs and which is no secret. A header value may be a credential, and
// no part of a credential is shown (docs/decisions.md, "A merchant's
// input", rule 5): a four-character prefix of an API key narrows it.
func MaskedValue(v string) string {
	const dots = "••••••"
	scheme, credential, ok := strings.Cut(v, " ")
	if !ok || credential == "" || !authScheme.MatchString(scheme) {
		return dots
	}
	return scheme + " " + dots
}

// authScheme is an HTTP authentication scheme's name as registered ones
// are spelt (RFC 9110 §11.1 allows any token; these are letters, digits
// and hyphens, at most 20).
var authScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]{0,19}$`)
