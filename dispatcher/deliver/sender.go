package deliver

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"code.dny.dev/ssrf"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/semaphore"

	"github.com/webhookd/webhookd/dispatcher/internal/metrics"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/failtext"
	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/keybounds"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/signer"
)

// maxResponseBody is how much of a receiver's answer is kept in the
// attempt record (DESIGN.md: the first 1 KiB).
const maxResponseBody = destination.MaxAnswer

// Attempt error codes (DESIGN.md, webhook delivery attempts).
const (
	errTimeout           = "timeout"
	errConnectionRefused = "connection_refused"
	errTLS               = "tls_error"
	// errTLSHandshake is an endpoint that refused the handshake (an alert:
	// no client certificate, or one it does not trust).
	errTLSHandshake  = "tls_handshake"
	errRedirect      = "redirect"
	errTargetBlocked = "target_blocked"
	errDNS           = "dns_error"
	errNetwork       = "network_error"
	errHTTPStatus    = "http_status"
	// errResponseTooLarge is an answer longer than the bound on what an
	// attempt reads of it (boundedread.go): reading stopped there.
	errResponseTooLarge = "response_too_large"
)

// SenderConfig is what the sender needs.
type SenderConfig struct {
	// Timeout bounds one whole HTTP exchange (required).
	Timeout time.Duration
	// AllowHTTP lets deliveries go to http:// URLs (development).
	AllowHTTP bool
	// AllowPrivate lets deliveries dial private, loopback and link-local
	// addresses (development and tests).
	AllowPrivate bool
	// MaxConns bounds the outbound connections open at once, idle
	// keep-alive ones included (required).
	MaxConns int
	// MaxConnsPerHost bounds the connections to one receiver's host
	// (required).
	MaxConnsPerHost int
	// Version names this build in the user-agent header (required).
	Version string
	// EgressProxy, when set, is the HTTP CONNECT proxy every delivery
	// goes through (see egressDialer); nil: deliveries dial directly.
	EgressProxy *url.URL
	// OAuth is where OAuth2 endpoints' tokens are shared (endpointoauth.go).
	OAuth OAuthConfig
	// Kinds are the destination kinds this build delivers to
	// (internal/destination/kinds); nil: a destination of any kind fails
	// as one not delivered.
	Kinds *destination.Registry
}

func (c SenderConfig) validate() error {
	switch {
	case c.Timeout <= 0:
		return errors.New("sender: Timeout must be positive")
	case c.MaxConns <= 0 || c.MaxConnsPerHost <= 0:
		return errors.New("sender: MaxConns and MaxConnsPerHost must be positive")
	case c.Version == "":
		return errors.New("sender: Version is required")
	case c.EgressProxy != nil && (c.EgressProxy.Scheme != "http" || c.EgressProxy.Host == ""):
		return errors.New("sender: EgressProxy must be an http://host:port URL")
	}
	return nil
}

// Sender makes the HTTP exchange of an attempt: one POST of the stored
// body with the Standard Webhooks headers, through the one client every
// attempt shares.
type Sender struct {
	cfg   SenderConfig
	http  *http.Client
	clock clock.Clock
	// endpoints are the transports of mTLS endpoints, one per client
	// certificate, on the same dialer.
	endpoints *endpointTransports
	// bearer are the token sources of OAuth2 endpoints, fetching through
	// http.
	bearer *bearerTokens
	// tracer traces each exchange (tracing.go); nil when tracing is off.
	tracer trace.Tracer
}

// NewSender builds the sender and its client on dialer, or on newDialer's
// when it is nil (tests give their own, with their own resolver).
func NewSender(cfg SenderConfig, clock clock.Clock, dialer *net.Dialer) (*Sender, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if dialer == nil {
		dialer = NewDialer(cfg)
	}
	shared, endpoints := httpClientDialing(cfg, dialer)
	return &Sender{cfg: cfg, http: shared, clock: clock, endpoints: endpoints,
		bearer: newBearerTokens(cfg.OAuth, shared, clock)}, nil
}

// Close drops the idle connections.
func (s *Sender) Close() {
	s.http.CloseIdleConnections()
	s.endpoints.closeIdle()
	s.bearer.close()
}

