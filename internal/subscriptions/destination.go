package subscriptions

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/signer"
)

// Destination types: where a subscription's deliveries go.
const (
	// DestinationWebhook is an HTTP endpoint, the subscription's url: what
	// a subscription without a destination is.
	DestinationWebhook = "webhook"
	// DestinationRabbitMQ publishes to a RabbitMQ exchange (AMQP 0-9-1).
	DestinationRabbitMQ = "rabbitmq"
	// DestinationKafka produces to a Kafka topic.
	DestinationKafka = "kafka"
	// DestinationSQS sends to an Amazon SQS queue.
	DestinationSQS = "sqs"
	// DestinationPubSub publishes to a Google Cloud Pub/Sub topic.
	DestinationPubSub = "gcp_pubsub"
	// DestinationPoll is dialled never: the merchant reads its deliveries
	// with GET /v1/webhook_subscriptions/{id}/poll (docs/poll.md).
	DestinationPoll = store.DestinationPoll
)

// DestinationTypes are every destination type, in the order the
// documentation lists them: the default of WEBHOOKD_DESTINATIONS.
func DestinationTypes() []string {
	return []string{DestinationWebhook, DestinationRabbitMQ, DestinationKafka, DestinationSQS, DestinationPubSub, DestinationPoll}
}

// Kafka SASL mechanisms.
const (
	SASLPlain       = "plain"
	SASLScramSHA256 = "scram-sha-256"
	SASLScramSHA512 = "scram-sha-512"
)

// Limits of the destination fields.
const (
	maxDestinationField = 255
	maxKafkaBrokers     = 10
	maxCredentialsJSON  = 16 << 10
	// maskedSecret is what a read shows of a credential.
	maskedSecret = "••••••"
)

// Destination is a checked broker destination, the whole of it: what is
// sealed for storage and what the dispatcher opens for each attempt. Each
// type uses its own fields (see the rules of each below). It holds
// credentials: it prints as its type alone.
type Destination struct {
	Type string `json:"type"`
	// URL is the rabbitmq broker (amqp:// or amqps://, with user and
	// password); Exchange and RoutingKey where its message is published.
	URL        string `json:"url,omitempty"`
	Exchange   string `json:"exchange,omitempty"`
	RoutingKey string `json:"routing_key,omitempty"`
	// Brokers (host:port) and Topic are the kafka cluster and topic; SASL
	// and TLS how its connections authenticate.
	Brokers []string   `json:"brokers,omitempty"`
	Topic   string     `json:"topic,omitempty"`
	SASL    *KafkaSASL `json:"sasl,omitempty"`
	TLS     bool       `json:"tls,omitempty"`
	// QueueURL, Region and the access key are the sqs queue and who sends.
	QueueURL        string `json:"queue_url,omitempty"`
	Region          string `json:"region,omitempty"`
	AccessKeyID     string `json:"access_key_id,omitempty"`
	SecretAccessKey string `json:"secret_access_key,omitempty"`
	// ProjectID, TopicID and CredentialsJSON (a service account key) are
	// the gcp_pubsub topic and who publishes.
	ProjectID       string `json:"project_id,omitempty"`
	TopicID         string `json:"topic_id,omitempty"`
	CredentialsJSON string `json:"credentials_json,omitempty"`
	// Endpoint replaces the cloud service's own address (sqs: a URL;
	// gcp_pubsub: host:port), for a compatible server or an emulator.
	Endpoint string `json:"endpoint,omitempty"`
}

// KafkaSASL is a kafka destination's SASL authentication.
type KafkaSASL struct {
	Mechanism string `json:"mechanism"`
	Username  string `json:"username"`
	Password  string `json:"password"`
}

// String keeps a Destination printed by mistake from showing a credential.
func (d Destination) String() string { return "subscriptions.Destination(" + d.Type + ", redacted)" }

// GoString is String, for %#v.
func (d Destination) GoString() string { return d.String() }

// LogValue is String, for slog.
func (d Destination) LogValue() slog.Value { return slog.StringValue(d.String()) }

// OpenDestination opens what the registry sealed and checks its shape
// again (Destination.Check): a destination that breaks a rule of this
// build is an error wrapping ErrDestinationInvalid and the rule's
// *invalid.Error, whose text names the field and never its value.
func OpenDestination(sealer *signer.Sealer, sealed []byte) (Destination, error) {
	plain, err := sealer.Open(sealed)
	if err != nil {
		return Destination{}, fmt.Errorf("open destination: %w", err)
	}
	var d Destination
	if err := json.Unmarshal([]byte(plain), &d); err != nil {
		// The JSON error could quote a credential: say only that it failed.
		return Destination{}, fmt.Errorf("open destination: %w: not the JSON of a destination", ErrDestinationInvalid)
	}
	// A value sealed by an older build may break a rule added since: it
	// is refused here, before any client library reads it.
	if err := d.Check("destination"); err != nil {
		return Destination{}, fmt.Errorf("open destination: %w: %w", ErrDestinationInvalid, err)
	}
	return d, nil
}

