package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/webhookd/webhookd/internal/destination"
)

// confirmed is the attempt's answer when the brokers took the record.
const confirmed = "confirmed by broker"

// errClosed is a Send after Close.
var errClosed = errors.New("kafka: publisher closed")

// Open makes cfg's publisher: one franz-go client, which connects on the
// first Send. A destination that breaks a rule of this build (a Config
// not made by Parse) is refused, before any dial, as
// destination_invalid in the rule's words.
func (Kind) Open(cfg destination.Config, env destination.Env) (destination.Publisher, error) {
	c, err := destination.ConfigOf[Config]("kafka", cfg)
	if err != nil {
		return nil, err
	}
	if err := c.check("destination"); err != nil {
		return nil, destination.Refused(err)
	}
	dial := env.Dial
	if c.TLS {
		dial = func(ctx context.Context, network, address string) (net.Conn, error) {
			conn, err := env.Dial(ctx, network, address)
			if err != nil {
				return nil, err
			}
			host, _, _ := net.SplitHostPort(address)
			t := tls.Client(conn, &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host})
			if err := t.HandshakeContext(ctx); err != nil {
				_ = conn.Close()
				return nil, err
			}
			return t, nil
		}
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.DefaultProduceTopic(c.Topic),
		// acks from every in-sync replica and the idempotent producer:
		// franz-go's defaults, asked for by name so that no later default
		// changes them.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.Dialer(dial),
		// A record gives up a little before the Send does, with the last
		// error it met (a broker unreachable, say) to tell why; franz-go
		// allows no less than a second.
		kgo.RecordDeliveryTimeout(max(env.Timeout*9/10, time.Second)),
		kgo.ProduceRequestTimeout(max(env.Timeout, time.Second)),
		kgo.UnknownTopicRetries(2),
		kgo.ClientID("webhookd"),
		// One in-flight request per broker keeps an idempotent producer's
		// records in order within a partition across retries.
		kgo.MaxProduceRequestsInflightPerBroker(1),
	}
	if s := c.SASL; s != nil {
		var m sasl.Mechanism
		switch s.Mechanism {
		case SASLPlain:
			m = plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()
		case SASLScramSHA256:
			m = scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()
		default:
			m = scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism()
		}
		opts = append(opts, kgo.SASL(m))
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, destination.Fail(destination.CodeRefused, "", err)
	}
	return &publisher{topic: c.Topic, client: client}, nil
}

// publisher produces one record per Send to a topic, over the
// connections its client keeps to the brokers.
type publisher struct {
	topic  string
	client *kgo.Client
	// ready is set once a request went through the client's connections
	// (SASL included), cleared by a failure: franz-go retries a refused
	// login inside the produce, so only a request of its own tells
	// auth_failed from a record that timed out.
	ready  atomic.Bool
	closed atomic.Bool
}

// Send produces m: its key the ordering key, else the event id (one key,
// one partition), its value the body, its headers as record headers;
// taken when every in-sync replica acked it.
func (k *publisher) Send(ctx context.Context, m destination.Message) (destination.Result, error) {
	if k.closed.Load() {
		return destination.Result{}, destination.Fail(destination.CodeUnreachable, "the destination's connection was closed", errClosed)
	}
	r := &kgo.Record{Topic: k.topic, Key: []byte(m.PartitionKey()), Value: m.Body}
	for name, v := range m.Headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: name, Value: []byte(v)})
	}
	if !k.ready.Load() {
		if err := k.client.Ping(ctx); err != nil {
			return destination.Result{}, classify(err)
		}
		k.ready.Store(true)
	}
	// An idempotent producer never fails a record already sent, whatever
	// the context says: the Send waits for its answer only as long as
	// the timeout, and a record answered later is a duplicate at most.
	done := make(chan error, 1)
	k.client.Produce(ctx, r, func(_ *kgo.Record, err error) { done <- err })
	select {
	case err := <-done:
		if err != nil {
			k.ready.Store(false)
			return destination.Result{}, classify(err)
		}
		return destination.Result{Answer: confirmed}, nil
	case <-ctx.Done():
		k.ready.Store(false)
		return destination.Result{}, destination.Fail(destination.CodeNotConfirmed, "no answer from the broker in time", ctx.Err())
	}
}

// Close closes the client's connections; Send fails after it.
func (k *publisher) Close() error {
	if !k.closed.Swap(true) {
		k.client.Close()
	}
	return nil
}

// classify gives a produce failure its attempt error code and the
// merchant's words: Kafka's own error's name when the broker answered
// one ("the broker answered SASL_AUTHENTICATION_FAILED"), else left "" for
// destination.Classify to name the kind of network failure.
func classify(err error) error {
	code := destination.CodeUnreachable
	var ke *kerr.Error
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, kerr.TopicAuthorizationFailed),
		errors.Is(err, kerr.ClusterAuthorizationFailed), errors.Is(err, kerr.TransactionalIDAuthorizationFailed),
		errors.Is(err, kerr.UnsupportedSaslMechanism), errors.Is(err, kerr.IllegalSaslState):
		code = destination.CodeAuthFailed
	case errors.As(err, &ke):
		// The broker answered with an error of Kafka's: no such topic, a
		// record too large, not enough replicas.
		code = destination.CodeRefused
	case errors.Is(err, kgo.ErrRecordTimeout) && err != kgo.ErrRecordTimeout && !errors.Is(err, context.DeadlineExceeded):
		// Timed out retrying after another error: no broker to take it.
		code = destination.CodeUnreachable
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, kgo.ErrRecordTimeout):
		code = destination.CodeNotConfirmed
	}
	return destination.Fail(code, answer(err), err)
}

// answer is what the broker itself answered, when err carries it: a
// Kafka error code's name, from franz-go's fixed table; "" otherwise.
func answer(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return "the broker answered " + ke.Message
	}
	return ""
}
