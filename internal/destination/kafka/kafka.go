// Package kafka is the kafka destination kind: each delivery is one
// record produced to a topic with acks from every in-sync replica by an
// idempotent producer (franz-go), keyed by the ordering key of an ordered
// delivery and by the event id otherwise, its headers as record headers.
//
// Nothing but the brokers (host:port), the topic, the SASL mechanism and
// credentials and TLS on or off reaches the client: every field is read
// by allow-list.
package kafka

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"slices"
	"strings"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/invalid"
)

// Type is the destination's "type".
const Type = "kafka"

// SASL mechanisms.
const (
	SASLPlain       = "plain"
	SASLScramSHA256 = "scram-sha-256"
	SASLScramSHA512 = "scram-sha-512"
)

// maxBrokers bounds the bootstrap brokers of one destination.
const maxBrokers = 10

// topicName is a legal Kafka topic name.
var topicName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)

// Kind is the kafka kind.
type Kind struct{}

// New returns the kafka kind, for the registry.
func New() destination.Kind { return Kind{} }

// Metadata describes the kind's fields.
func (Kind) Metadata() destination.Metadata {
	return destination.Metadata{
		Type:     Type,
		Label:    "Kafka",
		Short:    "Kafka",
		Delivers: "one record per delivery, acknowledged by every in-sync replica",
		// An ordered delivery's record is keyed by its ordering key: one
		// key, one partition, and an idempotent producer with one request
		// in flight per broker keeps a partition's records in order.
		Ordered: true,
		Fields: []destination.Field{
			{Name: "brokers", Label: "Bootstrap brokers", Type: destination.FieldStrings, Required: true,
				Example: "kafka-1.example.com:9092", Help: "One to ten host:port bootstrap brokers."},
			{Name: "topic", Label: "Topic", Type: destination.FieldString, Required: true, Example: "webhooks",
				Help: "1 to 249 letters, digits, '.', '_' or '-'."},
			{Name: "sasl", Label: "SASL authentication", Type: destination.FieldObject,
				Help: "The user the records are produced as; none when the cluster does not authenticate.",
				Fields: []destination.Field{
					{Name: "mechanism", Label: "Mechanism", Type: destination.FieldString, Required: true,
						Choices: []string{SASLPlain, SASLScramSHA256, SASLScramSHA512}},
					{Name: "username", Label: "User name", Type: destination.FieldString, Required: true},
					{Name: "password", Label: "Password", Type: destination.FieldString, Required: true, Secret: true},
				}},
			{Name: "tls", Label: "Connect with TLS", Type: destination.FieldBool,
				Help: "Required unless the operator allows plaintext: the system's roots, the broker's host name checked."},
		},
	}
}

// Config is a checked kafka destination: what is stored (its JSON) and
// what its publisher is built from. It holds the SASL password: it
// prints without it.
type Config struct {
	// Brokers are the bootstrap brokers, host:port.
	Brokers []string `json:"brokers"`
	// Topic is where records are produced.
	Topic string `json:"topic"`
	// SASL is how the connections authenticate; nil for none.
	SASL *SASL `json:"sasl,omitempty"`
	// TLS: the connections are TLS.
	TLS bool `json:"tls,omitempty"`
}

// SASL is a kafka destination's SASL authentication.
type SASL struct {
	Mechanism string `json:"mechanism"`
	Username  string `json:"username"`
	Password  string `json:"password"`
}

// Parse reads a kafka destination by allow-list and applies its rules:
// one to ten brokers host:port, a legal topic name, an optional SASL of a
// known mechanism with a username and a password.
func (Kind) Parse(param string, raw json.RawMessage) (destination.Config, error) {
	var c Config
	if err := destination.Decode(param, raw, &c); err != nil {
		return nil, err
	}
	if err := c.check(param); err != nil {
		return nil, err
	}
	return c, nil
}

// check applies the rules of c's fields under param.
func (c Config) check(param string) error {
	switch {
	case len(c.Brokers) == 0:
		return invalid.Missing(param + ".brokers")
	case len(c.Brokers) > maxBrokers:
		return invalid.Value(param+".brokers", "destination_brokers_too_many", fmt.Sprintf("%s.brokers must list at most %d brokers.", param, maxBrokers))
	}
	for i, b := range c.Brokers {
		if _, err := destination.HostPort(fmt.Sprintf("%s.brokers[%d]", param, i), b, "kafka-1.example.com:9092"); err != nil {
			return err
		}
	}
	switch {
	case c.Topic == "":
		return invalid.Missing(param + ".topic")
	case !topicName.MatchString(c.Topic):
		return invalid.Value(param+".topic", "destination_topic_invalid", param+".topic must be 1 to 249 letters, digits, '.', '_' or '-'.")
	}
	if s := c.SASL; s != nil {
		p := param + ".sasl"
		if !slices.Contains([]string{SASLPlain, SASLScramSHA256, SASLScramSHA512}, s.Mechanism) {
			return invalid.Value(p+".mechanism", "destination_sasl_mechanism", p+`.mechanism must be "plain", "scram-sha-256" or "scram-sha-512".`)
		}
		if err := destination.Name(p+".username", s.Username, true); err != nil {
			return err
		}
		return destination.Name(p+".password", s.Password, true)
	}
	return nil
}

// Summary is what a read shows: the SASL password masked.
func (c Config) Summary() map[string]any {
	summary := map[string]any{"type": Type, "brokers": c.Brokers, "topic": c.Topic, "tls": c.TLS}
	if s := c.SASL; s != nil {
		summary["sasl"] = map[string]any{"mechanism": s.Mechanism, "username": s.Username, "password": destination.Masked}
	}
	return summary
}

// Target is kafka://broker,broker/topic.
func (c Config) Target() string { return "kafka://" + strings.Join(c.Brokers, ",") + "/" + c.Topic }

// Addresses are the bootstrap brokers' hosts, each named brokers[i], for
// the operator's private-host rule. The brokers the cluster names in its
// metadata are dialled through the same env.Dial, which checks them.
func (c Config) Addresses() []destination.Address {
	out := make([]destination.Address, 0, len(c.Brokers))
	for i, b := range c.Brokers {
		host, _, _ := net.SplitHostPort(b) // checked by Parse
		out = append(out, destination.Address{Field: fmt.Sprintf("brokers[%d]", i), Host: host})
	}
	return out
}

// Plaintext is "tls" unless TLS is on: the SASL password and every
// payload would go in clear.
func (c Config) Plaintext() string {
	if !c.TLS {
		return "tls"
	}
	return ""
}

// String keeps a Config printed by mistake from showing the password.
func (c Config) String() string { return "kafka.Config(" + c.Target() + ", redacted)" }

// GoString is String, for %#v.
func (c Config) GoString() string { return c.String() }

// LogValue is String, for slog.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

// String keeps a SASL printed by mistake from showing the password.
func (s SASL) String() string { return "kafka.SASL(" + s.Mechanism + ", redacted)" }

// GoString is String, for %#v.
func (s SASL) GoString() string { return s.String() }
