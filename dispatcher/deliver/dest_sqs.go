package deliver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/webhookd/webhookd/internal/failtext"
	"github.com/webhookd/webhookd/internal/subscriptions"
)

// SQS limits that shape a message.
const (
	// maxSQSAttributes is how many message attributes SQS takes.
	maxSQSAttributes = 10
	// maxSQSGroupID bounds a FIFO message group id, in characters.
	maxSQSGroupID = 128
	// maxSQSIdleConns bounds the idle HTTP connections kept to one queue.
	maxSQSIdleConns = 16
)

// sqsFirstAttributes are the headers an SQS message carries before any
// other: what a consumer needs to verify and order it. The subscription's
// own headers come next and user-agent last, only while room is left.
var sqsFirstAttributes = []string{"webhook-id", "webhook-timestamp", "webhook-signature", "content-type",
	"webhook-ordering-key", "webhook-sequence"}

// amazonSQS sends one message per attempt to an SQS queue, the headers as
// String message attributes; the attempt succeeds when SQS returns the
// message id (the SDK has checked the MD5 sums of the body and the
// attributes SQS computed). A FIFO queue's message group is the ordering
// key of an ordered delivery, the delivery id otherwise; its
// deduplication id is the delivery id (see dedupID). One client per
// destination keeps its HTTP connections.
type amazonSQS struct {
	client   *sqs.Client
	queueURL string
	fifo     bool
}

// newSQS is the client of d, its requests signed with creds (the
// destination's key or the engine's credentials, sqscredentials.go).
func newSQS(d subscriptions.Destination, dial brokerDialer, timeout time.Duration, creds aws.CredentialsProvider) *amazonSQS {
	transport := &http.Transport{
		// The deliveries' dialer (the address check) or its tunnel
		// through the egress proxy: never the environment's proxy.
		DialContext:         dial,
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: timeout,
		MaxIdleConnsPerHost: maxSQSIdleConns,
		IdleConnTimeout:     idleDestination,
	}
	opts := sqs.Options{
		Region:      d.Region,
		Credentials: creds,
		HTTPClient:  boundedClient(transport),
		// webhookd's retry schedule is the retry: one request per attempt,
		// so that an attempt's record says what that request met.
		Retryer: aws.NopRetryer{},
	}
	if d.Endpoint != "" {
		opts.BaseEndpoint = aws.String(d.Endpoint)
	}
	return &amazonSQS{client: sqs.New(opts), queueURL: d.QueueURL, fifo: strings.HasSuffix(d.QueueURL, ".fifo")}
}

func (s *amazonSQS) publish(ctx context.Context, m message) (string, error) {
	attrs, err := sqsAttributes(m.Headers)
	if err != nil {
		return "", err
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(s.queueURL), MessageBody: aws.String(string(m.Body)), MessageAttributes: attrs}
	if s.fifo {
		in.MessageGroupId = aws.String(sqsGroupID(m))
		in.MessageDeduplicationId = aws.String(dedupID(m))
	}
	out, err := s.client.SendMessage(ctx, in)
	if err != nil {
		return "", classifySQS(err)
	}
	return confirmedAnswer + " (message id " + aws.ToString(out.MessageId) + ")", nil
}

func (s *amazonSQS) close() {
	if t, ok := s.client.Options().HTTPClient.(*http.Client); ok {
		t.CloseIdleConnections()
	}
}

// sqsAttributes are the message's headers as SQS message attributes, at
// most ten (SQS refuses more): the ones a consumer verifies and orders
// by first, then the subscription's own headers by name, then
// user-agent if room is left. More than ten without user-agent is
// broker_refused, naming the limit, rather than a message missing one of
// the merchant's headers.
func sqsAttributes(headers map[string]string) (map[string]types.MessageAttributeValue, error) {
	var names []string
	for _, n := range sqsFirstAttributes {
		if _, ok := headers[n]; ok {
			names = append(names, n)
		}
	}
	var custom []string
	for n := range headers {
		if !slices.Contains(sqsFirstAttributes, n) && n != "user-agent" {
			custom = append(custom, n)
		}
	}
	slices.Sort(custom)
	names = append(names, custom...)
	if len(names) > maxSQSAttributes {
		return nil, failed(errBrokerRefused, failtext.Told(fmt.Sprintf("an SQS message takes at most %d message attributes and this one needs %d "+
			"(the Standard Webhooks headers, content-type, the ordering headers and %d of the subscription's own headers)",
			maxSQSAttributes, len(names), len(custom))))
	}
	if _, ok := headers["user-agent"]; ok && len(names) < maxSQSAttributes {
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

// sqsGroupID is a FIFO message's group: the ordering key of an ordered
// delivery, so that SQS keeps each key's order as webhookd does, and the
// delivery id otherwise. Unordered deliveries promise no order (a retry
// already overtakes later events), so one fixed group would only make a
// consumer's slow message hold up every other. A key SQS would refuse as
// a group id (over 128 characters, or characters other than printable
// ASCII) is sent as the hex SHA-256 of the key: the same key, the same
// group.
func sqsGroupID(m message) string {
	if m.OrderingKey == "" {
		return m.DeliveryID
	}
	ok := len(m.OrderingKey) <= maxSQSGroupID && !strings.ContainsFunc(m.OrderingKey, func(r rune) bool { return r <= ' ' || r > '~' })
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
func dedupID(m message) string { return m.DeliveryID }

// sqsAuthCodes are the error codes with which SQS (or AWS's front door)
// refuses who sent the request.
var sqsAuthCodes = []string{"InvalidClientTokenId", "SignatureDoesNotMatch", "AccessDenied", "AccessDeniedException",
	"UnrecognizedClientException", "InvalidSecurity", "MissingAuthenticationToken", "IncompleteSignature",
	"ExpiredToken", "InvalidAccessKeyId", "KmsAccessDenied"}

// classifySQS gives a SendMessage failure its attempt error code: the
// credentials refused are auth_failed, a service error (SQS's fault) or
// no answer in time not_confirmed (SQS may have taken the message), any
// other answer broker_refused (no such queue, a message it would not
// take), and no answer at all broker_unreachable.
func classifySQS(err error) error {
	var known *brokerError
	if errors.As(err, &known) {
		// Already classified: the engine's credentials could not be had.
		return known
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return failed(errNotConfirmed, err)
	}
	status := 0
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	var api smithy.APIError
	if errors.As(err, &api) || status != 0 {
		switch {
		case api != nil && (slices.Contains(sqsAuthCodes, api.ErrorCode()) || strings.Contains(api.ErrorCode(), "AccessDenied")),
			status == http.StatusUnauthorized, status == http.StatusForbidden:
			return failed(errAuthFailed, err)
		case status >= http.StatusInternalServerError, api != nil && api.ErrorFault() == smithy.FaultServer:
			return failed(errNotConfirmed, err)
		}
		return failed(errBrokerRefused, err)
	}
	return failed(errBrokerUnreachable, err)
}