// destinationFields are the fields type takes besides type; false for a
// type that is not one.
func destinationFields(typ string) ([]string, bool) {
	switch typ {
	case DestinationWebhook, DestinationPoll:
		return nil, true
	case DestinationRabbitMQ:
		return []string{"url", "exchange", "routing_key"}, true
	case DestinationKafka:
		return []string{"brokers", "topic", "sasl", "tls"}, true
	case DestinationSQS:
		return []string{"queue_url", "region", "access_key_id", "secret_access_key", "endpoint"}, true
	case DestinationPubSub:
		return []string{"project_id", "topic_id", "credentials_json", "endpoint"}, true
	}
	return nil, false
}

var (
	kafkaTopic  = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)
	awsRegion   = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$`)
	gcpProject  = regexp.MustCompile(`^[a-z][a-z0-9-]{4,28}[a-z0-9]$`)
	pubsubTopic = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._~+%-]{2,254}$`)
)

// ParseDestination reads a destination as sent (snake_case field names):
// null or {"type": "webhook"} is an HTTP endpoint (nil), anything else a
// destination whose fields the type's rules check next. param names the
// field (destination).
func ParseDestination(param string, raw json.RawMessage) (*Destination, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &fields); err != nil || fields == nil {
		return nil, invalid.Value(param, "destination_not_object",
			param+` must be an object such as {"type": "rabbitmq", ...}, or null for an HTTP endpoint.`)
	}
	var typ string
	if rawType, ok := fields["type"]; !ok || json.Unmarshal(rawType, &typ) != nil || typ == "" {
		return nil, invalid.Missing(param + ".type")
	}
	allowed, ok := destinationFields(typ)
	if !ok {
		return nil, invalid.Value(param+".type", "destination_type_unknown", fmt.Sprintf("%s.type must be one of %s; %s is not a destination type.",
			param, strings.Join(DestinationTypes(), ", "), invalid.Quote(typ)))
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if k != "type" && !slices.Contains(allowed, k) {
			return nil, invalid.Value(param+"."+k, "destination_field_unknown",
				fmt.Sprintf("A %s destination has no field %s.", typ, invalid.Quote(k)))
		}
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	var d Destination
	if err := dec.Decode(&d); err != nil {
		field := param
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			field = param + "." + typeErr.Field
		}
		return nil, invalid.Value(field, "destination_field_invalid", field+" has the wrong JSON type (see the destination's fields).")
	}
	if typ == DestinationWebhook {
		return nil, nil
	}
	return &d, nil
}

// destinationAllowed refuses a type the operator turned off.
func (c checker) destinationAllowed(param, typ string) error {
	if c.rules.Destinations == nil || slices.Contains(c.rules.Destinations, typ) {
		return nil
	}
	return invalid.Value(param+".type", "destination_type_disabled", fmt.Sprintf(
		"Destinations of type %s are turned off on this server; it delivers to %s.", invalid.Quote(typ), strings.Join(c.rules.Destinations, ", ")))
}

// destination applies the rules of d's type and returns its public
// summary and its target (the stored url: where it delivers, without
// credentials). Its shape first (Destination.Check, the rules an attempt
// checks again), then the operator's: the type turned on, no private
// host unless allowed, no plaintext transport unless allowed.
func (c checker) destination(param string, d *Destination) (summary map[string]any, target string, err error) {
	if err := c.destinationAllowed(param, d.Type); err != nil {
		return nil, "", err
	}
	if d.Type == DestinationSQS {
		// An sqs queue_url and endpoint are http(s) URLs, checked by the
		// target URL's rules (private hosts, https) before their shape.
		for _, f := range []struct{ param, value string }{{param + ".queue_url", d.QueueURL}, {param + ".endpoint", d.Endpoint}} {
			if f.value != "" || f.param == param+".queue_url" {
				if _, err := c.url(f.param, f.value); err != nil {
					return nil, "", err
				}
			}
		}
	}
	if err := d.Check(param); err != nil {
		return nil, "", err
	}
	switch d.Type {
	case DestinationRabbitMQ:
		summary, target, err = c.rabbitMQ(param, d)
	case DestinationKafka:
		summary, target, err = c.kafka(param, d)
	case DestinationSQS:
		summary, target, err = c.sqs(param, d)
	case DestinationPubSub:
		summary, target, err = c.pubSub(param, d)
	case DestinationPoll:
		return pollSummary(), pollTarget, nil
	default:
		return nil, "", fmt.Errorf("destination type %q has no rules", d.Type)
	}
	if err != nil {
		return nil, "", err
	}
	if bad := d.checkTransport(param, c.rules.AllowHTTPTargets); bad != nil {
		return nil, "", bad
	}
	return summary, target, nil
}

// name checks a required or optional name field: printable, at most 255.
func name(param, v string, required bool) error {
	if v == "" {
		if required {
			return invalid.Missing(param)
		}
		return nil
	}
	if len(v) > maxDestinationField || strings.ContainsFunc(v, isControl) {
		return invalid.Value(param, "destination_name_invalid", fmt.Sprintf("%s must be at most %d characters, none of them a control character.", param, maxDestinationField))
	}
	return nil
}

