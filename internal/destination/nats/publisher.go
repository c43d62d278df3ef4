package nats

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/webhookd/webhookd/internal/destination"
)

// Errors a publisher reports as causes.
var (
	// errClosed is a Send after Close.
	errClosed = errors.New("nats: the publisher is closed")
	// errDenied is the server refusing the connection's user a subject
	// (publishing to the destination's, or receiving acknowledgements on
	// _INBOX.>): it says so asynchronously, and the publish it refused
	// would otherwise wait for its deadline.
	errDenied = errors.New("nats: permissions violation")
)

// publisher sends a destination's messages over one connection, opened
// on the first Send and again after a failure.
type publisher struct {
	cfg Config
	env destination.Env
	// lock is held while the connection is looked at or made; a channel
	// so that a Send waiting for another's connect gives up at its own
	// deadline.
	lock   chan struct{}
	conn   *connection
	closed bool
}

// connection is one client connection and what was seen on it.
type connection struct {
	nc *natsgo.Conn
	js jetstream.JetStream
	// dialer saw the connection's first failure below the library (a
	// frame past its bound).
	dialer *dialer
	// denied ends with errDenied when the server refuses a permission.
	denied context.Context
}

func newPublisher(cfg Config, env destination.Env) *publisher {
	return &publisher{cfg: cfg, env: env, lock: make(chan struct{}, 1)}
}

// Send implements destination.Publisher: one JetStream publish, done
// when the stream acknowledges it.
func (p *publisher) Send(ctx context.Context, m destination.Message) (destination.Result, error) {
	if _, ok := ctx.Deadline(); !ok && p.env.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.env.Timeout)
		defer cancel()
	}
	c, err := p.connect(ctx)
	if err != nil {
		return destination.Result{}, err
	}
	ack, err := c.publish(ctx, p.cfg.Subject, m)
	if err != nil {
		f := c.classify(err)
		if f.Code == destination.CodeUnreachable || f.Code == destination.CodeNotConfirmed || f.Code == destination.CodeTooLarge {
			// The connection may be what failed (a peer gone without a
			// word): the next Send dials again (connect sees it closed).
			// Sends in flight on it fail as not confirmed, and their
			// retries are deduplicated by their Nats-Msg-Id.
			c.nc.Close()
		}
		return destination.Result{}, f
	}
	return destination.Result{Answer: answer(ack)}, nil
}

// connect is the open connection, made now when there is none.
func (p *publisher) connect(ctx context.Context) (*connection, error) {
	select {
	case p.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, destination.Fail(destination.CodeUnreachable, "", ctx.Err())
	}
	defer func() { <-p.lock }()
	if p.closed {
		return nil, destination.Fail(destination.CodeUnreachable, "the destination's publisher is closed", errClosed)
	}
	if p.conn != nil && !p.conn.nc.IsClosed() {
		return p.conn, nil
	}
	c, err := dial(ctx, p.cfg, p.env)
	if err != nil {
		return nil, err
	}
	p.conn = c
	return c, nil
}

// Close implements destination.Publisher.
func (p *publisher) Close() error {
	p.lock <- struct{}{}
	defer func() { <-p.lock }()
	p.closed = true
	if p.conn != nil {
		p.conn.nc.Close()
		p.conn = nil
	}
	return nil
}

// dial connects to one of the destination's servers, under ctx's
// deadline and env's timeout.
func dial(ctx context.Context, cfg Config, env destination.Env) (*connection, error) {
	timeout := env.Timeout
	if deadline, ok := ctx.Deadline(); ok && (timeout <= 0 || time.Until(deadline) < timeout) {
		timeout = time.Until(deadline)
	}
	if timeout <= 0 {
		return nil, destination.Fail(destination.CodeUnreachable, "", context.DeadlineExceeded)
	}
	d := &dialer{ctx: ctx, dial: env.Dial, wantTLS: cfg.TLS}
	denied, deny := context.WithCancelCause(context.Background())
	opts := []natsgo.Option{
		natsgo.Name("webhookd/" + env.Version),
		natsgo.SetCustomDialer(d),
		// The dialer resolves names, through the deliveries' address
		// check: the library must not look them up itself.
		natsgo.SkipHostLookup(),
		// Only the servers the merchant named, each checked by the
		// operator's rules: not those a server advertises.
		natsgo.IgnoreDiscoveredServers(),
		natsgo.Timeout(timeout),
		// No reconnecting and so no buffering while it would: a broken
		// connection fails the sends on it, and the next Send dials.
		natsgo.NoReconnect(),
		natsgo.ReconnectBufSize(-1),
		natsgo.NoEcho(),
		natsgo.NoCallbacksAfterClientClose(),
		natsgo.ErrorHandler(func(_ *natsgo.Conn, _ *natsgo.Subscription, err error) {
			if errors.Is(err, natsgo.ErrPermissionViolation) {
				deny(errDenied)
			}
		}),
		natsgo.ClosedHandler(func(*natsgo.Conn) { deny(natsgo.ErrConnectionClosed) }),
	}
	if cfg.TLS {
		opts = append(opts, natsgo.Secure())
	}
	switch {
	case cfg.Username != "":
		opts = append(opts, natsgo.UserInfo(cfg.Username, cfg.Password))
	case cfg.Token != "":
		opts = append(opts, natsgo.Token(cfg.Token))
	}
	nc, err := natsgo.Connect(strings.Join(cfg.urls(), ","), opts...)
	if err != nil {
		deny(err)
		return nil, connectFailure(err, d.cause())
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, destination.Fail(destination.CodeUnreachable, "", fmt.Errorf("nats: jetstream: %w", err))
	}
	return &connection{nc: nc, js: js, dialer: d, denied: denied}, nil
}

