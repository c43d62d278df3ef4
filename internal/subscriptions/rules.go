package subscriptions

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"code.dny.dev/ssrf"

	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
)

// Limits on subscription fields (spec 8 for metadata).
const (
	maxDescriptionLength = 500
	maxMetadataKeys      = 50
	maxMetadataKey       = 40
	maxMetadataValue     = 500
)

// DefaultMaxSubscriptions is how many subscriptions a merchant may hold when
// Rules.MaxSubscriptions is zero.
const DefaultMaxSubscriptions = 100

// wildcardEvent subscribes to every event type, future ones included.
const wildcardEvent = "*"

// Rules are what a subscription's fields are checked against: the event
// catalogue and how far the URL rules are lifted.
type Rules struct {
	// EventTypes is the event catalogue (spec 6.1 plus configured kinds).
	EventTypes []string
	// AllowHTTPTargets lets a target URL use http:// (development, tests).
	AllowHTTPTargets bool
	// AllowPrivateTargets lets a target URL name localhost or a private,
	// loopback, link-local or reserved IP literal (development, tests).
	AllowPrivateTargets bool
	// MaxSubscriptions is how many subscriptions a merchant may hold, every
	// one not deleted counted (legacy-made ones too), so that one merchant
	// cannot make every event fan out without end; zero is
	// DefaultMaxSubscriptions.
	MaxSubscriptions int
	// Destinations are the destination types subscriptions may use
	// (WEBHOOKD_DESTINATIONS); nil allows every one of DestinationTypes.
	Destinations []string
	// Kinds are the destination kinds this build delivers to, each with
	// its own fields and rules (internal/destination/kinds); nil knows
	// only the HTTP endpoint and poll.
	Kinds *destination.Registry
	// Clock is the engine's one clock: certificates must be valid at its
	// now; nil is the system clock.
	Clock clock.Clock
	// Transformations compiles transformations' code when they are saved;
	// nil refuses every transformation (the feature is off).
	Transformations TransformationCompiler
}

// now is the Clock's time.
func (r Rules) now() time.Time { return clock.Or(r.Clock).Now() }

// maxSubscriptions is the cap that applies.
func (r Rules) maxSubscriptions() int {
	if r.MaxSubscriptions > 0 {
		return r.MaxSubscriptions
	}
	return DefaultMaxSubscriptions
}

// targetGuard decides which IP literals a webhook URL may name. It is the
// same deny list (IANA special-purpose ranges) that the dispatcher applies
// at dial time, after DNS; checking literals here only refuses early what
// could never be delivered.
func targetGuard() *ssrf.Guardian {
	return ssrf.New(ssrf.WithAnyPort(), ssrf.WithAnyNetwork())
}

// checker applies Rules; it holds the guard and the catalogue so that
// they are built once.
type checker struct {
	rules Rules
	types catalogue.Catalogue
	guard *ssrf.Guardian
}

// newChecker is the checker of rules.
func newChecker(rules Rules) checker {
	return checker{rules: rules, types: catalogue.New(rules.EventTypes), guard: targetGuard()}
}

// url checks a webhook target URL and returns it as given. The rules:
// webURL's, http:// only with AllowHTTPTargets, and, unless
// AllowPrivateTargets, no private, loopback, link-local or unspecified IP
// literal and no localhost.
func (c checker) url(param, raw string) (string, error) {
	u, err := destination.WebURL(param, raw, c.rules.AllowHTTPTargets)
	if err != nil {
		return "", err
	}
	if !c.rules.AllowPrivateTargets {
		if why := c.privateHost(u.Hostname()); why != "" {
			return "", invalid.Value(param, "url_private", param+" "+why)
		}
	}
	return raw, nil
}