// NewDialer is the dialer of every delivery: unless private targets are
// allowed, it refuses loopback, private, link-local, CGNAT, multicast and
// every other special-use address (IANA's registries, IPv6 outside
// 2000::/3, hence IPv4-mapped, NAT64 and ULA; 6to4 too) after DNS
// resolution.
func NewDialer(cfg SenderConfig) *net.Dialer {
	dialer := &net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}
	if !cfg.AllowPrivate {
		// Control runs on the resolved address of every connection, so DNS
		// rebinding cannot slip a private address past it. Any port is
		// allowed: receivers legitimately listen on 8443 and the like.
		dialer.Control = ssrf.New(ssrf.WithAnyPort()).Safe
	}
	return dialer
}

// httpClientDialing builds the one client every attempt shares: keep-alive
// connections to receivers, no environment proxy (it would bypass the
// address check), no redirects, the dialer's address check, and at most
// MaxConns connections open at once. With an EgressProxy, connections are
// tunnels through it, the address check made before each CONNECT. The
// transports of mTLS endpoints are built the same way on the same bounded
// dialer, so that the bound counts their connections too.
func httpClientDialing(cfg SenderConfig, dialer *net.Dialer) (*http.Client, *endpointTransports) {
	dial := dialer.DialContext
	if cfg.EgressProxy != nil {
		dial = egressDialing(cfg, dialer).DialContext
	}
	bounded := &boundedDialer{dial: dial, open: semaphore.NewWeighted(int64(cfg.MaxConns))}
	build := func(config *tls.Config) *http.Transport {
		// Sessions are resumed: a handshake that resumes one makes no
		// certificate signature (a merchant's mTLS key's, RSA up to 4,096
		// bits) and no certificate verification, the costly steps of a
		// reconnection to the same endpoint.
		config.ClientSessionCache = tls.NewLRUClientSessionCache(tlsSessionsPerTransport)
		return &http.Transport{
			Proxy:                  nil,
			DialContext:            bounded.DialContext,
			ForceAttemptHTTP2:      true,
			TLSClientConfig:        config,
			TLSHandshakeTimeout:    cfg.Timeout,
			MaxIdleConns:           cfg.MaxConns,
			MaxIdleConnsPerHost:    cfg.MaxConnsPerHost,
			MaxConnsPerHost:        cfg.MaxConnsPerHost,
			IdleConnTimeout:        90 * time.Second,
			ExpectContinueTimeout:  time.Second,
			MaxResponseHeaderBytes: 64 << 10,
		}
	}
	transport := build(&tls.Config{MinVersion: tls.VersionTLS12})
	endpoints := newEndpointTransports(build, maxEndpointTransports)
	bounded.closeIdle = func() {
		transport.CloseIdleConnections()
		endpoints.closeIdle()
	}
	return &http.Client{Transport: transport, CheckRedirect: noRedirects}, endpoints
}

// tlsSessionsPerTransport bounds the TLS sessions kept for resumption by
// one transport (the shared one, or one mTLS identity's).
const tlsSessionsPerTransport = 64

// refusedAuthentication is the result of an attempt whose stored
// authentication breaks a rule it was not held to when it was stored (an
// older build's: a key beyond keybounds): authentication_invalid, told in
// the rule's words, which never quote the key. Nothing was sent; the
// merchant replaces the authentication.
func (s *Sender) refusedAuthentication(started time.Time, err error) Result {
	code := subscriptions.CodeAuthenticationInvalid
	res := Result{Started: started, Finished: s.clock.Now(), ErrCode: &code, outcome: metrics.OutcomeBlocked, cause: err}
	res.Duration = res.Finished.Sub(started)
	words := "the stored authentication breaks a rule of this server; set it again"
	var bad *invalid.Error
	var key *keybounds.Error
	switch {
	case errors.As(err, &bad):
		words = bad.Message
	case errors.As(err, &key):
		words = key.Reason
	}
	res.Body = printable([]byte(truncate(code+": "+words, maxResponseBody)))
	return res
}