// publicHost refuses, unless private targets are allowed, a broker host
// that can only reach the service's own network (checked again when
// dialling, after DNS).
func (c checker) publicHost(param, host string) error {
	if c.rules.AllowPrivateTargets {
		return nil
	}
	if why := c.privateHost(host); why != "" {
		return invalid.Value(param, "destination_private", param+" "+why)
	}
	return nil
}

// rabbitMQ: a public broker host; the summary shows the url without its
// password.
func (c checker) rabbitMQ(param string, d *Destination) (map[string]any, string, error) {
	u, err := ParseAMQPURL(param+".url", d.URL)
	if err != nil {
		return nil, "", err
	}
	if err := c.publicHost(param+".url", u.Host); err != nil {
		return nil, "", err
	}
	shown, _ := url.Parse(d.URL) // parsed by ParseAMQPURL
	redacted := shown.Redacted()
	return map[string]any{"type": d.Type, "url": redacted, "exchange": d.Exchange, "routing_key": d.RoutingKey}, redacted, nil
}

// kafka: public brokers; the summary shows the SASL password masked.
func (c checker) kafka(param string, d *Destination) (map[string]any, string, error) {
	for i, b := range d.Brokers {
		host, _, _ := net.SplitHostPort(b) // checked by Check
		if err := c.publicHost(fmt.Sprintf("%s.brokers[%d]", param, i), host); err != nil {
			return nil, "", err
		}
	}
	summary := map[string]any{"type": d.Type, "brokers": d.Brokers, "topic": d.Topic, "tls": d.TLS}
	if s := d.SASL; s != nil {
		summary["sasl"] = map[string]any{"mechanism": s.Mechanism, "username": s.Username, "password": maskedSecret}
	}
	return summary, "kafka://" + strings.Join(d.Brokers, ",") + "/" + d.Topic, nil
}

// sqs: who signs its messages (sqsCredentials); the summary shows the
// secret key masked.
func (c checker) sqs(param string, d *Destination) (map[string]any, string, error) {
	summary := map[string]any{"type": d.Type, "queue_url": d.QueueURL, "region": d.Region}
	if err := c.sqsCredentials(param, d, summary); err != nil {
		return nil, "", err
	}
	if d.Endpoint != "" {
		summary["endpoint"] = d.Endpoint
	}
	return summary, d.QueueURL, nil
}

// pubSub: a public endpoint when one is named; the summary shows the key
// masked and its client_email.
func (c checker) pubSub(param string, d *Destination) (map[string]any, string, error) {
	if d.Endpoint != "" {
		host, _, _ := net.SplitHostPort(d.Endpoint) // checked by Check
		if err := c.publicHost(param+".endpoint", host); err != nil {
			return nil, "", err
		}
	}
	summary := map[string]any{"type": d.Type, "project_id": d.ProjectID, "topic_id": d.TopicID}
	if d.CredentialsJSON != "" {
		key, err := parseServiceAccount(param+".credentials_json", d.CredentialsJSON)
		if err != nil {
			return nil, "", err
		}
		summary["credentials_json"] = maskedSecret
		summary["client_email"] = key.ClientEmail
	}
	if d.Endpoint != "" {
		summary["endpoint"] = d.Endpoint
	}
	return summary, "gcp-pubsub://projects/" + d.ProjectID + "/topics/" + d.TopicID, nil
}

// sealDestination checks d, seals it with its summary for storage, and
// returns the target the url column holds.
func (g *Registry) sealDestination(d *Destination) (*store.Destination, string, error) {
	summary, target, err := g.check.destination("destination", d)
	if err != nil {
		return nil, "", err
	}
	sealer, err := signer.NewSealer(g.masterKey)
	if err != nil {
		return nil, "", fmt.Errorf("destination: %w", err)
	}
	plain, err := json.Marshal(d)
	if err != nil {
		return nil, "", fmt.Errorf("destination: %w", err)
	}
	sealed, err := sealer.Seal(string(plain))
	if err != nil {
		return nil, "", fmt.Errorf("destination: %w", err)
	}
	return &store.Destination{Sealed: sealed, Summary: summary}, target, nil
}

// destinationTarget applies the destination of a create (raw, as sent)
// or of an update that sets one: a broker destination is sealed and its
// target is the url; an HTTP endpoint (nil) takes rawURL, which must then
// be given and must be a webhook URL. A url beside a broker destination is
// refused: it would never be used.
func (g *Registry) destinationTarget(raw json.RawMessage, rawURL *string) (*store.Destination, string, error) {
	d, err := ParseDestination("destination", raw)
	if err != nil {
		return nil, "", err
	}
	if d == nil {
		if err := g.check.destinationAllowed("destination", DestinationWebhook); err != nil {
			return nil, "", err
		}
		if rawURL == nil {
			return nil, "", invalid.Missing("url")
		}
		u, err := g.check.url("url", *rawURL)
		return nil, u, err
	}
	if rawURL != nil {
		return nil, "", invalid.Value("url", "url_not_allowed", fmt.Sprintf(
			"A subscription whose destination is of type %s has no url: its deliveries go to the destination.", d.Type))
	}
	return g.sealDestination(d)
}
