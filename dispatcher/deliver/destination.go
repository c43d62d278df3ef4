package deliver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/webhookd/webhookd/dispatcher/internal/metrics"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/failtext"
	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/signer"
)

// Attempt error codes of broker destinations (DESIGN.md's codes are the
// HTTP exchange's; these name what a broker did instead).
const (
	// errBrokerUnreachable: no connection to the broker (refused, reset,
	// DNS, a closed channel).
	errBrokerUnreachable = "broker_unreachable"
	// errBrokerRefused: the broker answered and would not take the message
	// (no such exchange, topic or queue; a message it rejected).
	errBrokerRefused = "broker_refused"
	// errNotConfirmed: the message was sent but the broker never
	// confirmed it (a nack, or no confirm before the timeout).
	errNotConfirmed = "not_confirmed"
	// errAuthFailed: the broker refused the destination's credentials.
	errAuthFailed = "auth_failed"
)

// confirmedAnswer is the attempt's response body when the broker took
// the message.
const confirmedAnswer = "confirmed by broker"

// maxDestinationClients bounds the broker clients kept when the worker
// runs more attempts at once than that; past it, the one used least
// recently is closed.
const maxDestinationClients = 256

// idleDestination is how long a broker client is kept unused: a deleted
// subscription's connection closes by then.
const idleDestination = 5 * time.Minute

// message is what a broker destination is sent for one attempt: the
// envelope and the headers an HTTP request would carry, as the message's
// headers or attributes.
type message struct {
	// DeliveryID names the delivery (SQS FIFO's deduplication id).
	DeliveryID string
	// EventID is the event's id (Kafka's key when unordered).
	EventID string
	// Body is the envelope, exactly as an HTTP delivery sends it.
	Body []byte
	// Headers are the Standard Webhooks headers, the subscription's own
	// and the ordering ones, lowercase.
	Headers map[string]string
	// OrderingKey is the ordered delivery's key; "" when unordered.
	OrderingKey string
	// SignedAt is the attempt's time, on the engine's clock: its
	// webhook-timestamp, and a broker message's own timestamp.
	SignedAt time.Time
}

// brokerClient sends messages to one destination over the connections it
// keeps: one per kind of broker (dest_*.go).
type brokerClient interface {
	// publish sends m and returns the broker's answer when it took it; an
	// error is a failed attempt, a *brokerError when the kind knows why.
	publish(ctx context.Context, m message) (answer string, err error)
	// close releases the client's connections.
	close()
}

// brokerError is a failed publish and its attempt error code.
type brokerError struct {
	code string
	err  error
}

func (e *brokerError) Error() string { return e.code + ": " + e.err.Error() }
func (e *brokerError) Unwrap() error { return e.err }

// failed wraps err with code.
func failed(code string, err error) error { return &brokerError{code: code, err: err} }

// brokerDialer dials a broker's address: the deliveries' dialer (the
// address check), or its tunnel through the egress proxy.
type brokerDialer func(ctx context.Context, network, address string) (net.Conn, error)

// DestinationTypes are the destination types this build delivers: the
// HTTP endpoint and each kind newBrokerClient builds a client for.
func DestinationTypes() []string {
	return []string{subscriptions.DestinationWebhook, subscriptions.DestinationRabbitMQ, subscriptions.DestinationKafka,
		subscriptions.DestinationSQS, subscriptions.DestinationPubSub, subscriptions.DestinationPoll}
}

// newBrokerClient builds the client of d's kind, dialing with dial; an
// sqs destination without a key signs with engine's credentials.
func newBrokerClient(d subscriptions.Destination, dial brokerDialer, timeout time.Duration, engine *engineCredentials) (brokerClient, error) {
	switch d.Type {
	case subscriptions.DestinationRabbitMQ:
		return newRabbitMQ(d, dial, timeout), nil
	case subscriptions.DestinationKafka:
		return newKafka(d, dial, timeout)
	case subscriptions.DestinationSQS:
		creds, err := engine.forDestination(context.Background(), d)
		if err != nil {
			return nil, err
		}
		return newSQS(d, dial, timeout, creds), nil
	case subscriptions.DestinationPubSub:
		return newPubSub(d, dial, timeout)
	}
	return nil, failed(errBrokerRefused, failtext.Tell("destination type %q is not delivered by this build", d.Type))
}