// noRedirects hands a redirect back as the answer: an attempt never
// follows one.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// egressDialing is the egressDialer of cfg's proxy: dialer's resolver for
// targets, the address check of newDialer unless private targets are
// allowed, and dialer's timeouts without its check for the proxy itself.
func egressDialing(cfg SenderConfig, dialer *net.Dialer) *egressDialer {
	e := &egressDialer{proxy: cfg.EgressProxy, resolver: dialer.Resolver, timeout: cfg.Timeout}
	if !cfg.AllowPrivate {
		e.check = ssrf.New(ssrf.WithAnyPort()).Safe
	}
	toProxy := &net.Dialer{Timeout: dialer.Timeout, KeepAlive: dialer.KeepAlive}
	e.dialProxy = toProxy.DialContext
	return e
}

// boundedDialer holds the process's outbound connections to a number,
// idle keep-alive ones included: http.Transport bounds connections per host
// only, and an event fanned out to thousands of receivers would otherwise
// open thousands at once. A dial over the bound first closes the idle
// connections (kept for other hosts, they would otherwise hold the slots
// until their idle timeout), then waits for a connection to close, as long
// as the attempt's context allows.
type boundedDialer struct {
	dial      func(ctx context.Context, network, address string) (net.Conn, error)
	open      *semaphore.Weighted
	closeIdle func()
}

// DialContext dials within the bound.
func (b *boundedDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if !b.open.TryAcquire(1) {
		b.closeIdle()
		if err := b.open.Acquire(ctx, 1); err != nil {
			return nil, err
		}
	}
	conn, err := b.dial(ctx, network, address)
	if err != nil {
		b.open.Release(1)
		return nil, err
	}
	return &countedConn{Conn: conn, release: func() { b.open.Release(1) }}, nil
}

// countedConn gives its slot back once, when it is closed.
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

// halfCloser is a connection whose two directions shut down apart
// (*net.TCPConn).
type halfCloser interface {
	CloseRead() error
	CloseWrite() error
}

