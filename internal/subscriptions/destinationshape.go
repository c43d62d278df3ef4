package subscriptions

import (
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/keybounds"
)

// Errors of a stored destination that this build will not open: a value
// sealed by an older build, before a rule below existed, is refused at
// each attempt rather than handed to a client library that would read
// more into it (an AMQP URL's ?cacertfile= opens a file of the worker's).
// Each wraps the *invalid.Error of the rule it breaks, whose message names
// the field and never quotes its value.
var (
	// ErrDestinationInvalid: the stored destination breaks a rule of its
	// shape (Destination.Check). Its attempt error code is
	// CodeDestinationInvalid.
	ErrDestinationInvalid = errors.New(CodeDestinationInvalid)
	// ErrDestinationPlaintext: the stored destination would carry its
	// credentials and payloads in clear and the operator does not allow
	// it (Destination.CheckTransport). Its attempt error code is
	// CodeDestinationPlaintext.
	ErrDestinationPlaintext = errors.New(CodeDestinationPlaintext)
)

// Codes of a refused destination: the rule of the API's 400 at create and
// update, and the attempt error code of a stored one.
const (
	CodeDestinationInvalid   = "destination_invalid"
	CodeDestinationPlaintext = "destination_plaintext_refused"
)

// Default AMQP ports, as the AMQP URI specification gives them.
const (
	amqpPort  = 5672
	amqpsPort = 5671
)

