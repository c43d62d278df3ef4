// Package kinds registers every destination kind this build delivers to:
// one line a kind. It is the only place that names them all.
package kinds

import (
	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/eventbridge"
	"github.com/webhookd/webhookd/internal/destination/kafka"
	"github.com/webhookd/webhookd/internal/destination/kinesis"
	"github.com/webhookd/webhookd/internal/destination/mqtt"
	"github.com/webhookd/webhookd/internal/destination/nats"
	"github.com/webhookd/webhookd/internal/destination/pubsub"
	"github.com/webhookd/webhookd/internal/destination/rabbitmq"
	"github.com/webhookd/webhookd/internal/destination/s3"
	"github.com/webhookd/webhookd/internal/destination/sns"
	"github.com/webhookd/webhookd/internal/destination/sqs"
)

// Options are the operator's settings some kinds read.
type Options struct {
	// SQSEngineQueues are the queue URL prefixes an sqs destination may
	// send to with the engine's own AWS credentials
	// (WEBHOOKD_SQS_ENGINE_CREDENTIALS); none when empty.
	SQSEngineQueues []string
}

// Default is the registry of every kind, in the order the documentation
// lists them.
func Default(o Options) (*destination.Registry, error) {
	return destination.NewRegistry(
		rabbitmq.New(),
		kafka.New(),
		sqs.New(sqs.Options{EngineQueues: o.SQSEngineQueues}),
		pubsub.New(),
		nats.New(),
		mqtt.New(),
		kinesis.New(),
		sns.New(),
		eventbridge.New(),
		s3.New(),
	)
}
