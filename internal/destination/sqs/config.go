package sqs

import (
	"log/slog"
	"strings"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/invalid"
)

// EngineCredentials is what a read of a destination without an access
// key shows as its "credentials": its messages are signed with the
// engine's own AWS credentials.
const EngineCredentials = "engine"

// Config is an sqs destination: the queue, its region, who signs (an
// access key, or none for the engine's credentials) and where requests
// go when not to the region's SQS. Its JSON is the API's and the stored
// form's.
type Config struct {
	// QueueURL is the queue's URL; it ends in ".fifo" for a FIFO queue.
	QueueURL string `json:"queue_url"`
	// Region is the queue's region (eu-west-1).
	Region string `json:"region"`
	// AccessKeyID and SecretAccessKey are an IAM user's key; both "" for
	// the engine's credentials.
	AccessKeyID     string `json:"access_key_id,omitempty"`
	SecretAccessKey string `json:"secret_access_key,omitempty"`
	// Endpoint replaces the region's SQS endpoint (an http(s) URL), for a
	// compatible server or a VPC endpoint.
	Endpoint string `json:"endpoint,omitempty"`
}

// engine reports whether c is sent with the engine's credentials: it has
// no access key.
func (c Config) engine() bool { return c.AccessKeyID == "" && c.SecretAccessKey == "" }

// fifo reports whether c's queue is a FIFO queue.
func (c Config) fifo() bool { return strings.HasSuffix(c.QueueURL, ".fifo") }

// checkShape applies the rules that need neither DNS nor the operator's
// settings: a queue_url and an optional endpoint that are http(s) URLs
// (webURL; whether http:// and a private host are allowed are the
// operator's rules, Addresses and Plaintext), the endpoint without a
// query, a region, and both parts of the access key when one is given.
func (c Config) checkShape(param string) error {
	if _, err := destination.WebURL(param+".queue_url", c.QueueURL, true); err != nil {
		return err
	}
	if c.Endpoint != "" {
		u, err := destination.WebURL(param+".endpoint", c.Endpoint, true)
		if err != nil {
			return err
		}
		if u.RawQuery != "" || u.ForceQuery {
			return invalid.Value(param+".endpoint", "destination_endpoint_invalid", param+".endpoint must be a URL without a query, such as https://sqs.example.com.")
		}
	}
	switch {
	case c.Region == "":
		return invalid.Missing(param + ".region")
	case !awsRegion.MatchString(c.Region):
		return invalid.Value(param+".region", "destination_region_invalid", param+".region must be an AWS region such as eu-west-1.")
	}
	if c.engine() {
		return nil // the engine's credentials, allowed or not by checkCredentials
	}
	if err := destination.Name(param+".access_key_id", c.AccessKeyID, true); err != nil {
		return err
	}
	return destination.Name(param+".secret_access_key", c.SecretAccessKey, true)
}

// webURL checks the shape of an http(s) URL a merchant gives, as a
// webhook URL's is checked (the same rules and words): absolute https://
// or http://, at most destination.MaxURL characters, a host and a port in
// Summary implements destination.Config: the secret key masked; a
// destination sent with the engine's credentials shows
// "credentials": "engine" and no key at all.
func (c Config) Summary() map[string]any {
	summary := map[string]any{"type": Type, "queue_url": c.QueueURL, "region": c.Region}
	if c.engine() {
		summary["credentials"] = EngineCredentials
	} else {
		summary["access_key_id"] = c.AccessKeyID
		summary["secret_access_key"] = destination.Masked
	}
	if c.Endpoint != "" {
		summary["endpoint"] = c.Endpoint
	}
	return summary
}

// Target implements destination.Config: the queue URL.
func (c Config) Target() string { return c.QueueURL }

// Addresses implements destination.Config: the queue URL and the
// endpoint, each an http(s) URL the operator's rules for a webhook URL
// apply to (https unless plaintext is allowed, no private host unless
// allowed). The queue URL is checked even beside an endpoint, as it
// always was: it names the queue SQS is asked for.
func (c Config) Addresses() []destination.Address {
	out := []destination.Address{{Field: "queue_url", URL: c.QueueURL}}
	if c.Endpoint != "" {
		out = append(out, destination.Address{Field: "endpoint", URL: c.Endpoint})
	}
	return out
}

// Plaintext implements destination.Config: an http:// queue_url or
// endpoint.
func (c Config) Plaintext() string {
	for _, f := range []struct{ name, value string }{{"queue_url", c.QueueURL}, {"endpoint", c.Endpoint}} {
		if strings.HasPrefix(strings.ToLower(f.value), "http://") {
			return f.name
		}
	}
	return ""
}

// String keeps a Config printed by mistake from showing the secret key.
func (c Config) String() string { return "sqs.Config(" + c.QueueURL + ", redacted)" }

// GoString is String, for %#v.
func (c Config) GoString() string { return c.String() }

// LogValue is String, for slog.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }
