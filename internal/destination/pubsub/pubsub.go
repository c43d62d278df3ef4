// Package pubsub is the destination kind "gcp_pubsub": one message per
// delivery to a Google Cloud Pub/Sub topic, the headers as attributes, an
// ordered delivery's ordering key as the message's ordering_key (the
// publisher has message ordering on).
//
// Its credentials are a service account key and nothing else, read by
// allow-list (credentials.go): Google's library would read more into
// other kinds of Google credentials (files, commands, token endpoints).
// Without a key, an endpoint is taken for an emulator: no credentials and
// no TLS.
package pubsub

import (
	"encoding/json"
	"regexp"
	"strings"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/invalid"
)

// Type is the destination's "type".
const Type = "gcp_pubsub"

var (
	gcpProject  = regexp.MustCompile(`^[a-z][a-z0-9-]{4,28}[a-z0-9]$`)
	pubsubTopic = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._~+%-]{2,254}$`)
)

// kind is the gcp_pubsub kind.
type kind struct{}

// New is the gcp_pubsub kind.
func New() destination.Kind { return kind{} }

// Metadata implements destination.Kind.
func (kind) Metadata() destination.Metadata {
	return destination.Metadata{
		Type:     Type,
		Label:    "Google Cloud Pub/Sub",
		Short:    "Pub/Sub",
		Delivers: "one message per delivery, the headers as attributes and the ordering key as ordering_key, confirmed by its message id",
		// The publisher keeps each ordering key's order (message ordering
		// on, a failed publish resuming its key); a subscription with
		// message ordering enabled hands them to consumers in order.
		Ordered: true,
		Fields: []destination.Field{
			{Name: "project_id", Label: "Project ID", Type: destination.FieldString, Required: true, Example: "my-project",
				Help: "The Google Cloud project of the topic."},
			{Name: "topic_id", Label: "Topic ID", Type: destination.FieldString, Required: true, Example: "webhooks",
				Help: "The topic's id, not its full name."},
			{Name: "credentials_json", Label: "Service account key", Type: destination.FieldText, Secret: true,
				Help: "The JSON key of a service account allowed pubsub.topics.publish on the topic (roles/pubsub.publisher), " +
					"as the console makes it. Required unless the endpoint is an emulator."},
			{Name: "endpoint", Label: "Endpoint", Type: destination.FieldString, Example: "pubsub.googleapis.com:443",
				Help: "host:port of another Pub/Sub endpoint, or of an emulator when no key is given (no TLS then)."},
		},
	}
}

// Parse implements destination.Kind: a project and a topic id by
// Google's rules, an optional endpoint host:port, and a service account
// key unless an endpoint (an emulator) is named.
func (kind) Parse(param string, raw json.RawMessage) (destination.Config, error) {
	var c Config
	if err := destination.Decode(param, raw, &c); err != nil {
		return nil, err
	}
	switch {
	case c.ProjectID == "":
		return nil, invalid.Missing(param + ".project_id")
	case !gcpProject.MatchString(c.ProjectID):
		return nil, invalid.Value(param+".project_id", "destination_project_invalid",
			param+".project_id must be a Google Cloud project id: 6 to 30 lowercase letters, digits or hyphens.")
	case c.TopicID == "":
		return nil, invalid.Missing(param + ".topic_id")
	case !pubsubTopic.MatchString(c.TopicID) || strings.HasPrefix(c.TopicID, "goog"):
		return nil, invalid.Value(param+".topic_id", "destination_topic_invalid",
			param+".topic_id must be a Pub/Sub topic id: 3 to 255 characters, starting with a letter, not with goog.")
	}
	if c.Endpoint != "" {
		if _, err := destination.HostPort(param+".endpoint", c.Endpoint, "pubsub.googleapis.com:443"); err != nil {
			return nil, err
		}
	}
	switch {
	case c.CredentialsJSON != "":
		key, err := parseServiceAccount(param+".credentials_json", c.CredentialsJSON)
		if err != nil {
			return nil, err
		}
		c.clientEmail = key.ClientEmail
	case c.Endpoint == "":
		return nil, invalid.Missing(param + ".credentials_json")
	}
	return c, nil
}

// Open implements destination.Kind.
func (kind) Open(cfg destination.Config, env destination.Env) (destination.Publisher, error) {
	c, err := destination.ConfigOf[Config]("gcp_pubsub", cfg)
	if err != nil {
		return nil, err
	}
	return open(c, env)
}