// AMQPURL is a rabbitmq destination's URL read by allow-list: the only
// parts the engine uses. The dispatcher dials from these, never from the
// merchant's text, so that no option of a client library (certfile,
// cacertfile, keyfile, server_name_indication, auth_mechanism, heartbeat,
// connection_timeout, channel_max…) can be smuggled in a query.
type AMQPURL struct {
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
func (u AMQPURL) Address() string { return net.JoinHostPort(u.Host, strconv.Itoa(u.Port)) }

// ParseAMQPURL reads raw as an AMQP URL: amqp:// or amqps://, optional
// user and password, a host, an optional port and an optional vhost path,
// and nothing else (no query, no fragment). param names the field.
func ParseAMQPURL(param, raw string) (AMQPURL, error) {
	bad := invalid.Value(param, "destination_url_invalid",
		param+" must be an amqp:// or amqps:// URL such as amqps://user:password@broker.example.com/vhost, without a query or a fragment.")
	if raw == "" {
		return AMQPURL{}, invalid.Missing(param)
	}
	if len(raw) > maxURLLength || strings.ContainsFunc(raw, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return AMQPURL{}, bad
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "amqp" && u.Scheme != "amqps") || u.Opaque != "" {
		return AMQPURL{}, bad
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(raw, "?#") {
		return AMQPURL{}, invalid.Value(param, "destination_url_options", param+
			" must not have a query or a fragment: the connection's options (TLS, heartbeat, authentication) are the engine's to set.")
	}
	out := AMQPURL{Secure: u.Scheme == "amqps", Host: u.Hostname(), Port: amqpPort, Vhost: "/"}
	if out.Secure {
		out.Port = amqpsPort
	}
	if err := checkHostPort(param, out.Host, u.Port(), false); err != nil {
		return AMQPURL{}, err
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
	if printable := func(s string) bool { return len(s) <= maxDestinationField && !strings.ContainsFunc(s, isControl) }; !printable(out.Username) ||
		!printable(out.Password) || !printable(out.Vhost) {
		return AMQPURL{}, bad
	}
	return out, nil
}

// isControl is a control character: never part of a name or a credential.
func isControl(r rune) bool { return r < ' ' || r == 0x7f }

// checkHostPort checks a broker's host, a DNS name or an IP address (what
// a dialer can take and nothing it would read otherwise), and its port, in
// range; requirePort when the field must name one.
func checkHostPort(param, host, port string, requirePort bool) error {
	if host == "" {
		return invalid.Value(param, "destination_no_host", param+" must name a host.")
	}
	if !hostName(host) {
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

// hostName reports whether host is an IP address without a zone or a DNS
// name: dot-separated labels of letters, digits, '-' and '_', at most 63
// characters each and 253 in all.
func hostName(host string) bool {
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

// hostPort checks a host:port field (a kafka broker, a pubsub endpoint).
func hostPort(param, v, example string) (host string, err error) {
	host, port, splitErr := net.SplitHostPort(v)
	if splitErr != nil || port == "" {
		return "", invalid.Value(param, "destination_broker_invalid", param+" must be host:port, such as "+example+".")
	}
	return host, checkHostPort(param, host, port, true)
}

// Check applies the rules of d's shape, those that need neither DNS nor
// the operator's settings: each field of its type by allow-list. The
// registry checks them when a destination is set, and OpenDestination
// again when one is opened for an attempt, so that a destination stored by
// an older build with laxer rules is refused rather than used. Its
// refusals are *invalid.Error naming param's fields.
func (d Destination) Check(param string) error {
	switch d.Type {
	case DestinationRabbitMQ:
		if _, err := ParseAMQPURL(param+".url", d.URL); err != nil {
			return err
		}
		if err := name(param+".exchange", d.Exchange, false); err != nil {
			return err
		}
		return name(param+".routing_key", d.RoutingKey, d.Exchange == "")
	case DestinationKafka:
		return d.checkKafka(param)
	case DestinationSQS:
		return d.checkSQS(param)
	case DestinationPubSub:
		return d.checkPubSub(param)
	case DestinationPoll:
		return nil
	}
	return invalid.Value(param+".type", "destination_type_unknown", param+".type is not a destination type of this build.")
}

// checkKafka: one to ten brokers host:port, a legal topic name, an
// optional SASL of a known mechanism with a username and a password.
func (d Destination) checkKafka(param string) error {
	switch {
	case len(d.Brokers) == 0:
		return invalid.Missing(param + ".brokers")
	case len(d.Brokers) > maxKafkaBrokers:
		return invalid.Value(param+".brokers", "destination_brokers_too_many", fmt.Sprintf("%s.brokers must list at most %d brokers.", param, maxKafkaBrokers))
	}
	for i, b := range d.Brokers {
		if _, err := hostPort(fmt.Sprintf("%s.brokers[%d]", param, i), b, "kafka-1.example.com:9092"); err != nil {
			return err
		}
	}
	switch {
	case d.Topic == "":
		return invalid.Missing(param + ".topic")
	case !kafkaTopic.MatchString(d.Topic):
		return invalid.Value(param+".topic", "destination_topic_invalid", param+".topic must be 1 to 249 letters, digits, '.', '_' or '-'.")
	}
	if s := d.SASL; s != nil {
		p := param + ".sasl"
		if !slices.Contains([]string{SASLPlain, SASLScramSHA256, SASLScramSHA512}, s.Mechanism) {
			return invalid.Value(p+".mechanism", "destination_sasl_mechanism", p+`.mechanism must be "plain", "scram-sha-256" or "scram-sha-512".`)
		}
		if err := name(p+".username", s.Username, true); err != nil {
			return err
		}
		return name(p+".password", s.Password, true)
	}
	return nil
}

// checkSQS: a queue_url and an optional endpoint that are http(s) URLs
// (webURL), a region, and the access key's parts when given.
func (d Destination) checkSQS(param string) error {
	if _, err := webURL(param+".queue_url", d.QueueURL, true); err != nil {
		return err
	}
	if d.Endpoint != "" {
		u, err := webURL(param+".endpoint", d.Endpoint, true)
		if err != nil {
			return err
		}
		if u.RawQuery != "" || u.ForceQuery {
			return invalid.Value(param+".endpoint", "destination_endpoint_invalid", param+".endpoint must be a URL without a query, such as https://sqs.example.com.")
		}
	}
	switch {
	case d.Region == "":
		return invalid.Missing(param + ".region")
	case !awsRegion.MatchString(d.Region):
		return invalid.Value(param+".region", "destination_region_invalid", param+".region must be an AWS region such as eu-west-1.")
	}
	if d.AccessKeyID == "" && d.SecretAccessKey == "" {
		return nil // the engine's credentials, allowed or not by sqsCredentials
	}
	if err := name(param+".access_key_id", d.AccessKeyID, true); err != nil {
		return err
	}
	return name(param+".secret_access_key", d.SecretAccessKey, true)
}

// checkPubSub: a project and a topic id by Google's rules, an optional
// endpoint host:port, and a service account key unless an endpoint (an
// emulator) is named.
func (d Destination) checkPubSub(param string) error {
	switch {
	case d.ProjectID == "":
		return invalid.Missing(param + ".project_id")
	case !gcpProject.MatchString(d.ProjectID):
		return invalid.Value(param+".project_id", "destination_project_invalid", param+".project_id must be a Google Cloud project id: 6 to 30 lowercase letters, digits or hyphens.")
	case d.TopicID == "":
		return invalid.Missing(param + ".topic_id")
	case !pubsubTopic.MatchString(d.TopicID) || strings.HasPrefix(d.TopicID, "goog"):
		return invalid.Value(param+".topic_id", "destination_topic_invalid", param+".topic_id must be a Pub/Sub topic id: 3 to 255 characters, starting with a letter, not with goog.")
	}
	if d.Endpoint != "" {
		if _, err := hostPort(param+".endpoint", d.Endpoint, "pubsub.googleapis.com:443"); err != nil {
			return err
		}
	}
	switch {
	case d.CredentialsJSON != "":
		_, err := parseServiceAccount(param+".credentials_json", d.CredentialsJSON)
		return err
	case d.Endpoint == "":
		return invalid.Missing(param + ".credentials_json")
	}
	return nil
}

// Google's own addresses, the only ones a service account key may name:
// the key's JSON is read by Google's library, which would fetch tokens
// from whatever token_uri it names (with its own HTTP client, not the
// deliveries' dialer) and publish under whatever universe_domain.
const (
	googleTokenURI       = "https://oauth2.googleapis.com/token"
	googleUniverseDomain = "googleapis.com"
)

// serviceAccountKey is a service account key as Google gives it (the JSON
// file of a key made in the console). Only these members are accepted;
// external_account, authorized_user, impersonated_service_account and
// the rest, which can name files, commands and other token endpoints, are
// refused by their type.
type serviceAccountKey struct {
	Type                    string `json:"type,omitempty"`
	ProjectID               string `json:"project_id,omitempty"`
	PrivateKeyID            string `json:"private_key_id,omitempty"`
	PrivateKey              string `json:"private_key,omitempty"`
	ClientEmail             string `json:"client_email,omitempty"`
	ClientID                string `json:"client_id,omitempty"`
	AuthURI                 string `json:"auth_uri,omitempty"`
	TokenURI                string `json:"token_uri,omitempty"`
	AuthProviderX509CertURL string `json:"auth_provider_x509_cert_url,omitempty"`
	ClientX509CertURL       string `json:"client_x509_cert_url,omitempty"`
	UniverseDomain          string `json:"universe_domain,omitempty"`
}

// parseServiceAccount reads a service account key by allow-list: type
// "service_account", an email, an RSA private key within keybounds, and
// Google's own token endpoint and universe when they are named. Its
// messages never quote the key.
func parseServiceAccount(param, raw string) (serviceAccountKey, error) {
	bad := invalid.Value(param, "destination_credentials_invalid", param+
		` must be a service account key as Google gives it: a JSON object with "type": "service_account", "client_email" and "private_key", and no other member than Google puts in one.`)
	if len(raw) > maxCredentialsJSON {
		return serviceAccountKey{}, bad
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	var key serviceAccountKey
	if err := dec.Decode(&key); err != nil || dec.More() {
		return serviceAccountKey{}, bad
	}
	if key.Type != "service_account" {
		return serviceAccountKey{}, invalid.Value(param, "destination_credentials_type", param+
			` must be a key of "type": "service_account"; other kinds of Google credentials (external_account, authorized_user, impersonation) are not accepted.`)
	}
	for _, f := range []string{key.ProjectID, key.PrivateKeyID, key.ClientEmail, key.ClientID, key.AuthURI, key.AuthProviderX509CertURL, key.ClientX509CertURL} {
		if len(f) > maxURLLength || strings.ContainsFunc(f, isControl) {
			return serviceAccountKey{}, bad
		}
	}
	if key.ClientEmail == "" || !strings.Contains(key.ClientEmail, "@") {
		return serviceAccountKey{}, bad
	}
	if (key.TokenURI != "" && key.TokenURI != googleTokenURI) || (key.UniverseDomain != "" && key.UniverseDomain != googleUniverseDomain) {
		return serviceAccountKey{}, invalid.Value(param, "destination_credentials_endpoint", fmt.Sprintf(
			"%s may name only Google's own token_uri (%s) and universe_domain (%s).", param, googleTokenURI, googleUniverseDomain))
	}
	// Google signs with RS256: an RSA key, within keybounds.
	pk, err := keybounds.ParsePrivateKeyPEM([]byte(key.PrivateKey))
	if _, isRSA := pk.(*rsa.PrivateKey); err == nil && !isRSA {
		return serviceAccountKey{}, bad
	}
	if errors.Is(err, keybounds.ErrKeyNotAccepted) {
		return serviceAccountKey{}, keyFault(param, err)
	}
	if err != nil {
		return serviceAccountKey{}, bad
	}
	return key, nil
}

// ServiceAccountJSON is the gcp_pubsub destination's service account key
// as the engine hands it to Google's library: rebuilt from the members it
// uses, checked again, Google's own token endpoint and universe always
// named, so that nothing else of the merchant's text reaches the library.
// "" when the destination has none (an emulator).
func (d Destination) ServiceAccountJSON() ([]byte, error) {
	if d.CredentialsJSON == "" {
		return nil, nil
	}
	key, err := parseServiceAccount("destination.credentials_json", d.CredentialsJSON)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDestinationInvalid, err)
	}
	return json.Marshal(serviceAccountKey{Type: key.Type, ProjectID: key.ProjectID, PrivateKeyID: key.PrivateKeyID,
		PrivateKey: key.PrivateKey, ClientEmail: key.ClientEmail, ClientID: key.ClientID, TokenURI: googleTokenURI,
		UniverseDomain: googleUniverseDomain})
}

// plaintextField names the field of d that makes its connections carry
// credentials and payloads in clear, "" when none does: an amqp:// url, a
// kafka destination without tls, an http:// sqs queue_url or endpoint, a
// gcp_pubsub endpoint without credentials (an emulator, dialled without
// TLS).
func (d Destination) plaintextField() string {
	switch d.Type {
	case DestinationRabbitMQ:
		if !strings.HasPrefix(strings.ToLower(d.URL), "amqps://") {
			return "url"
		}
	case DestinationKafka:
		if !d.TLS {
			return "tls"
		}
	case DestinationSQS:
		for _, f := range []struct{ name, value string }{{"queue_url", d.QueueURL}, {"endpoint", d.Endpoint}} {
			if strings.HasPrefix(strings.ToLower(f.value), "http://") {
				return f.name
			}
		}
	case DestinationPubSub:
		if d.Endpoint != "" && d.CredentialsJSON == "" {
			return "endpoint"
		}
	}
	return ""
}

// checkTransport refuses, under param, a destination whose connections
// would be in clear, unless allowPlaintext (WEBHOOKD_ALLOW_HTTP_TARGETS,
// the switch that lets webhooks go to http://).
func (d Destination) checkTransport(param string, allowPlaintext bool) *invalid.Error {
	field := d.plaintextField()
	if field == "" || allowPlaintext {
		return nil
	}
	p := param + "." + field
	return invalid.Value(p, CodeDestinationPlaintext, fmt.Sprintf(
		"%s would send credentials and payloads in clear (amqp://, kafka without tls, http://, a Pub/Sub emulator); "+
			"this server delivers to brokers only over TLS: use amqps://, \"tls\": true, https:// or credentials_json.", p))
}

// CheckTransport is what an attempt asks of a stored destination: an
// error wrapping ErrDestinationPlaintext when it would carry credentials
// and payloads in clear and allowPlaintext (the dispatcher's AllowHTTP) is
// off, as it may be since the destination was set.
func (d Destination) CheckTransport(allowPlaintext bool) error {
	if bad := d.checkTransport("destination", allowPlaintext); bad != nil {
		return fmt.Errorf("%w: %w", ErrDestinationPlaintext, bad)
	}
	return nil
}
