package rabbitmq

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/webhookd/webhookd/internal/destination"
)

// maxChannels bounds the idle channels kept on one connection.
const maxChannels = 16

// heartbeat is the connection's heartbeat: a broker gone silent is seen
// within two of them.
const heartbeat = 10 * time.Second

// maxReason bounds the broker's reply text shown to the merchant.
const maxReason = 256

// confirmed is the attempt's answer when the broker took the message.
const confirmed = "confirmed by broker"

// errClosed is a Send after Close.
var errClosed = errors.New("rabbitmq: publisher closed")

// Open makes cfg's publisher. It connects on the first Send. A url that
// breaks a rule of this build (a Config not made by Parse, a value an
// older build stored) is refused here, before any dial, as
// destination_invalid in the rule's words.
func (Kind) Open(cfg destination.Config, env destination.Env) (destination.Publisher, error) {
	c, err := destination.ConfigOf[Config]("rabbitmq", cfg)
	if err != nil {
		return nil, err
	}
	if err := c.check("destination"); err != nil {
		return nil, destination.Refused(err)
	}
	u, _ := ParseURL("destination.url", c.URL) // checked above
	return &publisher{url: u, exchange: c.Exchange, key: c.RoutingKey, dial: env.Dial, timeout: env.Timeout}, nil
}

// publisher publishes to a RabbitMQ exchange: one persistent message per
// Send, on a channel in confirm mode, taken only when the broker acks
// it. A message no queue takes (mandatory, returned) is refused. It keeps
// one connection, made again when it closes, and a few channels on it,
// each used by one Send at a time so that its confirm and return are the
// Send's own.
type publisher struct {
	// url is the destination's url read by allow-list.
	url           URL
	exchange, key string
	dial          func(ctx context.Context, network, address string) (net.Conn, error)
	timeout       time.Duration

	mu     sync.Mutex
	conn   *amqp.Connection
	idle   []*channel
	closed bool
}

// channel is a channel in confirm mode and what it was told.
type channel struct {
	ch       *amqp.Channel
	returns  chan amqp.Return
	closed   chan *amqp.Error
	fromConn *amqp.Connection
}

// uri is the URI amqp091-go dials, made of the destination's typed parts
// alone: no query, so no option of the library's (a file it would open,
// a TLS setting, a heartbeat) comes from the merchant's text.
func (p *publisher) uri() string {
	scheme := "amqp"
	if p.url.Secure {
		scheme = "amqps"
	}
	// A url without credentials logs in as guest, as the AMQP URI
	// specification has it (and amqp091-go did with the url itself).
	uri := amqp.URI{Scheme: scheme, Host: p.url.Host, Port: p.url.Port, Username: "guest", Password: "guest", Vhost: p.url.Vhost}
	if p.url.Username != "" || p.url.Password != "" {
		uri.Username, uri.Password = p.url.Username, p.url.Password
	}
	return uri.String()
}

// connection is the open connection, dialled again when there is none.
func (p *publisher) connection(ctx context.Context) (*amqp.Connection, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, destination.Fail(destination.CodeUnreachable, "the destination's connection was closed", errClosed)
	}
	if p.conn != nil && !p.conn.IsClosed() {
		return p.conn, nil
	}
	p.idle = nil
	// The handshakes end by the Send's deadline, or the timeout's when
	// the caller set none: a socket deadline is real time, which the
	// context keeps, not the engine's clock.
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	conn, err := amqp.DialConfig(p.uri(), amqp.Config{
		// The engine's own TLS settings: amqp091-go reads certificate
		// files named by the URI only when this is nil.
		TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, ServerName: p.url.Host},
		Vhost:           p.url.Vhost,
		Heartbeat:       heartbeat,
		Properties:      amqp.Table{"product": "webhookd", "connection_name": "webhookd deliveries"},
		Dial: func(network, addr string) (net.Conn, error) {
			c, err := p.dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// The TLS and AMQP handshakes end by the Send's deadline;
			// the library clears it once the connection is open.
			if err := c.SetDeadline(deadline); err != nil {
				_ = c.Close()
				return nil, err
			}
			return c, nil
		},
	})
	if err != nil {
		return nil, classify(err)
	}
	p.conn = conn
	return conn, nil
}

// channel takes an idle channel or opens one in confirm mode.
func (p *publisher) channel(ctx context.Context) (*channel, error) {
	conn, err := p.connection(ctx)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	for len(p.idle) > 0 {
		c := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if !c.ch.IsClosed() && c.fromConn == conn {
			p.mu.Unlock()
			return c, nil
		}
	}
	p.mu.Unlock()
	ch, err := conn.Channel()
	if err != nil {
		return nil, classify(err)
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, classify(err)
	}
	return &channel{ch: ch, returns: ch.NotifyReturn(make(chan amqp.Return, 1)),
		closed: ch.NotifyClose(make(chan *amqp.Error, 1)), fromConn: conn}, nil
}

// release keeps a channel that is still good for the next Send.
func (p *publisher) release(c *channel) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || c.ch.IsClosed() || c.fromConn != p.conn || len(p.idle) >= maxChannels {
		_ = c.ch.Close()
		return
	}
	p.idle = append(p.idle, c)
}

