// Package mqtt is the destination kind "mqtt": one MQTT 5 message per
// delivery, published at QoS 1 to a topic of the merchant's broker and
// done when the broker's PUBACK says it took it. The webhook's headers
// travel as MQTT 5 user properties, so that a consumer verifies the
// signature from the message alone. The client is Eclipse Paho's
// (github.com/eclipse/paho.golang/paho), over a connection dialled by the
// engine's dialer.
package mqtt

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/invalid"
)

// Type is the destination's "type".
const Type = "mqtt"

// maxTopic bounds a topic name, in bytes. MQTT allows 65,535; a webhook's
// topic is a name a person types, and a bound this low keeps every
// stored form small.
const maxTopic = 255

// Config is an mqtt destination: where it publishes and as whom.
type Config struct {
	// Broker is the broker's host:port.
	Broker string `json:"broker"`
	// Topic is the topic name every message is published to.
	Topic string `json:"topic"`
	// TLS makes the connection TLS (the broker's certificate checked
	// against the system's roots and the broker's host name).
	TLS bool `json:"tls"`
	// Username and Password are the CONNECT packet's credentials; none
	// when empty.
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// metadata is the kind's description, made anew for each caller; Ordered
// is true because one publisher's sends on one connection to one topic
// reach a subscriber in the order they were sent (MQTT 5, 4.6), and an
// ordered line sends its next delivery once the last is confirmed, which
// desttest's ordered row checks.
func metadata() destination.Metadata {
	return destination.Metadata{
		Type:     Type,
		Label:    "MQTT",
		Short:    "MQTT",
		Delivers: "one MQTT 5 message per delivery, published at QoS 1 and confirmed by the broker's PUBACK; the webhook's headers as user properties",
		Ordered:  true,
		Fields: []destination.Field{
			{Name: "broker", Label: "Broker", Type: destination.FieldString, Required: true, Example: "mqtt.example.com:8883",
				Help: "The broker's host and port: 8883 for TLS, 1883 in clear."},
			{Name: "topic", Label: "Topic", Type: destination.FieldString, Required: true, Example: "webhooks/payouts",
				Help: "The topic name messages are published to: at most 255 bytes, no wildcard (+ or #), not starting with $."},
			{Name: "tls", Label: "TLS", Type: destination.FieldBool,
				Help: "Connect with TLS, the broker's certificate checked against public authorities. Without it, credentials and messages travel in clear."},
			{Name: "username", Label: "Username", Type: destination.FieldString,
				Help: "The user webhookd connects as, allowed to publish to the topic and nothing else."},
			{Name: "password", Label: "Password", Type: destination.FieldString, Secret: true},
		},
	}
}

// parse reads and checks an mqtt destination (Kind.Parse).
func parse(param string, raw json.RawMessage) (Config, error) {
	var c Config
	if err := destination.Decode(param, raw, &c); err != nil {
		return Config{}, err
	}
	if c.Broker == "" {
		return Config{}, invalid.Missing(param + ".broker")
	}
	if len(c.Broker) > destination.MaxField {
		return Config{}, invalid.Value(param+".broker", "destination_broker_invalid", param+".broker must be host:port, such as mqtt.example.com:8883.")
	}
	if _, err := destination.HostPort(param+".broker", c.Broker, "mqtt.example.com:8883"); err != nil {
		return Config{}, err
	}
	if err := checkTopic(param+".topic", c.Topic); err != nil {
		return Config{}, err
	}
	if err := destination.Name(param+".username", c.Username, false); err != nil {
		return Config{}, err
	}
	if err := destination.Name(param+".password", c.Password, false); err != nil {
		return Config{}, err
	}
	return c, nil
}

// checkTopic applies MQTT's rules of a topic name a client publishes to
// (MQTT 5, 4.7): UTF-8 without U+0000, no wildcard; and webhookd's: at
// most maxTopic bytes, no control character (which the standard
// discourages), and not the $ topics a broker keeps for itself ($SYS).
func checkTopic(param, topic string) error {
	switch {
	case topic == "":
		return invalid.Missing(param)
	case len(topic) > maxTopic || !utf8.ValidString(topic) || strings.ContainsFunc(topic, unicode.IsControl):
		return invalid.Value(param, "destination_topic_invalid",
			fmt.Sprintf("%s must be at most %d bytes of UTF-8, none of them a control character.", param, maxTopic))
	case strings.ContainsAny(topic, "+#"):
		return invalid.Value(param, "destination_topic_wildcard", param+" must name one topic: a wildcard (+ or #) is for subscribing.")
	case strings.HasPrefix(topic, "$"):
		return invalid.Value(param, "destination_topic_reserved", param+" must not start with $: those topics are the broker's own.")
	}
	return nil
}

// Summary implements destination.Config: the password masked.
func (c Config) Summary() map[string]any {
	s := map[string]any{"broker": c.Broker, "topic": c.Topic, "tls": c.TLS}
	if c.Username != "" {
		s["username"] = c.Username
	}
	if c.Password != "" {
		s["password"] = destination.Masked
	}
	return s
}

// Target implements destination.Config: mqtts://broker/topic, or
// mqtt:// in clear.
func (c Config) Target() string {
	scheme := "mqtt"
	if c.TLS {
		scheme = "mqtts"
	}
	return scheme + "://" + c.Broker + "/" + c.Topic
}

// Addresses implements destination.Config: the broker's host.
func (c Config) Addresses() []destination.Address {
	host, _, err := net.SplitHostPort(c.Broker)
	if err != nil {
		return nil // Parse refused it already.
	}
	return []destination.Address{{Field: "broker", Host: host}}
}

// Plaintext implements destination.Config: "tls" when it is off, since
// the credentials and the messages then cross in clear.
func (c Config) Plaintext() string {
	if !c.TLS {
		return "tls"
	}
	return ""
}

// String is the target: never the password.
func (c Config) String() string { return c.Target() }

// GoString is the target, for %#v: never the password.
func (c Config) GoString() string { return "mqtt.Config(" + c.Target() + ")" }

// LogValue is what slog records: the target and the user, never the
// password.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(slog.String("target", c.Target()), slog.String("username", c.Username))
}