// connectFailure is a failed connect in the merchant's words: the
// server's refusal of the credentials, else what happened below the
// library (the dial, TLS, a frame past its bound), else no connection.
func connectFailure(err, below error) *destination.Failure {
	switch {
	case isAuthError(err):
		return destination.Fail(destination.CodeAuthFailed, "the NATS server refused the credentials (authorization violation)", err)
	case errors.Is(err, natsgo.ErrSecureConnWanted):
		return destination.Fail(destination.CodeRefused, "the NATS server does not offer TLS", err)
	case below != nil:
		err = fmt.Errorf("%w (%w)", below, err)
		code, said := destination.Classify(err)
		if code == destination.CodeNotConfirmed {
			code = destination.CodeUnreachable // a connect that timed out sent nothing
		}
		return destination.Fail(code, said, err)
	}
	return destination.Fail(destination.CodeUnreachable, "", err)
}

// isAuthError is the server refusing who connects.
func isAuthError(err error) bool {
	return errors.Is(err, natsgo.ErrAuthorization) || errors.Is(err, natsgo.ErrAuthExpired) ||
		errors.Is(err, natsgo.ErrAuthRevoked) || errors.Is(err, natsgo.ErrAccountAuthExpired)
}

// publish sends m to subject and waits for the stream's acknowledgement
// (or the server's refusal of a permission, which comes on its own).
func (c *connection) publish(ctx context.Context, subject string, m destination.Message) (*jetstream.PubAck, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(c.denied, func() { cancel(context.Cause(c.denied)) })
	defer stop()
	// Nats-Msg-Id is the delivery id: a retry of a message whose
	// acknowledgement was lost carries the same, and the stream keeps one
	// (within its duplicate window).
	ack, err := c.js.PublishMsg(ctx, message(subject, m), jetstream.WithMsgID(m.DeliveryID))
	if err != nil && ctx.Err() != nil {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, ctx.Err()) {
			err = fmt.Errorf("%w: %w", cause, err)
		}
	}
	return ack, err
}

// message is m as a NATS message: its body, its headers under their
// names (lowercase, as the engine gives them), the content type.
// Headers named Nats-… are the servers' (JetStream reads Nats-Rollup,
// Nats-Expected-Stream, Nats-TTL…) and never come from a subscription:
// dropped.
func message(subject string, m destination.Message) *natsgo.Msg {
	msg := natsgo.NewMsg(subject)
	msg.Data = m.Body
	for name, value := range m.Headers {
		if strings.HasPrefix(strings.ToLower(name), "nats-") {
			continue
		}
		msg.Header.Set(name, value)
	}
	if m.ContentType != "" {
		msg.Header.Set("content-type", m.ContentType)
	}
	return msg
}

// classify is a failed publish in the merchant's words.
func (c *connection) classify(err error) *destination.Failure {
	var known *destination.Failure
	var apiErr *jetstream.APIError
	switch {
	case errors.As(err, &known):
		return known
	case errors.Is(err, errDenied):
		return destination.Fail(destination.CodeAuthFailed,
			"the NATS server does not allow the credentials to publish to the subject or to receive on _INBOX.>", err)
	case errors.Is(err, natsgo.ErrMaxPayload):
		return destination.Fail(destination.CodeRefused,
			"the message is larger than the NATS server's max_payload ("+strconv.FormatInt(c.nc.MaxPayload(), 10)+" bytes)", err)
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, natsgo.ErrNoResponders):
		return destination.Fail(destination.CodeRefused, "no JetStream stream takes the subject (no responders)", err)
	case errors.As(err, &apiErr):
		if apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum {
			return destination.Fail(destination.CodeRefused, "the JetStream stream refused the message: larger than its maximum message size", err)
		}
		return destination.Fail(destination.CodeRefused,
			fmt.Sprintf("the JetStream stream refused the message (%d, error code %d)", apiErr.Code, apiErr.ErrorCode), err)
	case errors.Is(err, jetstream.ErrInvalidJSAck):
		return destination.Fail(destination.CodeNotConfirmed, "the server's answer was not a JetStream acknowledgement", err)
	}
	if below := c.dialer.cause(); below != nil {
		if code, said := destination.Classify(below); code == destination.CodeTooLarge {
			return destination.Fail(code, said, fmt.Errorf("%w (%w)", below, err))
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return destination.Fail(destination.CodeNotConfirmed, "JetStream did not acknowledge the message before the deadline", err)
	case errors.Is(err, context.Canceled):
		return destination.Fail(destination.CodeNotConfirmed, "the send ended before JetStream acknowledged the message", err)
	case errors.Is(err, natsgo.ErrConnectionClosed), errors.Is(err, natsgo.ErrDisconnected):
		return destination.Fail(destination.CodeNotConfirmed, "the connection closed before JetStream acknowledged the message", err)
	}
	return destination.Fail(destination.CodeUnreachable, "", err)
}

// answer is a PubAck in a few words.
func answer(ack *jetstream.PubAck) string {
	s := "acknowledged by JetStream"
	if printable(ack.Stream) {
		s += " stream " + ack.Stream
	}
	s += ", sequence " + strconv.FormatUint(ack.Sequence, 10)
	if ack.Duplicate {
		s += " (a duplicate of a message it had)"
	}
	return s
}

// printable: a name of printable ASCII, short enough to show.
func printable(s string) bool {
	return s != "" && len(s) <= destination.MaxField &&
		!strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r > '~' })
}