// Send publishes m: persistent, mandatory, its headers as the message's
// AMQP headers, its delivery id as message-id and its signing time as
// timestamp; taken on the broker's ack.
func (p *publisher) Send(ctx context.Context, m destination.Message) (destination.Result, error) {
	c, err := p.channel(ctx)
	if err != nil {
		return destination.Result{}, err
	}
	headers := make(amqp.Table, len(m.Headers))
	for k, v := range m.Headers {
		headers[k] = v
	}
	contentType := m.ContentType
	if contentType == "" {
		contentType = "application/json"
	}
	confirm, err := c.ch.PublishWithDeferredConfirmWithContext(ctx, p.exchange, p.key, true, false, amqp.Publishing{
		Headers: headers, ContentType: contentType, DeliveryMode: amqp.Persistent,
		MessageId: m.DeliveryID, Timestamp: m.SignedAt, Body: m.Body,
	})
	if err != nil {
		_ = c.ch.Close()
		return destination.Result{}, classify(err)
	}
	var acked bool
	select {
	case <-confirm.Done():
		acked = confirm.Acked()
	case reason := <-c.closed:
		// The broker closed the channel: a missing exchange (404), say.
		if reason == nil {
			return destination.Result{}, closedBeforeConfirm(c)
		}
		return destination.Result{}, classify(reason)
	case <-ctx.Done():
		_ = c.ch.Close()
		return destination.Result{}, destination.Fail(destination.CodeNotConfirmed, "no confirm from the broker in time", ctx.Err())
	}
	// A returned message comes before its confirm. A channel that closed
	// (the connection cut) closes its returns too: that is no return,
	// and the confirm it ended is no nack.
	select {
	case ret, ok := <-c.returns:
		if ok {
			p.release(c)
			said := fmt.Sprintf("returned by the broker: %d %s (no queue bound to exchange %q with routing key %q)",
				ret.ReplyCode, printable(ret.ReplyText), p.exchange, p.key)
			return destination.Result{}, destination.Fail(destination.CodeRefused, said, errors.New("rabbitmq: "+said))
		}
		if !acked {
			return destination.Result{}, closedBeforeConfirm(c)
		}
	default:
	}
	if !acked {
		p.release(c)
		return destination.Result{}, destination.Fail(destination.CodeNotConfirmed, "the broker nacked the message", errors.New("rabbitmq: nack"))
	}
	p.release(c)
	return destination.Result{Answer: confirmed}, nil
}

// closedBeforeConfirm is the failure of a send whose channel closed before
// the broker confirmed it. The broker's reason (a missing exchange's 404)
// is sent on c.closed before the confirms end, but a select that saw both
// ready may have taken the confirms' end first: the reason is read here,
// and only without one is it the connection's loss.
func closedBeforeConfirm(c *channel) error {
	select {
	case reason, ok := <-c.closed:
		if ok && reason != nil {
			return classify(reason)
		}
	default:
	}
	return destination.Fail(destination.CodeUnreachable, "channel closed before the broker confirmed", errors.New("rabbitmq: channel closed"))
}

// Close closes the connection; Send fails after it.
func (p *publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	p.idle = nil
	if p.conn == nil {
		return nil
	}
	err := p.conn.Close()
	p.conn = nil
	if errors.Is(err, amqp.ErrClosed) {
		return nil // the broker or the network closed it first
	}
	return err
}

// classify gives an AMQP failure its attempt error code and the
// merchant's words: the broker refusing the credentials or the vhost is
// auth_failed, a missing or refused exchange broker_refused, a deadline
// not_confirmed, anything else (no connection, a connection closed)
// broker_unreachable; the words are the broker's answer (answer) or, left
// "", the kind of network failure (destination.Classify).
func classify(err error) error {
	var f *destination.Failure
	if errors.As(err, &f) {
		return err
	}
	code := destination.CodeUnreachable
	var ae *amqp.Error
	switch {
	case errors.As(err, &ae) && ae.Code == amqp.AccessRefused:
		code = destination.CodeAuthFailed
	case errors.As(err, &ae) && slices.Contains([]int{amqp.NotFound, amqp.PreconditionFailed, amqp.NotAllowed, amqp.ResourceLocked}, ae.Code):
		code = destination.CodeRefused
	case errors.Is(err, context.DeadlineExceeded):
		code = destination.CodeNotConfirmed
	}
	return destination.Fail(code, answer(err), err)
}

// clientErrors are the AMQP library's own errors whose text is fixed (a
// refusal it read from the handshake, a closed channel); its other
// errors carry the network's text and are not the broker's answer.
var clientErrors = []*amqp.Error{amqp.ErrClosed, amqp.ErrChannelMax, amqp.ErrSASL, amqp.ErrCredentials, amqp.ErrVhost,
	amqp.ErrSyntax, amqp.ErrFrame, amqp.ErrFrameTooLarge, amqp.ErrCommandInvalid, amqp.ErrUnexpectedFrame, amqp.ErrFieldType}

// answer is what the broker itself answered, when err carries it: an
// AMQP reply from the broker, its code and reply text ("the broker
// answered 404 NOT_FOUND - no exchange 'x' in vhost '/'"); "" when err is
// no answer of the broker's.
func answer(err error) string {
	var ae *amqp.Error
	if errors.As(err, &ae) && (ae.Server || slices.Contains(clientErrors, ae)) {
		return fmt.Sprintf("the broker answered %d %s", ae.Code, printable(ae.Reason))
	}
	return ""
}

// printable is a broker's text as it may be shown: at most maxReason
// bytes, valid UTF-8, no NUL.
func printable(s string) string {
	if len(s) > maxReason {
		s = s[:maxReason]
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}