// destinations sends the attempts of broker destinations, keeping one
// client per subscription and destination version.
type destinations struct {
	sealer  *signer.Sealer
	dial    brokerDialer
	timeout time.Duration
	version string
	clock   clock.Clock
	max     int
	// allowPlaintext lets a destination carry its credentials and
	// payloads in clear (WEBHOOKD_ALLOW_HTTP_TARGETS): a stored one that
	// would is refused at each attempt otherwise.
	allowPlaintext bool
	// build makes a client (newBrokerClient; tests may replace it).
	build func(subscriptions.Destination, brokerDialer, time.Duration) (brokerClient, error)

	mu   sync.Mutex
	kept map[uuid.UUID]*keptClient
}

type keptClient struct {
	version string
	client  brokerClient
	used    time.Time
}

// newDestinations is the broker side of a worker: cfg's dialer (through
// its egress proxy when set) and timeout.
func newDestinations(cfg SenderConfig, dialer *net.Dialer, sealer *signer.Sealer, clk clock.Clock) *destinations {
	if dialer == nil {
		dialer = NewDialer(cfg)
	}
	dial := brokerDialer(dialer.DialContext)
	if cfg.EgressProxy != nil {
		dial = egressDialing(cfg, dialer).DialContext
	}
	engine := newEngineCredentials(cfg.SQSEngineQueues)
	build := func(d subscriptions.Destination, dial brokerDialer, timeout time.Duration) (brokerClient, error) {
		return newBrokerClient(d, dial, timeout, engine)
	}
	return &destinations{sealer: sealer, dial: dial, timeout: cfg.Timeout, version: cfg.Version, clock: clk,
		max: maxDestinationClients, allowPlaintext: cfg.AllowHTTP, build: build, kept: make(map[uuid.UUID]*keptClient)}
}

// refusedDestination is the attempt's failure when a stored destination
// breaks a rule it was not held to when it was stored (an older build's):
// destination_invalid or destination_plaintext_refused, told in the
// rule's words, which name the field and never quote its value. It is
// never handed to a client. Any other error opening it stays internal.
func refusedDestination(err error) error {
	for _, code := range []struct {
		is   error
		code string
	}{{subscriptions.ErrDestinationInvalid, subscriptions.CodeDestinationInvalid},
		{subscriptions.ErrDestinationPlaintext, subscriptions.CodeDestinationPlaintext}} {
		if errors.Is(err, code.is) {
			// The rule's words for the merchant first (describeBroker
			// takes them), the refusal itself for the log and errors.Is.
			return failed(code.code, fmt.Errorf("%w (%w)", refusedRule(err), err))
		}
	}
	return err
}

// refusedRule is the merchant's words for a stored value a rule refuses:
// the rule's own message (an *invalid.Error names the field, never its
// value), else a fixed phrase.
func refusedRule(err error) error {
	var bad *invalid.Error
	if errors.As(err, &bad) {
		return failtext.Told(bad.Message)
	}
	return failtext.Told("the stored value breaks a rule of this server; update the subscription")
}

// client is the client of the subscription's destination as sealed,
// built the first time and again when the destination changed (the old
// one closed). An error opening the destination is internal.
func (ds *destinations) client(subscriptionID uuid.UUID, sealed []byte, now time.Time) (brokerClient, error) {
	sum := sha256.Sum256(sealed)
	version := hex.EncodeToString(sum[:16])
	ds.mu.Lock()
	if k, ok := ds.kept[subscriptionID]; ok && k.version == version {
		k.used = now
		ds.mu.Unlock()
		return k.client, nil
	}
	ds.mu.Unlock()

	d, err := subscriptions.OpenDestination(ds.sealer, sealed)
	if err == nil {
		err = d.CheckTransport(ds.allowPlaintext)
	}
	if err != nil {
		return nil, refusedDestination(err)
	}
	c, err := ds.build(d, ds.dial, ds.timeout)
	if err != nil {
		return nil, err
	}
	var stale []brokerClient
	ds.mu.Lock()
	if k, ok := ds.kept[subscriptionID]; ok {
		if k.version == version {
			// Another attempt built it meanwhile: keep one.
			ds.mu.Unlock()
			c.close()
			return k.client, nil
		}
		stale = append(stale, k.client)
	}
	ds.kept[subscriptionID] = &keptClient{version: version, client: c, used: now}
	stale = append(stale, ds.evictLocked(now)...)
	ds.mu.Unlock()
	for _, s := range stale {
		s.close()
	}
	return c, nil
}

