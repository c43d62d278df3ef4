// Package kinesis is the "kinesis" destination kind: one record per
// delivery put to an Amazon Kinesis Data Stream (PutRecord), partitioned
// by the delivery's ordering key or event id, and taken when Kinesis
// answers with the record's sequence number. A Kinesis record has no
// headers: the record's data is a JSON frame of the headers and the body
// as signed (Frame), which a consumer unframes before it verifies.
package kinesis

import (
	"encoding/json"
	"log/slog"
	"regexp"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/awsdest"
	"github.com/webhookd/webhookd/internal/invalid"
)

// Type is the destination's "type".
const Type = "kinesis"

// streamName is Kinesis's own rule for a stream's name
// (CreateStream's StreamName): nothing a URL, a path or a log could read
// otherwise.
var streamName = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,128}$`)

// Kind is the kinesis kind. It holds nothing: every destination's state is
// its Config and Publisher.
type Kind struct{}

// New returns the kinesis kind, for the registry.
func New() destination.Kind { return Kind{} }

// Metadata implements destination.Kind.
func (Kind) Metadata() destination.Metadata {
	fields := append([]destination.Field{{
		Name: "stream_name", Label: "Stream name", Type: destination.FieldString, Required: true, Example: "webhooks",
		Help: "The Kinesis data stream's name (1 to 128 letters, digits, '_', '.' or '-'), in the region below.",
	}}, awsdest.Fields("kinesis:PutRecord")...)
	return destination.Metadata{
		Type:  Type,
		Label: "Amazon Kinesis Data Streams",
		Short: "Kinesis",
		Delivers: "one record per delivery (PutRecord), its data a JSON frame of the signed body and its headers, " +
			"partitioned by the ordering key (else the event id), taken when Kinesis answers with its sequence number",
		Fields:  fields,
		Ordered: true,
	}
}

// Config is a kinesis destination: the stream and the account that puts
// records to it.
type Config struct {
	// StreamName is the data stream's name.
	StreamName string `json:"stream_name"`
	awsdest.Account
}

// Parse implements destination.Kind: the fields by allow-list, the
// stream's name by Kinesis's rule, the account by awsdest's.
func (Kind) Parse(param string, raw json.RawMessage) (destination.Config, error) {
	var c Config
	if err := destination.Decode(param, raw, &c); err != nil {
		return nil, err
	}
	field := param + ".stream_name"
	switch {
	case c.StreamName == "":
		return nil, invalid.Missing(field)
	case !streamName.MatchString(c.StreamName):
		return nil, invalid.Value(field, "destination_stream_invalid",
			field+" must be a Kinesis stream name: 1 to 128 letters, digits, '_', '.' or '-'.")
	}
	if err := c.Check(param); err != nil {
		return nil, err
	}
	return c, nil
}

// Summary implements destination.Config: every field, the secret key
// masked.
func (c Config) Summary() map[string]any {
	s := map[string]any{"stream_name": c.StreamName}
	c.Summarize(s)
	return s
}

// Target implements destination.Config: the stream, its region and the
// endpoint when one replaces Kinesis's own, never the key.
func (c Config) Target() string {
	t := "kinesis://" + c.Region + "/" + c.StreamName
	if c.Endpoint != "" {
		t += " via " + c.Endpoint
	}
	return t
}

// Addresses implements destination.Config: the endpoint, when one is
// set (Kinesis's own address otherwise, which the operator's rules
// need not check).
func (c Config) Addresses() []destination.Address { return c.Account.Addresses() }

// Plaintext implements destination.Config: "endpoint" when it is http://.
func (c Config) Plaintext() string { return c.Account.Plaintext() }

// String is the destination without its credentials, for %v and %s.
func (c Config) String() string { return "kinesis destination " + c.Target() }

// GoString is String, for %#v: the struct's own form would print the
// secret key.
func (c Config) GoString() string { return c.String() }

// LogValue is the destination for slog, without its credentials.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(slog.String("type", Type), slog.String("stream_name", c.StreamName),
		slog.String("region", c.Region), slog.String("endpoint", c.Endpoint))
}
