// Package rabbitmq is the rabbitmq destination kind: each delivery is one
// persistent message published to a RabbitMQ exchange (AMQP 0-9-1) on a
// channel in confirm mode, taken only when the broker acks it.
//
// Its url is read by allow-list (ParseURL): scheme, user, password, host,
// port and vhost, nothing else. The publisher dials from those typed
// parts, never from the merchant's text, so that no option of the AMQP
// client (a file it would open, a TLS setting, a heartbeat) can be
// smuggled in a query: a stored ?cacertfile=/dev/zero once grew a worker
// to 3 GiB.
package rabbitmq

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/invalid"
)

// Type is the destination's "type".
const Type = "rabbitmq"

// Default AMQP ports, as the AMQP URI specification gives them.
const (
	amqpPort  = 5672
	amqpsPort = 5671
)

// Kind is the rabbitmq kind.
type Kind struct{}

// New returns the rabbitmq kind, for the registry.
func New() destination.Kind { return Kind{} }

// Metadata describes the kind's fields.
func (Kind) Metadata() destination.Metadata {
	return destination.Metadata{
		Type:     Type,
		Label:    "RabbitMQ",
		Short:    "RabbitMQ",
		Delivers: "one persistent message per delivery, confirmed by the broker",
		// The engine sends an ordering key's deliveries one at a time,
		// each after the broker confirmed the one before, and a queue
		// keeps the order messages were routed to it in.
		Ordered: true,
		Fields: []destination.Field{
			{Name: "url", Label: "Broker URL", Type: destination.FieldString, Required: true, Secret: true,
				Example: "amqps://webhooks:PASSWORD@mq.example.com/prod",
				Help: "amqps://user:password@host[:port]/vhost. Only these parts are read: no query or fragment. " +
					"amqp:// (plaintext) only where the operator allows it."},
			{Name: "exchange", Label: "Exchange", Type: destination.FieldString, Example: "webhooks",
				Help: "The exchange messages are published to; empty is the default exchange."},
			{Name: "routing_key", Label: "Routing key", Type: destination.FieldString, Example: "payouts",
				Help: "The routing key; with the default exchange, required: the queue's name."},
		},
	}
}

// Config is a checked rabbitmq destination: what is stored (its JSON)
// and what its publisher dials. It holds the url's password: it prints
// without it.
type Config struct {
	// URL is the broker, amqp:// or amqps://, with user and password.
	URL string `json:"url"`
	// Exchange is where messages are published; "" is the default
	// exchange.
	Exchange string `json:"exchange,omitempty"`
	// RoutingKey is the messages' routing key: with the default exchange,
	// the queue's name.
	RoutingKey string `json:"routing_key,omitempty"`
}

// Parse reads a rabbitmq destination by allow-list and applies its rules:
// a url of typed parts (ParseURL), an optional exchange and a routing key
// required with the default exchange, each a printable name of at most
// 255 characters.
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
	if _, err := ParseURL(param+".url", c.URL); err != nil {
		return err
	}
	if err := destination.Name(param+".exchange", c.Exchange, false); err != nil {
		return err
	}
	return destination.Name(param+".routing_key", c.RoutingKey, c.Exchange == "")
}

// Summary is what a read shows: the url with its password as net/url
// masks it ("xxxxx").
func (c Config) Summary() map[string]any {
	return map[string]any{"type": Type, "url": c.redacted(), "exchange": c.Exchange, "routing_key": c.RoutingKey}
}

// Target is the url without its password.
func (c Config) Target() string { return c.redacted() }

// redacted is the url with its password masked; the bare mask when it
// is not a URL at all (a Config not made by Parse), so as never to show
// its text.
func (c Config) redacted() string {
	u, err := url.Parse(c.URL)
	if err != nil {
		return destination.Masked
	}
	return u.Redacted()
}

