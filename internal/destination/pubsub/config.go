package pubsub

import (
	"log/slog"
	"net"

	"github.com/webhookd/webhookd/internal/destination"
)

// Config is a gcp_pubsub destination: the topic, who publishes (a
// service account key, or none for an emulator) and where, when not to
// Google's endpoint. Its JSON is the API's and the stored form's.
type Config struct {
	// ProjectID and TopicID name the topic.
	ProjectID string `json:"project_id"`
	TopicID   string `json:"topic_id"`
	// CredentialsJSON is a service account key as Google gives it; ""
	// for an emulator.
	CredentialsJSON string `json:"credentials_json,omitempty"`
	// Endpoint is host:port of another endpoint or an emulator.
	Endpoint string `json:"endpoint,omitempty"`

	// clientEmail is the key's client_email, read by Parse for Summary.
	clientEmail string
}

// emulator reports whether c names an emulator: an endpoint without a
// key, dialled without credentials and without TLS.
func (c Config) emulator() bool { return c.Endpoint != "" && c.CredentialsJSON == "" }

// Summary implements destination.Config: the key masked, and its
// client_email, which says who publishes.
func (c Config) Summary() map[string]any {
	summary := map[string]any{"type": Type, "project_id": c.ProjectID, "topic_id": c.TopicID}
	if c.CredentialsJSON != "" {
		summary["credentials_json"] = destination.Masked
		summary["client_email"] = c.clientEmail
	}
	if c.Endpoint != "" {
		summary["endpoint"] = c.Endpoint
	}
	return summary
}

// Target implements destination.Config: the topic's name.
func (c Config) Target() string {
	return "gcp-pubsub://projects/" + c.ProjectID + "/topics/" + c.TopicID
}

// Addresses implements destination.Config: the endpoint's host, when one
// is named (Google's own endpoint otherwise).
func (c Config) Addresses() []destination.Address {
	if c.Endpoint == "" {
		return nil
	}
	host, _, _ := net.SplitHostPort(c.Endpoint) // checked by Parse
	return []destination.Address{{Field: "endpoint", Host: host}}
}

// Plaintext implements destination.Config: an endpoint without a key, an
// emulator, is dialled without TLS.
func (c Config) Plaintext() string {
	if c.emulator() {
		return "endpoint"
	}
	return ""
}

// String keeps a Config printed by mistake from showing the key.
func (c Config) String() string { return "pubsub.Config(" + c.Target() + ", redacted)" }

// GoString is String, for %#v.
func (c Config) GoString() string { return c.String() }

// LogValue is String, for slog.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }
