package sqs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/awsdest"
)

// SQS limits that shape a message.
const (
	// maxAttributes is how many message attributes SQS takes.
	maxAttributes = 10
	// maxGroupID bounds a FIFO message group id, in characters.
	maxGroupID = 128
)

// service names SQS in the merchant's words of a failure ("SQS answered
// HTTP 400 AWS.SimpleQueueService.NonExistentQueue").
const service = "SQS"

// confirmed is the attempt's answer when SQS took the message.
const confirmed = "confirmed by broker"

// firstAttributes are the headers an SQS message carries before any
// other: what a consumer needs to verify and order it. The subscription's
// own headers come next and user-agent last, only while room is left.
var firstAttributes = []string{"webhook-id", "webhook-timestamp", "webhook-signature", "content-type",
	"webhook-ordering-key", "webhook-sequence"}

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

// attributes are the message's headers as SQS message attributes, at
// most ten (SQS refuses more): the ones a consumer verifies and orders
// by first, then the subscription's own headers by name, then
// user-agent if room is left. More than ten without user-agent is
// broker_refused, naming the limit, rather than a message missing one of
// the merchant's headers.
func attributes(headers map[string]string) (map[string]types.MessageAttributeValue, error) {
	var names []string
	for _, n := range firstAttributes {
		if _, ok := headers[n]; ok {
			names = append(names, n)
		}
	}
	var custom []string
	for n := range headers {
		if !slices.Contains(firstAttributes, n) && n != "user-agent" {
			custom = append(custom, n)
		}
	}
	slices.Sort(custom)
	names = append(names, custom...)
	if len(names) > maxAttributes {
		said := fmt.Sprintf("an SQS message takes at most %d message attributes and this one needs %d "+
			"(the Standard Webhooks headers, content-type, the ordering headers and %d of the subscription's own headers)",
			maxAttributes, len(names), len(custom))
		return nil, destination.Fail(destination.CodeRefused, said, errors.New(said))
	}
	if _, ok := headers["user-agent"]; ok && len(names) < maxAttributes {
		names = append(names, "user-agent")
	}
	out := make(map[string]types.MessageAttributeValue, len(names))
	for _, n := range names {
		v := headers[n]
		if v == "" {
			// SQS refuses an empty attribute value: an empty header is
			// the same as none to a verifier.
			continue
		}
		out[n] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	return out, nil
}

// groupID is a FIFO message's group: the ordering key of an ordered
// delivery, so that SQS keeps each key's order as webhookd does, and the
// delivery id otherwise. Unordered deliveries promise no order (a retry
// already overtakes later events), so one fixed group would only make a
// consumer's slow message hold up every other. A key SQS would refuse as
// a group id (over 128 characters, or characters other than printable
// ASCII) is sent as the hex SHA-256 of the key: the same key, the same
// group.
func groupID(m destination.Message) string {
	if m.OrderingKey == "" {
		return m.DeliveryID
	}
	ok := len(m.OrderingKey) <= maxGroupID && !strings.ContainsFunc(m.OrderingKey, func(r rune) bool { return r <= ' ' || r > '~' })
	if ok {
		return m.OrderingKey
	}
	sum := sha256.Sum256([]byte(m.OrderingKey))
	return hex.EncodeToString(sum[:])
}

// dedupID is a FIFO message's deduplication id: the delivery id alone,
// not the attempt number, so that a retry made because the confirmation
// of an earlier attempt was lost (SQS took the message but the answer
// never came) is dropped by SQS as a duplicate within its five-minute
// window instead of reaching the consumer twice.
func dedupID(m destination.Message) string { return m.DeliveryID }
