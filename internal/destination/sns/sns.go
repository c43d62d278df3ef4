// Package sns is the destination kind "sns": one Publish to an Amazon SNS
// topic per delivery, the Standard Webhooks headers as String message
// attributes, so that a topic fans a merchant's webhooks out to their own
// queues, functions and endpoints. A FIFO topic (its name ends in
// ".fifo") keeps the order of an ordering key's deliveries: the key is
// the message group.
package sns

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"strings"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/awsdest"
	"github.com/webhookd/webhookd/internal/invalid"
)

// Type is the destination's "type".
const Type = "sns"

// Topic ARN limits (SNS's own): a topic's name is 1 to 256 letters,
// digits, '-' and '_', a FIFO topic's ending in ".fifo" within those 256.
const (
	maxTopicName = 256
	fifoSuffix   = ".fifo"
	// maxTopicARN bounds the field before any pattern reads it: the
	// longest partition, a region, an account and the longest name fit.
	maxTopicARN = 400
)

// topicARN is an SNS topic's ARN: the partition (aws, aws-cn,
// aws-us-gov…), the region, a 12-digit account and the topic's name.
var topicARN = regexp.MustCompile(`^arn:aws[-a-z]*:sns:([a-z]{2}(?:-[a-z]+)+-[0-9]{1,2}):([0-9]{12}):([A-Za-z0-9_-]+(?:\.fifo)?)$`)

// kind is the sns kind; it holds nothing, every destination's state is
// its Config and Publisher.
type kind struct{}

// New is the sns kind, for the registry (internal/destination/kinds).
func New() destination.Kind { return kind{} }

// Metadata implements destination.Kind.
func (kind) Metadata() destination.Metadata {
	fields := []destination.Field{{
		Name: "topic_arn", Label: "Topic ARN", Type: destination.FieldString, Required: true,
		Example: "arn:aws:sns:eu-west-1:123456789012:webhooks",
		Help: "The ARN of the SNS topic, in the region below. A FIFO topic (its name ends in .fifo) keeps the order of an " +
			"ordering key's deliveries; a standard topic keeps none.",
	}}
	return destination.Metadata{
		Type:  Type,
		Label: "Amazon SNS",
		Short: "SNS",
		Delivers: "one SNS message per delivery, published to the topic, the webhook headers as its message attributes; " +
			"an attempt succeeds when SNS returns the message id",
		Fields: append(fields, awsdest.Fields("sns:Publish")...),
		// Order holds for FIFO topics only: the ordering key is the
		// message group. A standard topic's deliveries arrive in any
		// order (docs-sns.md says so).
		Ordered: true,
	}
}

// Config is an sns destination: the topic and the account that publishes
// to it.
type Config struct {
	// TopicARN is the topic's ARN.
	TopicARN string `json:"topic_arn"`
	awsdest.Account
}

// Parse implements destination.Kind: the account's rules, then the
// topic's ARN, in the account's region.
func (kind) Parse(param string, raw json.RawMessage) (destination.Config, error) {
	var c Config
	if err := destination.Decode(param, raw, &c); err != nil {
		return nil, err
	}
	if err := c.Account.Check(param); err != nil {
		return nil, err
	}
	if err := checkTopic(param+".topic_arn", c.TopicARN, c.Region); err != nil {
		return nil, err
	}
	return c, nil
}

// checkTopic checks a topic ARN field: its shape, its name's length and
// its region, region's. The messages never quote the value.
func checkTopic(field, arn, region string) error {
	if arn == "" {
		return invalid.Missing(field)
	}
	bad := invalid.Value(field, "destination_topic_arn_invalid", fmt.Sprintf("%s must be an SNS topic's ARN, "+
		"arn:aws:sns:<region>:<12-digit account>:<name>, the name 1 to %d letters, digits, '-' and '_' "+
		"(ending in %s for a FIFO topic).", field, maxTopicName, fifoSuffix))
	if len(arn) > maxTopicARN {
		return bad
	}
	parts := topicARN.FindStringSubmatch(arn)
	if parts == nil || len(parts[3]) > maxTopicName {
		return bad
	}
	if parts[1] != region {
		return invalid.Value(field, "destination_topic_region", field+" must be a topic of the destination's region (the region field): "+
			"SNS publishes only to a topic of the region the request is sent to.")
	}
	return nil
}

// fifo is whether the topic is a FIFO topic.
func (c Config) fifo() bool { return strings.HasSuffix(c.TopicARN, fifoSuffix) }

// Summary implements destination.Config: every field, the secret key
// masked.
func (c Config) Summary() map[string]any {
	s := map[string]any{"topic_arn": c.TopicARN}
	c.Account.Summarize(s)
	return s
}

// Target implements destination.Config: the topic's ARN, which names
// the partition, region, account and topic and holds no credential.
func (c Config) Target() string { return c.TopicARN }

// Addresses implements destination.Config: the endpoint, when one is
// set; SNS's own address otherwise, which needs no check.
func (c Config) Addresses() []destination.Address { return c.Account.Addresses() }

// Plaintext implements destination.Config: "endpoint" when it is http://.
func (c Config) Plaintext() string { return c.Account.Plaintext() }

// String never shows the secret key: a Config may reach a log line or
// an error.
func (c Config) String() string {
	s := "sns " + c.TopicARN
	if c.Endpoint != "" {
		s += " via " + c.Endpoint
	}
	return s
}

// GoString is String, for %#v.
func (c Config) GoString() string { return c.String() }

// LogValue is the Config for slog, the secret key masked.
func (c Config) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("type", Type), slog.String("topic_arn", c.TopicARN),
		slog.String("region", c.Region), slog.String("access_key_id", c.AccessKeyID),
		slog.String("secret_access_key", destination.Masked)}
	if c.Endpoint != "" {
		attrs = append(attrs, slog.String("endpoint", c.Endpoint))
	}
	return slog.GroupValue(attrs...)
}
