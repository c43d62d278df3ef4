// Package eventbridge is the destination kind "eventbridge": each
// delivery is one PutEvents entry on an Amazon EventBridge event bus of
// the merchant's, its detail-type the event's type so that the
// merchant's rules route it, its detail carrying the signed body and the
// webhook headers so that whoever a rule hands the event to can verify
// the Standard Webhooks signature (see Detail).
package eventbridge

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"strings"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/awsdest"
	"github.com/webhookd/webhookd/internal/invalid"
)

// Type is the destination's "type".
const Type = "eventbridge"

// DefaultSource is an event's source when the destination names none.
const DefaultSource = "webhookd"

// Limits of EventBridge's fields that Parse applies.
const (
	// maxBusName is the longest event bus name EventBridge takes.
	maxBusName = 256
	// maxSource is the longest source EventBridge takes.
	maxSource = 256
)

var (
	// busName is an event bus's name as EventBridge allows it.
	busName = regexp.MustCompile(`^[.\-_A-Za-z0-9/]{1,256}$`)
	// busARN is an event bus's ARN: its partition, region, account and
	// name. The region is checked against the destination's own, since
	// the request is signed for and sent to that region.
	busARN = regexp.MustCompile(`^arn:aws[-a-z]*:events:([a-z]{2}(?:-[a-z]+)+-[0-9]{1,2}):[0-9]{12}:event-bus/([.\-_A-Za-z0-9/]{1,256})$`)
)

// Kind is the eventbridge kind.
type Kind struct{}

// New returns the eventbridge kind, for the registry.
func New() destination.Kind { return Kind{} }

// Metadata implements destination.Kind.
func (Kind) Metadata() destination.Metadata {
	fields := []destination.Field{
		{Name: "event_bus", Label: "Event bus", Type: destination.FieldString, Required: true,
			Example: "arn:aws:events:eu-west-1:123456789012:event-bus/webhooks",
			Help: "The event bus's name (\"default\" for the account's default bus) or its ARN, in the destination's region. " +
				"Rules on that bus match each event's detail-type, the event type."},
		{Name: "source", Label: "Source", Type: destination.FieldString, Example: DefaultSource,
			Help: "The events' source, for rules that match on it: 1 to 256 letters, digits or punctuation, not starting with \"aws.\". Default \"webhookd\"."},
	}
	return destination.Metadata{
		Type:  Type,
		Label: "Amazon EventBridge",
		Short: "EventBridge",
		Delivers: "one PutEvents entry per delivery on the merchant's event bus, its detail-type the event type and its detail the " +
			"signed body and headers, confirmed by EventBridge's event id",
		Fields:  append(fields, awsdest.Fields("events:PutEvents")...),
		Ordered: false,
	}
}

// Config is an eventbridge destination, checked.
type Config struct {
	// EventBus is the bus's name or ARN, sent as each entry's
	// EventBusName.
	EventBus string `json:"event_bus"`
	// Source is each entry's source.
	Source string `json:"source"`
	// Account is the region, the key and the endpoint.
	awsdest.Account
}

// Parse implements destination.Kind: the account's rules (awsdest),
// then the bus and the source.
func (Kind) Parse(param string, raw json.RawMessage) (destination.Config, error) {
	var c Config
	if err := destination.Decode(param, raw, &c); err != nil {
		return nil, err
	}
	if err := c.Account.Check(param); err != nil {
		return nil, err
	}
	if err := checkBus(param+".event_bus", c.EventBus, c.Region); err != nil {
		return nil, err
	}
	if c.Source == "" {
		c.Source = DefaultSource
	}
	if err := checkSource(param+".source", c.Source); err != nil {
		return nil, err
	}
	return c, nil
}

// checkBus applies EventBridge's rules of an event bus's name or ARN; an
// ARN must be of region, where the request goes.
func checkBus(param, v, region string) error {
	if v == "" {
		return invalid.Missing(param)
	}
	if strings.HasPrefix(v, "arn:") {
		m := busARN.FindStringSubmatch(v)
		if m == nil {
			return invalid.Value(param, "destination_event_bus_invalid", param+
				" must be an event bus's name or its ARN, such as arn:aws:events:eu-west-1:123456789012:event-bus/webhooks.")
		}
		if m[1] != region {
			return invalid.Value(param, "destination_event_bus_region", param+
				" is the ARN of an event bus in another region than the destination's region: name a bus of that region.")
		}
		return nil
	}
	if len(v) > maxBusName || !busName.MatchString(v) {
		return invalid.Value(param, "destination_event_bus_invalid", fmt.Sprintf(
			"%s must be an event bus's ARN, or its name: 1 to %d letters, digits, '.', '-', '_' or '/'.", param, maxBusName))
	}
	return nil
}

// checkSource applies EventBridge's rules of a source: 1 to 256
// printable characters (no space, so that a rule's pattern matches what
// the merchant sees), and not "aws.", the prefix of AWS's own sources,
// which EventBridge refuses (checked without case, to refuse what
// reads as one).
func checkSource(param, v string) error {
	if len(v) > maxSource || strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return invalid.Value(param, "destination_source_invalid", fmt.Sprintf(
			"%s must be 1 to %d letters, digits or ASCII punctuation, without spaces, such as com.example.webhooks.", param, maxSource))
	}
	if strings.HasPrefix(strings.ToLower(v), "aws.") {
		return invalid.Value(param, "destination_source_reserved", param+` must not start with "aws.": those sources are AWS's own.`)
	}
	return nil
}

// Summary implements destination.Config: the secret key masked.
func (c Config) Summary() map[string]any {
	s := map[string]any{"event_bus": c.EventBus, "source": c.Source}
	c.Account.Summarize(s)
	return s
}

// Target implements destination.Config: the bus's ARN, or
// eventbridge://region/name.
func (c Config) Target() string {
	if strings.HasPrefix(c.EventBus, "arn:") {
		return c.EventBus
	}
	return "eventbridge://" + c.Region + "/" + c.EventBus
}

// Addresses implements destination.Config: the endpoint, when one is
// named (AWS's own otherwise).
func (c Config) Addresses() []destination.Address { return c.Account.Addresses() }

// Plaintext implements destination.Config: "endpoint" when it is
// http://.
func (c Config) Plaintext() string { return c.Account.Plaintext() }

// String shows the destination without its secret key.
func (c Config) String() string {
	s := fmt.Sprintf("eventbridge{event_bus=%s source=%s region=%s access_key_id=%s secret_access_key=%s",
		c.EventBus, c.Source, c.Region, c.AccessKeyID, destination.Masked)
	if c.Endpoint != "" {
		s += " endpoint=" + c.Endpoint
	}
	return s + "}"
}

// GoString is String, so that %#v does not print the key either.
func (c Config) GoString() string { return c.String() }

// LogValue is String, for slog.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }
