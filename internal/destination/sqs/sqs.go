// Package sqs is the destination kind "sqs": one SendMessage to an Amazon
// SQS queue per delivery, the headers as String message attributes. On a
// FIFO queue (its URL ends in ".fifo") an ordered delivery's ordering key
// is its message group, so that SQS keeps each key's order, and the
// delivery id is its deduplication id, so that a retry of a message SQS
// took but whose answer was lost reaches the consumer once.
//
// Its messages are signed with the destination's own access key or, for
// a destination without one, with the engine's own AWS credentials where
// the operator allows them (Options.EngineQueues,
// WEBHOOKD_SQS_ENGINE_CREDENTIALS; see engine.go).
package sqs

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/invalid"
)

// Type is the destination's "type".
const Type = "sqs"

// awsRegion is an AWS region's name (eu-west-1).
var awsRegion = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$`)

// Options are the operator's settings of the kind.
type Options struct {
	// EngineQueues are the queue URL prefixes (each checked by
	// CheckEngineQueues) under which a destination without an access key
	// is sent with the engine's own AWS credentials; none when empty,
	// every destination then needing its own key.
	EngineQueues []string
}

// kind is the sqs kind of one engine: its operator's prefixes and the
// engine's credentials, loaded once for every destination that uses
// them.
type kind struct {
	engineQueues []string
	engine       *engineCredentials
}

// New is the sqs kind under o.
func New(o Options) destination.Kind {
	queues := slices.Clone(o.EngineQueues)
	return &kind{engineQueues: queues, engine: newEngineCredentials()}
}

// Metadata implements destination.Kind.
func (k *kind) Metadata() destination.Metadata {
	return destination.Metadata{
		Type:  Type,
		Label: "Amazon SQS",
		Short: "SQS",
		Delivers: "one SendMessage per delivery, the headers as String message attributes; on a FIFO queue the ordering key " +
			"is the message group and the delivery id the deduplication id",
		// A FIFO queue keeps the order of each message group, and an
		// ordered delivery's group is its ordering key; a standard queue
		// keeps no order (docs say: use a FIFO queue for an ordered
		// subscription).
		Ordered: true,
		Fields: []destination.Field{
			{Name: "queue_url", Label: "Queue URL", Type: destination.FieldString, Required: true,
				Example: "https://sqs.eu-west-1.amazonaws.com/123456789012/webhooks",
				Help:    "The queue's URL, ending in .fifo for a FIFO queue (the one that keeps an ordered subscription's order)."},
			{Name: "region", Label: "Region", Type: destination.FieldString, Required: true, Example: "eu-west-1",
				Help: "The queue's AWS region."},
			{Name: "access_key_id", Label: "Access key ID", Type: destination.FieldString,
				Help: "An IAM user's access key, allowed sqs:SendMessage on the queue and nothing else. " +
					"Required unless this server is allowed to send to the queue with its own AWS credentials."},
			{Name: "secret_access_key", Label: "Secret access key", Type: destination.FieldString, Secret: true,
				Help: "The access key's secret; given with access_key_id."},
			{Name: "endpoint", Label: "Endpoint", Type: destination.FieldString, Example: "https://sqs.eu-west-1.amazonaws.com",
				Help: "Only for an SQS-compatible server or a VPC endpoint: the region's SQS endpoint is used otherwise."},
		},
	}
}

// Parse implements destination.Kind: the destination's shape (checkShape),
// then who signs its messages (checkCredentials).
func (k *kind) Parse(param string, raw json.RawMessage) (destination.Config, error) {
	var c Config
	if err := destination.Decode(param, raw, &c); err != nil {
		return nil, err
	}
	if err := c.checkShape(param); err != nil {
		return nil, err
	}
	if err := k.checkCredentials(param, c); err != nil {
		return nil, err
	}
	return c, nil
}

// Open implements destination.Kind.
func (k *kind) Open(cfg destination.Config, env destination.Env) (destination.Publisher, error) {
	c, err := destination.ConfigOf[Config]("sqs", cfg)
	if err != nil {
		return nil, err
	}
	return k.open(c, env)
}

// giveKey is the part of the refusal of a destination without an access
// key that says what to do.
const giveKey = "give access_key_id and secret_access_key of an IAM user allowed sqs:SendMessage on the queue"

// checkCredentials checks who signs c's messages: its own access key when
// it has one (always preferred; both parts were checked by checkShape);
// without one, the engine's own AWS credentials, only when the operator
// allows them for its queue.
func (k *kind) checkCredentials(param string, c Config) error {
	if !c.engine() {
		return nil
	}
	switch {
	case len(k.engineQueues) == 0:
		missing := invalid.Missing(param + ".access_key_id")
		missing.Message = fmt.Sprintf("%s.access_key_id is required: %s.", param, giveKey)
		return missing
	case !engineQueueAllowed(k.engineQueues, c):
		return invalid.Value(param+".access_key_id", "destination_engine_credentials_refused", fmt.Sprintf(
			"%s.access_key_id is required for this queue: this server sends with its own AWS credentials only to the queues its operator "+
				"listed, and %s.queue_url is not one of them (an endpoint, if given, must be the queue URL's own origin); %s.",
			param, param, giveKey))
	}
	return nil
}
