package sns

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/awsdest"
)

// maxMessage is SNS's bound on a message: its body and its attributes
// (each attribute's name, data type and value), 256 KiB.
const maxMessage = 256 << 10

// messageID is what of SNS's answer is shown: its message ids are UUIDs;
// anything else an endpoint sends in their place is not.
var messageID = regexp.MustCompile(`^[A-Za-z0-9-]{1,100}$`)

// errClosed is a Send after Close.
var errClosed = errors.New("sns: publisher closed")

// Open implements destination.Kind: an SNS client on the account's
// options (env's dialer, bounded answers, no retry of the SDK's own).
// It connects on the first Send.
func (kind) Open(cfg destination.Config, env destination.Env) (destination.Publisher, error) {
	c, err := destination.ConfigOf[Config]("sns", cfg)
	if err != nil {
		return nil, err
	}
	opts := c.Account.Client(env)
	client := sns.New(sns.Options{
		Region:       opts.Region,
		Credentials:  opts.Credentials,
		HTTPClient:   opts.HTTPClient,
		Retryer:      opts.Retryer,
		BaseEndpoint: opts.BaseEndpoint,
	})
	return &publisher{client: client, opts: opts, topicARN: c.TopicARN, fifo: c.fifo(), timeout: env.Timeout}, nil
}

// publisher publishes to one topic. The SDK's client is safe for
// concurrent use and keeps its HTTP connections.
type publisher struct {
	client   *sns.Client
	opts     awsdest.Client
	topicARN string
	fifo     bool
	timeout  time.Duration
	closed   atomic.Bool
}

// Send implements destination.Publisher: one Publish, confirmed by the
// message id SNS returns.
func (p *publisher) Send(ctx context.Context, m destination.Message) (destination.Result, error) {
	if p.closed.Load() {
		return destination.Result{}, destination.Fail(destination.CodeUnreachable, "the destination's connection was closed", errClosed)
	}
	in, err := p.input(m)
	if err != nil {
		return destination.Result{}, err
	}
	if p.timeout > 0 {
		// ctx's deadline is the delivery timeout; this bounds a caller
		// that gave none.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	out, err := p.client.Publish(ctx, in)
	if err != nil {
		return destination.Result{}, awsdest.Classify("SNS", err)
	}
	answer := "confirmed by SNS"
	if id := aws.ToString(out.MessageId); messageID.MatchString(id) {
		answer += " (message id " + id + ")"
	}
	return destination.Result{Answer: answer}, nil
}

// input is m's Publish request, or the broker_refused failure of a
// message SNS would refuse (too many attributes, too large, not text),
// said in fixed words before anything is sent.
func (p *publisher) input(m destination.Message) (*sns.PublishInput, error) {
	attrs, err := attributes(m.Headers)
	if err != nil {
		return nil, err
	}
	if !utf8.Valid(m.Body) {
		return nil, destination.Fail(destination.CodeRefused, "an SNS message is UTF-8 text and this body is not", nil)
	}
	if n := size(m.Body, attrs); n > maxMessage {
		return nil, destination.Fail(destination.CodeRefused, fmt.Sprintf("an SNS message takes at most %d bytes (256 KiB) of body and "+
			"message attributes and this one has %d", maxMessage, n), nil)
	}
	in := &sns.PublishInput{TopicArn: aws.String(p.topicARN), Message: aws.String(string(m.Body)), MessageAttributes: attrs}
	if p.fifo {
		in.MessageGroupId = aws.String(groupID(m))
		in.MessageDeduplicationId = aws.String(dedupID(m))
	}
	return in, nil
}

// Close implements destination.Publisher: it closes the idle
// connections; a Send after it fails without sending.
func (p *publisher) Close() error {
	p.closed.Store(true)
	p.opts.CloseIdle()
	return nil
}

// attributes are the message's headers as SNS message attributes, by
// awsdest.AttributeNames' rule.
func attributes(headers map[string]string) (map[string]types.MessageAttributeValue, error) {
	names, err := awsdest.AttributeNames("SNS", headers)
	if err != nil {
		return nil, err
	}
	out := make(map[string]types.MessageAttributeValue, len(names))
	for _, n := range names {
		out[n] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(headers[n])}
	}
	return out, nil
}

// size is a message's size as SNS counts it against maxMessage: the
// body and each attribute's name, data type and value.
func size(body []byte, attrs map[string]types.MessageAttributeValue) int {
	n := len(body)
	for name, v := range attrs {
		n += len(name) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue))
	}
	return n
}

// groupID and dedupID are a FIFO message's group and deduplication ids
// (awsdest.GroupID, awsdest.DedupID).
func groupID(m destination.Message) string { return awsdest.GroupID(m) }

func dedupID(m destination.Message) string { return awsdest.DedupID(m) }