// Addresses is the broker's host, for the operator's private-host rule.
func (c Config) Addresses() []destination.Address {
	u, err := ParseURL("url", c.URL)
	if err != nil {
		return []destination.Address{{Field: "url"}}
	}
	return []destination.Address{{Field: "url", Host: u.Host}}
}

// Plaintext is "url" unless the url is amqps://: amqp:// carries the
// password and every payload in clear.
func (c Config) Plaintext() string {
	if !strings.HasPrefix(strings.ToLower(c.URL), "amqps://") {
		return "url"
	}
	return ""
}

// String keeps a Config printed by mistake from showing the password.
func (c Config) String() string { return "rabbitmq.Config(" + c.redacted() + ")" }

// GoString is String, for %#v.
func (c Config) GoString() string { return c.String() }

// LogValue is String, for slog.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

// URL is a rabbitmq url read by allow-list: the only parts the publisher
// uses. It dials from these, never from the merchant's text, so that no
// option of a client library (certfile, cacertfile, keyfile,
// server_name_indication, auth_mechanism, heartbeat, connection_timeout,
// channel_max…) can be smuggled in a query.
type URL struct {
	// Secure is amqps: TLS to the broker.
	Secure bool
	// Username and Password are the PLAIN credentials; "" for none.
	Username, Password string
	// Host is a DNS name or an IP address, without brackets.
	Host string
	// Port is the broker's port, the scheme's default when not given.
	Port int
	// Vhost is the virtual host as the AMQP URI specification reads the
	// path: "/" when there is no path or only "/".
	Vhost string
}

// Address is host:port, for a dialer.
func (u URL) Address() string { return net.JoinHostPort(u.Host, strconv.Itoa(u.Port)) }

// String keeps a URL printed by mistake from showing the password.
func (u URL) String() string {
	return fmt.Sprintf("rabbitmq.URL(secure=%v, %s, vhost %q)", u.Secure, u.Address(), u.Vhost)
}

// GoString is String, for %#v.
func (u URL) GoString() string { return u.String() }

// ParseURL reads raw as an AMQP URL: amqp:// or amqps://, optional user
// and password, a host, an optional port and an optional vhost path, and
// nothing else (no query, no fragment). param names the field; a
// refusal never quotes the value.
func ParseURL(param, raw string) (URL, error) {
	bad := invalid.Value(param, "destination_url_invalid",
		param+" must be an amqp:// or amqps:// URL such as amqps://user:password@broker.example.com/vhost, without a query or a fragment.")
	if raw == "" {
		return URL{}, invalid.Missing(param)
	}
	if len(raw) > destination.MaxURL || strings.ContainsFunc(raw, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return URL{}, bad
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "amqp" && u.Scheme != "amqps") || u.Opaque != "" {
		return URL{}, bad
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(raw, "?#") {
		return URL{}, invalid.Value(param, "destination_url_options", param+
			" must not have a query or a fragment: the connection's options (TLS, heartbeat, authentication) are the engine's to set.")
	}
	out := URL{Secure: u.Scheme == "amqps", Host: u.Hostname(), Port: amqpPort, Vhost: "/"}
	if out.Secure {
		out.Port = amqpsPort
	}
	if err := destination.CheckHostPort(param, out.Host, u.Port(), false); err != nil {
		return URL{}, err
	}
	if u.Port() != "" {
		out.Port, _ = strconv.Atoi(u.Port())
	}
	if u.User != nil {
		out.Username = u.User.Username()
		out.Password, _ = u.User.Password()
	}
	if len(u.Path) > 1 {
		out.Vhost = u.Path[1:]
	}
	if !namePart(out.Username) || !namePart(out.Password) || !namePart(out.Vhost) {
		return URL{}, bad
	}
	return out, nil
}

// namePart is a user, password or vhost the url may hold: at most
// MaxField characters, none a control character.
func namePart(s string) bool {
	return len(s) <= destination.MaxField && !strings.ContainsFunc(s, destination.IsControl)
}