// Close implements net.Conn. It shuts the connection down first: Close
// of a connection a goroutine is reading from (the transport's read loop)
// only marks it closing, and the socket would outlive the slot given back
// for a moment; shutdown ends it in the kernel at once.
//
// Reads end before the FIN goes out. The transport closes the connection
// of a request whose deadline passed while its read loop still waits for
// the answer, and takes an answer that loop hands it meanwhile as the
// request's. A receiver that answers once its peer hangs up (a handler
// that waits for its request's context, which the server ends on our FIN)
// would otherwise be read, if the read loop ran between the FIN and the
// end of Close, as a 2xx to an attempt that timed out: a success recorded
// for a delivery its receiver never answered in time (seen once in CI as
// TestRetryOutcomes' slow receiver settled at its first attempt; a Go
// program that pauses 2 ms there read 7 or 8 such answers in 4,800 timed-out
// requests, none once reads end first).
func (c *countedConn) Close() error {
	// A deadline already past: no read begun after it reaches the socket.
	_ = c.Conn.SetReadDeadline(time.Unix(1, 0))
	if tcp, ok := c.Conn.(halfCloser); ok {
		_ = tcp.CloseWrite()
		_ = tcp.CloseRead()
	}
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// Result is what one HTTP exchange gave.
type Result struct {
	// Started and Finished bound the exchange on the sender's clock.
	Started, Finished time.Time
	// Duration is the exchange's own length, measured on the monotonic clock.
	Duration time.Duration
	// HTTPStatus is the receiver's status; nil when none came back.
	HTTPStatus *int
	// ErrCode is the attempt's error code (DESIGN.md); nil on a 2xx.
	ErrCode *string
	// Body is the start of the receiver's answer, printable.
	Body string
	// Headers are the request's headers as recorded (sentHeaders); nil
	// when no request was made.
	Headers    map[string]string
	outcome    string
	retryAfter time.Duration
	// final ends the delivery whatever the schedule says: nothing can
	// receive it any more (a listener that ended).
	final bool
	// cause is the error behind a failure that had no answer to show, in
	// its own words: for the operator's log alone (the merchant reads
	// ErrCode and Body, written for them by failtext).
	cause error
	// transformation is the version of the subscription's transformation
	// the attempt ran, sentBody the body it made (what was sent); nil
	// when none ran.
	transformation *int
	sentBody       *string
	// skipped is a delivery the transformation cancelled: it ends
	// skipped, nothing sent.
	skipped bool
}

// OK is true when the receiver answered 2xx.
func (r Result) OK() bool { return r.ErrCode == nil }

// gone is the receiver's 410 (a token endpoint's is no answer of the
// receiver's).
func (r Result) gone() bool {
	return r.HTTPStatus != nil && *r.HTTPStatus == http.StatusGone && (r.ErrCode == nil || *r.ErrCode != errOAuthToken)
}

// Request is one HTTP exchange of an attempt, built once per attempt (by
// the Runner, a batch, the endpoint check) and handed down whole: what is
// sent, to where, signed how, with which headers and credentials.
type Request struct {
	// Target is the endpoint's URL.
	Target string
	// EventID is the webhook-id header: the event's id, or a batch's.
	EventID string
	// Body is the payload as stored (the envelope, or a batch's); Signing
	// may encrypt it before it is sent.
	Body []byte
	// Signing encrypts the body (then the signature covers the JWE sent)
	// and signs it.
	Signing Signing
	// SignedAt dates the signature; zero: the instant of sending (the
	// endpoint check sends a stale timestamp on purpose).
	SignedAt time.Time
	// Headers are the subscription's own headers, set before ours so that
	// ours win (checked when they were set: none of them is one of ours).
	Headers map[string]string
	// Ordering are an ordered delivery's headers (or a batch's size), set
	// after ours.
	Ordering http.Header
	// TLS, when not nil, is the client certificate presented, on the
	// connections kept for it.
	TLS *EndpointTLS
	// OAuth, when not nil, holds the credentials of the bearer token sent
	// (exchangeBearer).
	OAuth *EndpointOAuth
}

// prepared is a Request ready for the wire: Body is the payload as sent
// (encrypted when its Signing says so), of contentType.
type prepared struct {
	Request
	contentType string
	// signed, when set, are the request's headers as the message was
	// built and signed (destination.Message.Header): sent as they are.
	signed http.Header
}

// Send makes req's exchange, the whole of it bounded by the delivery
// timeout. An error is internal (the certificate or credentials could
// not be opened, the body not encrypted): no request was sent.
func (s *Sender) Send(ctx context.Context, req Request) (Result, error) {
	body, contentType, err := req.Signing.payload(req.Body)
	if err != nil {
		return Result{}, err
	}
	p := prepared{Request: req, contentType: contentType}
	p.Body = body
	return s.send(ctx, p)
}

// send makes p's exchange on the client of its certificate, with its
// bearer token when it has OAuth2 credentials.
func (s *Sender) send(ctx context.Context, p prepared) (Result, error) {
	client := s.http
	if p.TLS != nil {
		var err error
		if client, err = s.endpoints.client(p.TLS); err != nil {
			if errors.Is(err, subscriptions.ErrAuthenticationInvalid) {
				return s.refusedAuthentication(s.clock.Now(), err), nil
			}
			return Result{}, err
		}
	}
	if p.OAuth != nil {
		return s.exchangeBearer(ctx, client, p)
	}
	return s.exchange(ctx, client, p), nil
}

// endpointCredentials are an HTTP endpoint's credentials, as a message
// carries them (destination.Message.Credentials).
type endpointCredentials struct {
	tls   *EndpointTLS
	oauth *EndpointOAuth
}

// credentials are leased's endpoint credentials for its message; nil
// when it has none (every subscription but an mTLS or OAuth2 endpoint).
func (c *SecretCache) credentials(leased *store.LeasedDelivery) any {
	tls, oauth := c.EndpointTLS(*leased), c.EndpointOAuth(*leased)
	if tls == nil && oauth == nil {
		return nil
	}
	return endpointCredentials{tls: tls, oauth: oauth}
}

// httpKind is the sender as the HTTP endpoint's kind sends
// (internal/destination/webhook): a message the engine built and signed,
// to its URL, with the subscription's credentials.
type httpKind struct{ s *Sender }

// Send implements destination.Sender.
func (k httpKind) Send(ctx context.Context, m destination.Message) (destination.Result, error) {
	p := prepared{Request: Request{Target: m.URL, EventID: m.EventID, Body: m.Body, Headers: m.Custom},
		contentType: m.ContentType, signed: m.Header}
	if c, ok := m.Credentials.(endpointCredentials); ok {
		p.TLS, p.OAuth = c.tls, c.oauth
	}
	res, err := k.s.send(ctx, p)
	return toKind(res), err
}

// SendSignedAt is Send for an attempt a person asked for, the endpoint
// check's (the signature dated req.SignedAt, which the check may set in
// the past on purpose): its bearer token is asked afresh (asking).
func (s *Sender) SendSignedAt(ctx context.Context, req Request) (Result, error) {
	return s.Send(asking(ctx), req)
}

// exchange makes p's request on client.
func (s *Sender) exchange(ctx context.Context, client *http.Client, p prepared) Result {
	started := s.clock.Now()
	signedAt := p.SignedAt
	if signedAt.IsZero() {
		signedAt = started
	}
	res := Result{Started: started}
	finish := func(outcome, code string) Result {
		res.Finished = s.clock.Now()
		res.Duration = res.Finished.Sub(started)
		res.outcome = outcome
		if code != "" {
			res.ErrCode = &code
		}
		return res
	}
	u, err := url.Parse(p.Target)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return finish(metrics.OutcomeBlocked, errTargetBlocked)
	}
	if u.Scheme == "http" && !s.cfg.AllowHTTP {
		return finish(metrics.OutcomeBlocked, errTargetBlocked)
	}

	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.Target, bytes.NewReader(p.Body))
	if err != nil {
		return finish(metrics.OutcomeBlocked, errTargetBlocked)
	}
	if p.signed != nil {
		req.Header = p.signed
	} else {
		// The subscription's headers first, so that ours win whatever
		// they say (the rules refuse our names anyway).
		for name, value := range p.Headers {
			req.Header.Set(name, value)
		}
		req.Header.Set("Content-Type", p.contentType)
		req.Header.Set("User-Agent", "webhookd/"+s.cfg.Version)
		signer.SetHeadersWith(req.Header, p.EventID, signedAt, p.Body, p.Signing.Keys...)
	}
	for name, values := range p.Ordering {
		req.Header[name] = values
	}
	resp, err := s.do(client, req)
	// Recorded after the exchange: s.do adds the traceparent the receiver
	// got, and the record shows what was sent.
	res.Headers = sentHeaders(req.Header, p.Headers)
	if err != nil {
		outcome, code := classify(ctx, err)
		res.cause = err
		return finish(outcome, code)
	}
	defer resp.Body.Close()
	status := resp.StatusCode
	res.HTTPStatus = &status
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	res.Body = printable(b)
	if err != nil {
		outcome, code := classify(ctx, err)
		res.cause = err
		return finish(outcome, code)
	}
	// Drain a little more so that the connection can be reused; a receiver
	// that sends more than that gets its connection closed.
	_, _ = io.CopyN(io.Discard, resp.Body, 16<<10)

	switch {
	case status >= 200 && status < 300:
		return finish(metrics.OutcomeSuccess, "")
	case status >= 300 && status < 400:
		return finish(metrics.OutcomeHTTPError, errRedirect)
	default:
		if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
			res.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), res.Started)
		}
		return finish(metrics.OutcomeHTTPError, errHTTPStatus)
	}
}

