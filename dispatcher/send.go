package dispatcher

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"code.dny.dev/ssrf"

	"github.com/webhookd/webhookd/signer"
)

// maxResponseBody is how much of a receiver's answer is kept in the
// attempt record (DESIGN.md: the first 1 KiB).
const maxResponseBody = 1024

// Attempt error codes (DESIGN.md, webhook delivery attempts).
const (
	errTimeout           = "timeout"
	errConnectionRefused = "connection_refused"
	errTLS               = "tls_error"
	errRedirect          = "redirect"
	errTargetBlocked     = "target_blocked"
	errDNS               = "dns_error"
	errNetwork           = "network_error"
	errHTTPStatus        = "http_status"
)

// newHTTPClient builds the one client every attempt shares: keep-alive
// connections to receivers, no proxy (an environment proxy would bypass the
// address check), no redirects, and newDialer's address check.
func newHTTPClient(cfg Config) *http.Client {
	return httpClientDialing(cfg, newDialer(cfg))
}

// newDialer is the dialer of every delivery: unless private targets are
// allowed, it refuses loopback, private, link-local, CGNAT, multicast and
// every other special-use address (IANA's registries, IPv6 outside
// 2000::/3, hence IPv4-mapped, NAT64 and ULA; 6to4 too) after DNS
// resolution.
func newDialer(cfg Config) *net.Dialer {
	dialer := &net.Dialer{Timeout: cfg.DeliveryTimeout, KeepAlive: 30 * time.Second}
	if !cfg.AllowPrivateTargets {
		// Control runs on the resolved address of every connection, so DNS
		// rebinding cannot slip a private address past it. Any port is
		// allowed: receivers legitimately listen on 8443 and the like.
		dialer.Control = ssrf.New(ssrf.WithAnyPort()).Safe
	}
	return dialer
}

// httpClientDialing is newHTTPClient on a given dialer; tests give it one
// with their own resolver.
func httpClientDialing(cfg Config, dialer *net.Dialer) *http.Client {
	transport := &http.Transport{
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    cfg.DeliveryTimeout,
		MaxIdleConns:           4 * cfg.Concurrency,
		MaxIdleConnsPerHost:    max(cfg.SubscriptionConcurrency, 16),
		IdleConnTimeout:        90 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &http.Client{
		Transport: transport,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// result is what one HTTP exchange gave.
type result struct {
	started, finished time.Time
	duration          time.Duration
	httpStatus        *int
	errCode           *string
	body              string
	outcome           string
	retryAfter        time.Duration
}

func (r result) ok() bool { return r.errCode == nil }

func (r result) gone() bool { return r.httpStatus != nil && *r.httpStatus == http.StatusGone }

// send POSTs body to target with the Standard Webhooks headers, the whole
// exchange bounded by the delivery timeout.
func (d *Dispatcher) send(ctx context.Context, target, eventID string, body []byte, keys []signer.Key) result {
	started := d.cfg.Now()
	res := result{started: started}
	finish := func(outcome, code string) result {
		res.finished = d.cfg.Now()
		res.duration = res.finished.Sub(started)
		res.outcome = outcome
		if code != "" {
			res.errCode = &code
		}
		return res
	}
	u, err := url.Parse(target)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return finish(outcomeBlocked, errTargetBlocked)
	}
	if u.Scheme == "http" && !d.cfg.AllowHTTPTargets {
		return finish(outcomeBlocked, errTargetBlocked)
	}

	ctx, cancel := context.WithTimeout(ctx, d.cfg.DeliveryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return finish(outcomeBlocked, errTargetBlocked)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "webhookd/"+d.cfg.Version)
	signer.SetHeaders(req.Header, eventID, started, body, keys...)

	resp, err := d.http.Do(req)
	if err != nil {
		outcome, code := classify(ctx, err)
		return finish(outcome, code)
	}
	defer resp.Body.Close()
	status := resp.StatusCode
	res.httpStatus = &status
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	res.body = printable(b)
	if err != nil {
		outcome, code := classify(ctx, err)
		return finish(outcome, code)
	}
	// Drain a little more so that the connection can be reused; a receiver
	// that sends more than that gets its connection closed.
	_, _ = io.CopyN(io.Discard, resp.Body, 16<<10)

	switch {
	case status >= 200 && status < 300:
		return finish(outcomeSuccess, "")
	case status >= 300 && status < 400:
		return finish(outcomeHTTPError, errRedirect)
	default:
		if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
			res.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), res.started)
		}
		return finish(outcomeHTTPError, errHTTPStatus)
	}
}

// classify maps a transport error to an attempt error code and a metric
// outcome.
func classify(ctx context.Context, err error) (outcome, code string) {
	var dnsErr *net.DNSError
	var netErr net.Error
	var certErr *tls.CertificateVerificationError
	var recErr tls.RecordHeaderError
	var alert tls.AlertError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.Is(err, ssrf.ErrProhibitedIP), errors.Is(err, ssrf.ErrProhibitedPort),
		errors.Is(err, ssrf.ErrProhibitedNetwork), errors.Is(err, ssrf.ErrInvalidHostPort):
		return outcomeBlocked, errTargetBlocked
	case errors.Is(ctx.Err(), context.DeadlineExceeded), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &netErr) && netErr.Timeout():
		return outcomeTimeout, errTimeout
	case errors.As(err, &dnsErr):
		return outcomeNetworkError, errDNS
	case errors.Is(err, syscall.ECONNREFUSED):
		return outcomeNetworkError, errConnectionRefused
	case errors.As(err, &certErr), errors.As(err, &recErr), errors.As(err, &alert), errors.As(err, &unknownAuth),
		errors.As(err, &hostErr), errors.As(err, &invalid), strings.Contains(err.Error(), "tls: "):
		return outcomeNetworkError, errTLS
	default:
		return outcomeNetworkError, errNetwork
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
func printable(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}
