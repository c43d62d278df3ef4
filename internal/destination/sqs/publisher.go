package sqs

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/awsdest"
)

// service names SQS in the merchant's words of a failure ("SQS answered
// HTTP 400 AWS.SimpleQueueService.NonExistentQueue").
const service = "SQS"

// confirmed is the attempt's answer when SQS took the message.
const confirmed = "confirmed by broker"

// errClosed is a Send after Close.
var errClosed = errors.New("sqs: publisher closed")

// publisher sends one message per Send to an SQS queue, the headers as
// String message attributes; the send succeeds when SQS returns the
// message id (the SDK has checked the MD5 sums of the body and the
// attributes SQS computed). One client per destination keeps its HTTP
// connections.
type publisher struct {
	client *sqs.Client
	// opts are the account's SDK options (its HTTPClient sends each
	// request from a copy of its body: destination.HTTPClient).
	opts     awsdest.Client
	queueURL string
	fifo     bool
	closed   atomic.Bool
}

// open is the publisher of c: the account's SDK options on env (its
// dialer, bounded answers, no retry of the SDK's own), signed with c's
// key or, without one, the engine's credentials if its queue is still
// allowed.
func (k *kind) open(c Config, env destination.Env) (*publisher, error) {
	opts := awsdest.Account{Region: c.Region, AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, Endpoint: c.Endpoint}.Client(env)
	if c.engine() {
		if !engineQueueAllowed(k.engineQueues, c) {
			// Parse refuses it first; this holds should a Config reach
			// Open by another way.
			return nil, destination.Fail(destination.CodeAuthFailed, "the destination has no access key and this server's own AWS credentials "+
				"are not allowed for its queue (WEBHOOKD_SQS_ENGINE_CREDENTIALS): give the destination an access key", nil)
		}
		opts.Credentials = k.engine
	}
	client := sqs.New(sqs.Options{Region: opts.Region, Credentials: opts.Credentials, HTTPClient: opts.HTTPClient,
		Retryer: opts.Retryer, BaseEndpoint: opts.BaseEndpoint})
	return &publisher{client: client, opts: opts, queueURL: c.QueueURL, fifo: c.fifo()}, nil
}

// Send implements destination.Publisher.
func (p *publisher) Send(ctx context.Context, m destination.Message) (destination.Result, error) {
	if p.closed.Load() {
		return destination.Result{}, destination.Fail(destination.CodeUnreachable, "the destination's publisher was closed", errClosed)
	}
	attrs, err := attributes(m.Headers)
	if err != nil {
		return destination.Result{}, err
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(p.queueURL), MessageBody: aws.String(string(m.Body)), MessageAttributes: attrs}
	if p.fifo {
		in.MessageGroupId = aws.String(groupID(m))
		in.MessageDeduplicationId = aws.String(dedupID(m))
	}
	out, err := p.client.SendMessage(ctx, in)
	if err != nil {
		return destination.Result{}, awsdest.Classify(service, err)
	}
	return destination.Result{Answer: confirmed + " (message id " + aws.ToString(out.MessageId) + ")"}, nil
}

// Close implements destination.Publisher: Send fails after it, and the
// idle connections are closed (a request under way ends by its deadline).
func (p *publisher) Close() error {
	p.closed.Store(true)
	p.opts.CloseIdle()
	return nil
}

// attributes are the message's headers as SQS message attributes, by
// awsdest.AttributeNames' rule.
func attributes(headers map[string]string) (map[string]types.MessageAttributeValue, error) {
	names, err := awsdest.AttributeNames(service, headers)
	if err != nil {
		return nil, err
	}
	out := make(map[string]types.MessageAttributeValue, len(names))
	for _, n := range names {
		out[n] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(headers[n])}
	}
	return out, nil
}

// groupID and dedupID are a FIFO message's group and deduplication ids
// (awsdest.GroupID, awsdest.DedupID).
func groupID(m destination.Message) string { return awsdest.GroupID(m) }

func dedupID(m destination.Message) string { return awsdest.DedupID(m) }