// evictLocked takes out the clients idle too long and, over the bound,
// the one used least recently, for the caller to close.
func (ds *destinations) evictLocked(now time.Time) []brokerClient {
	var out []brokerClient
	for id, k := range ds.kept {
		if now.Sub(k.used) > idleDestination {
			out = append(out, k.client)
			delete(ds.kept, id)
		}
	}
	for len(ds.kept) > ds.max {
		var oldest uuid.UUID
		var at time.Time
		for id, k := range ds.kept {
			if at.IsZero() || k.used.Before(at) {
				oldest, at = id, k.used
			}
		}
		out = append(out, ds.kept[oldest].client)
		delete(ds.kept, oldest)
	}
	return out
}

// forget closes the client of a subscription that was deleted or
// disabled.
func (ds *destinations) forget(subscriptionID uuid.UUID) {
	ds.mu.Lock()
	k, ok := ds.kept[subscriptionID]
	delete(ds.kept, subscriptionID)
	ds.mu.Unlock()
	if ok {
		k.client.close()
	}
}

// closeAll closes every client.
func (ds *destinations) closeAll() {
	ds.mu.Lock()
	kept := ds.kept
	ds.kept = make(map[uuid.UUID]*keptClient)
	ds.mu.Unlock()
	for _, k := range kept {
		k.client.close()
	}
}

// send makes a broker destination's attempt: the message signed as an
// HTTP delivery would be, custom the subscription's headers, the publish
// bounded by the delivery timeout. An error is internal (the destination
// could not be opened): nothing was sent.
func (ds *destinations) send(ctx context.Context, leased store.LeasedDelivery, sig Signing, custom map[string]string) (Result, error) {
	started := ds.clock.Now()
	// Encrypted like an HTTP body when the subscription has a key; the
	// signature covers the message's body as sent.
	body, contentType, err := sig.payload(leased.Body)
	if err != nil {
		return Result{}, err
	}
	leased.Body = body
	c, err := ds.client(leased.SubscriptionID, leased.SealedDestination, started)
	var be *brokerError
	if err != nil && !errors.As(err, &be) {
		return Result{}, err
	}
	res := Result{Started: started}
	if err == nil {
		pctx, cancel := context.WithTimeout(ctx, ds.timeout)
		var answer string
		answer, err = c.publish(pctx, ds.message(leased, sig.Keys, contentType, custom, started))
		cancel()
		res.Body = printable([]byte(truncate(answer, maxResponseBody)))
	}
	res.Finished = ds.clock.Now()
	res.Duration = res.Finished.Sub(started)
	if err == nil {
		res.outcome = metrics.OutcomeSuccess
		return res, nil
	}
	code, outcome := errBrokerUnreachable, metrics.OutcomeNetworkError
	switch {
	case failtext.Of(err) == failtext.TooLarge:
		code = errResponseTooLarge
	case errors.As(err, &be):
		code = be.code
	case errors.Is(err, context.DeadlineExceeded):
		code = errNotConfirmed
	}
	if errors.Is(err, context.DeadlineExceeded) {
		outcome = metrics.OutcomeTimeout
	}
	res.ErrCode, res.outcome, res.cause = &code, outcome, err
	res.Body = printable([]byte(truncate(code+": "+describeBroker(code, err), maxResponseBody)))
	return res, nil
}

// brokerWords are what a broker attempt's record says of a failure of
// each code when nothing more specific can be said.
var brokerWords = map[string]string{
	errBrokerUnreachable: "no connection to the broker",
	errBrokerRefused:     "the broker refused the message",
	errNotConfirmed:      "the broker did not confirm the message in time",
	errAuthFailed:        "the broker refused the credentials",
}

