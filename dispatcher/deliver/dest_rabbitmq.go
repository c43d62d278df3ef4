package deliver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/webhookd/webhookd/internal/failtext"
	"github.com/webhookd/webhookd/internal/subscriptions"
)

// maxRabbitMQChannels bounds the idle channels kept on one connection.
const maxRabbitMQChannels = 16

// rabbitMQ publishes to a RabbitMQ exchange: one persistent message per
// attempt, on a channel in confirm mode, taken only when the broker acks
// it. A message no queue takes (mandatory, returned) is refused. It keeps
// one connection, made again when it closes, and a few channels on it,
// each used by one attempt at a time so that its confirm and return are
// the attempt's own.
type rabbitMQ struct {
	// url is the destination's url read by allow-list; urlErr why it
	// could not be (not reached: OpenDestination checked it).
	url           subscriptions.AMQPURL
	urlErr        error
	exchange, key string
	dial          brokerDialer
	timeout       time.Duration

	mu   sync.Mutex
	conn *amqp.Connection
	idle []*amqpChannel
}

// amqpChannel is a channel in confirm mode and what it was told.
type amqpChannel struct {
	ch       *amqp.Channel
	returns  chan amqp.Return
	closed   chan *amqp.Error
	fromConn *amqp.Connection
}

func newRabbitMQ(d subscriptions.Destination, dial brokerDialer, timeout time.Duration) *rabbitMQ {
	u, err := subscriptions.ParseAMQPURL("destination.url", d.URL)
	if err != nil {
		err = fmt.Errorf("%w: %w", subscriptions.ErrDestinationInvalid, err)
	}
	return &rabbitMQ{url: u, urlErr: err, exchange: d.Exchange, key: d.RoutingKey, dial: dial, timeout: timeout}
}

// amqpURI is the URI amqp091-go dials, made of the destination's typed
// parts alone: no query, so no option of the library's (a file it would
// open, a TLS setting, a heartbeat) comes from the merchant's text.
func (r *rabbitMQ) amqpURI() string {
	scheme := "amqp"
	if r.url.Secure {
		scheme = "amqps"
	}
	// A url without credentials logs in as guest, as the AMQP URI
	// specification has it (and amqp091-go did with the url itself).
	uri := amqp.URI{Scheme: scheme, Host: r.url.Host, Port: r.url.Port, Username: "guest", Password: "guest", Vhost: r.url.Vhost}
	if r.url.Username != "" || r.url.Password != "" {
		uri.Username, uri.Password = r.url.Username, r.url.Password
	}
	return uri.String()
}

// connection is the open connection, dialled again when there is none.
func (r *rabbitMQ) connection(ctx context.Context) (*amqp.Connection, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn != nil && !r.conn.IsClosed() {
		return r.conn, nil
	}
	r.idle = nil
	// The handshakes end by the attempt's deadline, or the timeout's when
	// the caller set none: a socket deadline is real time, which the
	// context keeps, not the engine's clock.
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	if r.urlErr != nil {
		return nil, r.urlErr
	}
	conn, err := amqp.DialConfig(r.amqpURI(), amqp.Config{
		// The engine's own TLS settings: amqp091-go reads certificate
		// files named by the URI only when this is nil.
		TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, ServerName: r.url.Host},
		Vhost:           r.url.Vhost,
		Heartbeat:       10 * time.Second,
		Properties:      amqp.Table{"product": "webhookd", "connection_name": "webhookd deliveries"},
		Dial: func(network, addr string) (net.Conn, error) {
			c, err := r.dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// The TLS and AMQP handshakes end by the attempt's deadline;
			// the library clears it once the connection is open.
			if err := c.SetDeadline(deadline); err != nil {
				c.Close()
				return nil, err
			}
			return c, nil
		},
	})
	if err != nil {
		return nil, classifyAMQP(err)
	}
	r.conn = conn
	return conn, nil
}

