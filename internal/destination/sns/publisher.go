package sns

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/awsdest"
)

// SNS limits that shape a message.
const (
	// maxAttributes is how many message attributes SNS takes.
	maxAttributes = 10
	// maxMessage is SNS's bound on a message: its body and its
	// attributes (each attribute's name, data type and value), 256 KiB.
	maxMessage = 256 << 10
	// maxGroupID bounds a FIFO message group id, in characters.
	maxGroupID = 128
	// stringType is the data type of every attribute webhookd sends.
	stringType = "String"
)

// firstAttributes are the headers an SNS message carries before any
// other: what a consumer needs to verify and order it. The
// subscription's own headers come next and user-agent last, only while
// room is left. The rule is the sqs kind's, so that a consumer reads
// both alike.
var firstAttributes = []string{"webhook-id", "webhook-timestamp", "webhook-signature", "content-type",
	"webhook-ordering-key", "webhook-sequence"}

// messageID is what of SNS's answer is shown: its message ids are UUIDs;
// anything else an endpoint sends in their place is not.
var messageID = regexp.MustCompile(`^[A-Za-z0-9-]{1,100}$`)

// errClosed is a Send after Close.
var errClosed = errors.New("sns: publisher closed")

// Open implements destination.Kind: an SNS client on the account's
// options (env's dialer, bounded answers, no retry of the SDK's own).
// It connects on the first Send.
func (kind) Open(cfg destination.Config, env destination.Env) (destination.Publisher, error) {
	c, ok := cfg.(Config)
	if !ok {
		return nil, destination.Fail(destination.CodeInvalid, "the destination is not an SNS destination", nil)
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

// attributes are the message's headers as SNS message attributes, at
// most ten (SNS refuses more): the ones a consumer verifies and orders
// by first, then the subscription's own headers by name, then
// user-agent if room is left. More than ten without user-agent is
// broker_refused, naming the limit, rather than a message missing one of
// the merchant's headers. An empty value is skipped: SNS refuses one,
// and an empty header is the same as none to a verifier.
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
		return nil, destination.Fail(destination.CodeRefused, fmt.Sprintf("an SNS message takes at most %d message attributes and this one needs %d "+
			"(the Standard Webhooks headers, content-type, the ordering headers and %d of the subscription's own headers)",
			maxAttributes, len(names), len(custom)), nil)
	}
	if _, ok := headers["user-agent"]; ok && len(names) < maxAttributes {
		names = append(names, "user-agent")
	}
	out := make(map[string]types.MessageAttributeValue, len(names))
	for _, n := range names {
		if v := headers[n]; v != "" {
			out[n] = types.MessageAttributeValue{DataType: aws.String(stringType), StringValue: aws.String(v)}
		}
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

// groupID is a FIFO message's group: the ordering key of an ordered
// delivery, so that SNS keeps each key's order as webhookd does, and the
// delivery id otherwise. Unordered deliveries promise no order (a retry
// already overtakes later events), so one fixed group would only make a
// slow subscriber's message hold up every other. A key SNS would refuse
// as a group id (over 128 characters, or characters other than printable
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
// not the attempt number, so that a retry made because the answer to an
// earlier attempt was lost (SNS took the message but the answer never
// came) is dropped by SNS as a duplicate within its five-minute window
// instead of reaching the subscribers twice.
func dedupID(m destination.Message) string { return m.DeliveryID }