// describeBroker is a failed broker attempt in the merchant's words: what
// webhookd said of it (failtext.Told), else the broker's own answer
// (brokerAnswer), else the kind of network failure, else the code's
// words. Never the error's own text, which names this server's addresses,
// DNS server, egress proxy or files; the worker logs that (Result.cause).
func describeBroker(code string, err error) string {
	var told failtext.Told
	if errors.As(err, &told) {
		return string(told)
	}
	if answer := brokerAnswer(err); answer != "" {
		return answer
	}
	if kind := failtext.Of(err).String(); kind != "" {
		return kind
	}
	if words, ok := brokerWords[code]; ok {
		return words
	}
	return "the attempt failed"
}

// amqpClientErrors are the AMQP library's own errors whose text is fixed
// (a refusal it read from the handshake, a closed channel); its other
// errors carry the network's text and are not the broker's answer.
var amqpClientErrors = []*amqp.Error{amqp.ErrClosed, amqp.ErrChannelMax, amqp.ErrSASL, amqp.ErrCredentials, amqp.ErrVhost,
	amqp.ErrSyntax, amqp.ErrFrame, amqp.ErrFrameTooLarge, amqp.ErrCommandInvalid, amqp.ErrUnexpectedFrame, amqp.ErrFieldType}

// brokerAnswer is what the broker itself answered, when err carries it:
// an AMQP reply from the broker (its code and reply text), a Kafka error
// code, SQS's error code and status, a Pub/Sub status code. "" when err
// is no answer of the broker's.
func brokerAnswer(err error) string {
	var ae *amqp.Error
	var ke *kerr.Error
	var api smithy.APIError
	var re *smithyhttp.ResponseError
	switch {
	case errors.As(err, &ae) && (ae.Server || slices.Contains(amqpClientErrors, ae)):
		return fmt.Sprintf("the broker answered %d %s", ae.Code, printable([]byte(truncate(ae.Reason, 256))))
	case errors.As(err, &ke):
		return "the broker answered " + ke.Message
	case errors.As(err, &api):
		answer := "SQS answered"
		if errors.As(err, &re) && re.HTTPStatusCode() != 0 {
			answer += fmt.Sprintf(" HTTP %d", re.HTTPStatusCode())
		}
		if c := api.ErrorCode(); serviceCode.MatchString(c) {
			answer += " " + c
		}
		return answer
	case errors.As(err, &re) && re.HTTPStatusCode() != 0:
		// An answer with no error code SQS's client could read.
		return fmt.Sprintf("SQS answered HTTP %d", re.HTTPStatusCode())
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.OK && st.Code() != codes.Unknown {
		return "Pub/Sub: " + st.Code().String()
	}
	return ""
}

// serviceCode is an error code as services send them
// (AWS.SimpleQueueService.NonExistentQueue, AccessDenied): anything else a
// custom endpoint sends in its place is not shown.
var serviceCode = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._:-]{0,99}$`)

// message is the attempt's message: the headers an HTTP delivery carries,
// the subscription's first so that ours win.
func (ds *destinations) message(leased store.LeasedDelivery, keys []signer.SigningKey, contentType string, custom map[string]string, signedAt time.Time) message {
	h := http.Header{}
	for name, value := range custom {
		h.Set(name, value)
	}
	h.Set("Content-Type", contentType)
	h.Set("User-Agent", "webhookd/"+ds.version)
	signer.SetHeadersWith(h, leased.EventID.String(), signedAt, leased.Body, keys...)
	for name, values := range orderingHeaders(leased.Delivery) {
		h[name] = values
	}
	headers := make(map[string]string, len(h))
	for name := range h {
		headers[strings.ToLower(name)] = h.Get(name)
	}
	m := message{DeliveryID: leased.ID.String(), EventID: leased.EventID.String(), Body: leased.Body, Headers: headers,
		SignedAt: signedAt}
	if leased.Sequence != nil && leased.OrderingKey != nil {
		m.OrderingKey = *leased.OrderingKey
	}
	return m
}

// truncate cuts s to at most n bytes.
func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
