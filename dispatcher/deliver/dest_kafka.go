package deliver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/webhookd/webhookd/internal/failtext"
	"github.com/webhookd/webhookd/internal/subscriptions"
)

// kafka produces one record per attempt to a topic: acks from every
// in-sync replica and the idempotent producer (franz-go's defaults, asked
// for by name so that no later default changes them), the key the
// ordering key of an ordered delivery and the event id otherwise, the
// headers as record headers. One client per destination keeps its
// connections to the brokers.
type kafka struct {
	topic  string
	client *kgo.Client
	// ready is set once a request went through the client's connections
	// (SASL included), cleared by a failure: franz-go retries a refused
	// login inside the produce, so only a request of its own tells
	// auth_failed from a record that timed out.
	ready atomic.Bool
}

func newKafka(d subscriptions.Destination, dial brokerDialer, timeout time.Duration) (*kafka, error) {
	dialer := dial
	if d.TLS {
		dialer = func(ctx context.Context, network, address string) (net.Conn, error) {
			c, err := dial(ctx, network, address)
			if err != nil {
				return nil, err
			}
			host, _, _ := net.SplitHostPort(address)
			t := tls.Client(c, &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host})
			if err := t.HandshakeContext(ctx); err != nil {
				c.Close()
				return nil, err
			}
			return t, nil
		}
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(d.Brokers...),
		kgo.DefaultProduceTopic(d.Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.Dialer(dialer),
		// A record gives up a little before the attempt does, with the
		// last error it met (a broker unreachable, say) to tell why;
		// franz-go allows no less than a second.
		kgo.RecordDeliveryTimeout(max(timeout*9/10, time.Second)),
		kgo.ProduceRequestTimeout(max(timeout, time.Second)),
		kgo.UnknownTopicRetries(2),
		kgo.ClientID("webhookd"),
		// One in-flight request per broker keeps an idempotent producer's
		// records in order within a partition across retries.
		kgo.MaxProduceRequestsInflightPerBroker(1),
	}
	if s := d.SASL; s != nil {
		var m sasl.Mechanism
		switch s.Mechanism {
		case subscriptions.SASLPlain:
			m = plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()
		case subscriptions.SASLScramSHA256:
			m = scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()
		default:
			m = scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism()
		}
		opts = append(opts, kgo.SASL(m))
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, failed(errBrokerRefused, err)
	}
	return &kafka{topic: d.Topic, client: client}, nil
}

func (k *kafka) publish(ctx context.Context, m message) (string, error) {
	key := m.OrderingKey
	if key == "" {
		key = m.EventID
	}
	r := &kgo.Record{Topic: k.topic, Key: []byte(key), Value: m.Body}
	for name, v := range m.Headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: name, Value: []byte(v)})
	}
	if !k.ready.Load() {
		if err := k.client.Ping(ctx); err != nil {
			return "", classifyKafka(err)
		}
		k.ready.Store(true)
	}
	// An idempotent producer never fails a record already sent, whatever
	// the context says: the attempt waits for its answer only as long as
	// the timeout, and a record answered later is a duplicate at most.
	done := make(chan error, 1)
	k.client.Produce(ctx, r, func(_ *kgo.Record, err error) { done <- err })
	select {
	case err := <-done:
		if err != nil {
			k.ready.Store(false)
			return "", classifyKafka(err)
		}
		return confirmedAnswer, nil
	case <-ctx.Done():
		k.ready.Store(false)
		return "", failed(errNotConfirmed, fmt.Errorf("%w: %w", failtext.Told("no answer from the broker in time"), ctx.Err()))
	}
}

func (k *kafka) close() { k.client.Close() }

// classifyKafka gives a produce failure its attempt error code.
func classifyKafka(err error) error {
	var ke *kerr.Error
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, kerr.TopicAuthorizationFailed),
		errors.Is(err, kerr.ClusterAuthorizationFailed), errors.Is(err, kerr.TransactionalIDAuthorizationFailed),
		errors.Is(err, kerr.UnsupportedSaslMechanism), errors.Is(err, kerr.IllegalSaslState):
		return failed(errAuthFailed, err)
	case errors.As(err, &ke):
		// The broker answered with an error of Kafka's: no such topic, a
		// record too large, not enough replicas.
		return failed(errBrokerRefused, err)
	case errors.Is(err, kgo.ErrRecordTimeout) && err != kgo.ErrRecordTimeout && !errors.Is(err, context.DeadlineExceeded):
		// Timed out retrying after another error: no broker to take it.
		return failed(errBrokerUnreachable, err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, kgo.ErrRecordTimeout):
		return failed(errNotConfirmed, err)
	default:
		return failed(errBrokerUnreachable, err)
	}
}
