package nats

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/invalid"
)

// Bounds of a destination's fields.
const (
	// maxServers is how many servers a destination names: a cluster's
	// seeds, not a list of every node (the client learns no others).
	maxServers = 5
	// maxSubject is the longest subject.
	maxSubject = 255
)

// Config is a nats destination: the servers of one NATS system, the
// subject its JetStream stream takes, and who publishes.
type Config struct {
	// Servers are host:port addresses of the system's servers; the
	// engine builds the URLs (no scheme, no options).
	Servers []string `json:"servers"`
	// Subject is the subject every message is published to; a stream of
	// the merchant's must take it.
	Subject string `json:"subject"`
	// TLS makes the connection TLS (certificates checked against the
	// system's roots and the server's name).
	TLS bool `json:"tls,omitempty"`
	// Username and Password are a user's credentials, both or none.
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// Token is an authorization token, instead of a user.
	Token string `json:"token,omitempty"`
}

// fields are the kind's fields, in the form's order.
var fields = []destination.Field{
	{Name: "servers", Label: "Servers", Type: destination.FieldStrings, Required: true, Example: "nats.example.com:4222",
		Help: fmt.Sprintf("One to %d of the NATS system's servers, each host:port (no scheme or options).", maxServers)},
	{Name: "subject", Label: "Subject", Type: destination.FieldString, Required: true, Example: "webhooks.payouts",
		Help: "The subject each delivery is published to: a JetStream stream of yours must take it. No wildcards."},
	{Name: "tls", Label: "TLS", Type: destination.FieldBool,
		Help: "Connect with TLS; the server's certificate must be valid for its host name."},
	{Name: "username", Label: "Username", Type: destination.FieldString,
		Help: "A user allowed to publish to the subject (and to receive the stream's acknowledgements on _INBOX.>)."},
	{Name: "password", Label: "Password", Type: destination.FieldString, Secret: true, Help: "The user's password."},
	{Name: "token", Label: "Token", Type: destination.FieldString, Secret: true,
		Help: "An authorization token, instead of a username and password."},
}

// parse reads and checks a nats destination under param.
func parse(param string, raw json.RawMessage) (Config, error) {
	var c Config
	if err := destination.Decode(param, raw, &c); err != nil {
		return Config{}, err
	}
	return c, c.check(param)
}

// check applies the rules of every field.
func (c Config) check(param string) error {
	if len(c.Servers) == 0 {
		return invalid.Missing(param + ".servers")
	}
	if len(c.Servers) > maxServers {
		return invalid.Value(param+".servers", "destination_servers_count",
			fmt.Sprintf("%s.servers must name at most %d servers.", param, maxServers))
	}
	for i, s := range c.Servers {
		field := param + ".servers[" + strconv.Itoa(i) + "]"
		if _, err := destination.HostPort(field, s, "nats.example.com:4222"); err != nil {
			return err
		}
		if slices.Contains(c.Servers[:i], s) {
			return invalid.Value(field, "destination_server_repeated", field+" names a server named before it.")
		}
	}
	if err := checkSubject(param+".subject", c.Subject); err != nil {
		return err
	}
	for _, f := range []struct{ name, value string }{{"username", c.Username}, {"password", c.Password}, {"token", c.Token}} {
		if err := destination.Name(param+"."+f.name, f.value, false); err != nil {
			return err
		}
	}
	switch {
	case c.Username != "" && c.Password == "":
		return invalid.Value(param+".password", "destination_password_missing", param+".password is required with a username.")
	case c.Password != "" && c.Username == "":
		return invalid.Value(param+".username", "destination_username_missing", param+".username is required with a password.")
	case c.Token != "" && c.Username != "":
		return invalid.Value(param+".token", "destination_credentials_both",
			param+".token cannot be set with a username: a server checks one or the other.")
	}
	return nil
}

// checkSubject applies NATS's rules of a subject one publishes to, and
// webhookd's: dot-separated tokens of printable ASCII without spaces, no
// wildcard (* or >, not even inside a token, where some clients read it
// as one), at most maxSubject characters, and none of the subjects the
// servers keep for themselves ($JS.API…, $SYS…, replies on _INBOX.…): a
// publish there is an API call or a reply, not a message to a stream
// (a body sent to $JS.API.STREAM.PURGE.x would purge a stream).
func checkSubject(param, s string) error {
	if s == "" {
		return invalid.Missing(param)
	}
	bad := invalid.Value(param, "destination_subject_invalid", fmt.Sprintf(
		"%s must be at most %d characters: dot-separated tokens of printable ASCII without spaces or wildcards (* >), such as webhooks.payouts.",
		param, maxSubject))
	if len(s) > maxSubject || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r > '~' || r == '*' || r == '>' }) {
		return bad
	}
	if slices.Contains(strings.Split(s, "."), "") {
		return bad
	}
	if strings.HasPrefix(s, "$") || s == "_INBOX" || strings.HasPrefix(s, "_INBOX.") {
		return invalid.Value(param, "destination_subject_reserved",
			param+" must not start with $ or _INBOX: those subjects are the servers' own (JetStream's API, the system account, replies).")
	}
	return nil
}

// Summary implements destination.Config: every field set, credentials
// masked.
func (c Config) Summary() map[string]any {
	s := map[string]any{"servers": slices.Clone(c.Servers), "subject": c.Subject, "tls": c.TLS}
	if c.Username != "" {
		s["username"] = c.Username
	}
	if c.Password != "" {
		s["password"] = destination.Masked
	}
	if c.Token != "" {
		s["token"] = destination.Masked
	}
	return s
}

// scheme is the URL scheme of the servers: nats:// is clear text.
func (c Config) scheme() string {
	if c.TLS {
		return "tls"
	}
	return "nats"
}

// Target implements destination.Config: the servers and the subject,
// without credentials ("nats://a:4222,b:4222/webhooks.payouts").
func (c Config) Target() string {
	return c.scheme() + "://" + strings.Join(c.Servers, ",") + "/" + c.Subject
}

// urls are the servers' URLs, as the client takes them: no credentials
// in them (they go in the CONNECT message, by option).
func (c Config) urls() []string {
	out := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		out[i] = c.scheme() + "://" + s
	}
	return out
}

// Addresses implements destination.Config: every server.
func (c Config) Addresses() []destination.Address {
	out := make([]destination.Address, 0, len(c.Servers))
	for i, s := range c.Servers {
		host, _, _ := net.SplitHostPort(s)
		out = append(out, destination.Address{Field: "servers[" + strconv.Itoa(i) + "]", Host: host})
	}
	return out
}

// Plaintext implements destination.Config: "tls" when it is not set.
func (c Config) Plaintext() string {
	if c.TLS {
		return ""
	}
	return "tls"
}

// String is the target: no credential.
func (c Config) String() string { return c.Target() }

// GoString is the target too, for %#v.
func (c Config) GoString() string { return "nats.Config(" + c.Target() + ")" }

// LogValue is the target, for slog.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.Target()) }