// privateHost says why a host can only reach the service's own network, or
// "" when it may be public. Names are checked again at dial time, after DNS.
func (c checker) privateHost(host string) string {
	lower := strings.TrimSuffix(strings.ToLower(host), ".")
	if lower == "localhost" || strings.HasSuffix(lower, ".localhost") {
		return "must not point at localhost"
	}
	if ip, err := netip.ParseAddr(lower); err == nil {
		if c.guard.SafeAddr(ip.WithZone("")) != nil {
			return "must not point at a private, loopback, link-local or reserved address"
		}
		return ""
	}
	// Numeric forms that some resolvers read as IPv4 (2130706433, 0x7f.1,
	// 127.1): refuse them rather than guess how the dialer will read them.
	if strings.HasPrefix(lower, "0x") || !strings.ContainsFunc(lower, func(r rune) bool { return (r < '0' || r > '9') && r != '.' }) {
		return "must use a host name or a dotted IPv4 or IPv6 address"
	}
	return ""
}

// events checks an events list: not empty, each type in the catalogue, or
// exactly ["*"]. Duplicates are dropped, order kept. Which types may be
// named is the catalogue's to say (ping.test never: test events reach
// their subscription regardless). A nil list is absent (missing), an empty
// one invalid.
func (c checker) events(param string, events []string) ([]string, error) {
	if events == nil {
		return nil, invalid.Missing(param)
	}
	if len(events) == 0 {
		return nil, invalid.Value(param, "events_empty", param+" must list at least one event type, or be [\"*\"].")
	}
	if slices.Contains(events, wildcardEvent) {
		if len(events) != 1 {
			return nil, invalid.Value(param, "events_wildcard_mixed", param+` must be ["*"] alone, or a list of event types without "*".`)
		}
		return events, nil
	}
	out := make([]string, 0, len(events))
	for _, e := range events {
		if bad := c.types.CheckSubscribe(param, e); bad != nil {
			return nil, bad
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out, nil
}

// checkDescription checks the optional description.
func checkDescription(param string, d *string) error {
	switch {
	case d == nil:
		return nil
	case utf8.RuneCountInString(*d) > maxDescriptionLength:
		return invalid.Value(param, "description_too_long", fmt.Sprintf("%s must be at most %d characters.", param, maxDescriptionLength))
	case hasNUL(*d):
		return invalid.Value(param, "description_nul", param+" must not contain the NUL character (\\u0000).")
	}
	return nil
}

// hasNUL tells whether s holds a NUL character, which JSON can carry
// (\u0000) but a Postgres text or jsonb value cannot: stored, it would fail
// the statement.
func hasNUL(s string) bool { return strings.ContainsRune(s, 0) }

// checkMetadata applies spec 8's limits; the param of a bad entry names its
// key, as in metadata[key].
func checkMetadata(param string, m map[string]string) error {
	if len(m) > maxMetadataKeys {
		return invalid.Value(param, "metadata_too_many_keys", fmt.Sprintf("%s may hold at most %d keys.", param, maxMetadataKeys))
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
			return invalid.Value(param, "metadata_key_empty", param+" keys must not be empty.")
		case n > maxMetadataKey:
			return invalid.Value(p, "metadata_key_too_long", fmt.Sprintf("%s keys must be at most %d characters.", param, maxMetadataKey))
		case utf8.RuneCountInString(m[k]) > maxMetadataValue:
			return invalid.Value(p, "metadata_value_too_long", fmt.Sprintf("%s values must be at most %d characters.", param, maxMetadataValue))
		case hasNUL(k):
			// The key itself cannot be shown in the param: it is the fault.
			return invalid.Value(param, "metadata_key_nul", param+" keys must not contain the NUL character (\\u0000).")
		case hasNUL(m[k]):
			return invalid.Value(p, "metadata_value_nul", param+" values must not contain the NUL character (\\u0000).")
		}
	}
	return nil
}

// CheckStatus refuses a status that a merchant may not set or filter by:
// only enabled and disabled are theirs to choose.
func CheckStatus(param, status string) error {
	if s := store.SubscriptionStatus(status); s != store.SubscriptionEnabled && s != store.SubscriptionDisabled {
		return invalid.Value(param, "status_unknown", param+" must be enabled or disabled.")
	}
	return nil
}

// URLRule is the rule of a subscription's URL under r, built once: what
// a transformation's changed url is held to (internal/transform's
// Config.CheckURL), as a subscription's own url is. Its refusal is an
// *invalid.Error naming "url".
func URLRule(r Rules) func(raw string) error {
	c := newChecker(r)
	return func(raw string) error {
		_, err := c.url("url", raw)
		return err
	}
}