// channel takes an idle channel or opens one in confirm mode.
func (r *rabbitMQ) channel(ctx context.Context) (*amqpChannel, error) {
	conn, err := r.connection(ctx)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	for len(r.idle) > 0 {
		c := r.idle[len(r.idle)-1]
		r.idle = r.idle[:len(r.idle)-1]
		if !c.ch.IsClosed() && c.fromConn == conn {
			r.mu.Unlock()
			return c, nil
		}
	}
	r.mu.Unlock()
	ch, err := conn.Channel()
	if err != nil {
		return nil, classifyAMQP(err)
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, classifyAMQP(err)
	}
	return &amqpChannel{ch: ch, returns: ch.NotifyReturn(make(chan amqp.Return, 1)),
		closed: ch.NotifyClose(make(chan *amqp.Error, 1)), fromConn: conn}, nil
}

// release keeps a channel that is still good for the next attempt.
func (r *rabbitMQ) release(c *amqpChannel) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.ch.IsClosed() || c.fromConn != r.conn || len(r.idle) >= maxRabbitMQChannels {
		_ = c.ch.Close()
		return
	}
	r.idle = append(r.idle, c)
}

func (r *rabbitMQ) publish(ctx context.Context, m message) (string, error) {
	c, err := r.channel(ctx)
	if err != nil {
		return "", err
	}
	headers := make(amqp.Table, len(m.Headers))
	for k, v := range m.Headers {
		headers[k] = v
	}
	confirm, err := c.ch.PublishWithDeferredConfirmWithContext(ctx, r.exchange, r.key, true, false, amqp.Publishing{
		Headers: headers, ContentType: "application/json", DeliveryMode: amqp.Persistent,
		MessageId: m.DeliveryID, Timestamp: m.SignedAt, Body: m.Body,
	})
	if err != nil {
		_ = c.ch.Close()
		return "", classifyAMQP(err)
	}
	var acked bool
	select {
	case <-confirm.Done():
		acked = confirm.Acked()
	case reason := <-c.closed:
		// The broker closed the channel: a missing exchange (404), say.
		if reason == nil {
			return "", failed(errBrokerUnreachable, failtext.Told("channel closed before the broker confirmed"))
		}
		return "", classifyAMQP(reason)
	case <-ctx.Done():
		_ = c.ch.Close()
		return "", failed(errNotConfirmed, fmt.Errorf("%w: %w", failtext.Told("no confirm from the broker in time"), ctx.Err()))
	}
	// A returned message comes before its confirm.
	select {
	case ret := <-c.returns:
		r.release(c)
		return "", failed(errBrokerRefused, failtext.Tell("returned by the broker: %d %s (no queue bound to exchange %q with routing key %q)",
			ret.ReplyCode, ret.ReplyText, r.exchange, r.key))
	default:
	}
	if !acked {
		r.release(c)
		return "", failed(errNotConfirmed, failtext.Told("the broker nacked the message"))
	}
	r.release(c)
	return confirmedAnswer, nil
}

func (r *rabbitMQ) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn != nil {
		_ = r.conn.Close()
		r.conn, r.idle = nil, nil
	}
}

// classifyAMQP gives an AMQP failure its attempt error code: the broker
// refusing the credentials or the vhost is auth_failed, a missing or
// refused exchange broker_refused, anything else (no connection, a
// connection closed) broker_unreachable.
func classifyAMQP(err error) error {
	var be *brokerError
	if errors.As(err, &be) {
		return err
	}
	var ae *amqp.Error
	if errors.As(err, &ae) {
		switch ae.Code {
		case amqp.AccessRefused:
			return failed(errAuthFailed, err)
		case amqp.NotFound, amqp.PreconditionFailed, amqp.NotAllowed, amqp.ResourceLocked:
			return failed(errBrokerRefused, err)
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return failed(errNotConfirmed, err)
	}
	return failed(errBrokerUnreachable, err)
}