// classify maps a transport error to an attempt error code and a metric
// outcome, by its kind (failtext.Of: the same rule that words the
// failure for the merchant).
func classify(ctx context.Context, err error) (outcome, code string) {
	kind := failtext.Of(err)
	switch {
	case kind == failtext.Blocked:
		return metrics.OutcomeBlocked, errTargetBlocked
	case kind == failtext.Timeout, errors.Is(ctx.Err(), context.DeadlineExceeded):
		return metrics.OutcomeTimeout, errTimeout
	}
	switch kind {
	case failtext.NameNotFound, failtext.DNS:
		return metrics.OutcomeNetworkError, errDNS
	case failtext.TooLarge:
		return metrics.OutcomeNetworkError, errResponseTooLarge
	case failtext.Refused:
		return metrics.OutcomeNetworkError, errConnectionRefused
	case failtext.HandshakeRefused:
		return metrics.OutcomeNetworkError, errTLSHandshake
	case failtext.Untrusted, failtext.WrongHost, failtext.InvalidCertificate, failtext.TLS:
		return metrics.OutcomeNetworkError, errTLS
	default:
		return metrics.OutcomeNetworkError, errNetwork
	}
}

// parseRetryAfter reads a Retry-After header: seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// printable makes a response body storable as Postgres text: valid UTF-8
// (a 1 KiB cut may split a character) without NUL bytes.
func printable(b []byte) string { return destination.Printable(b) }
