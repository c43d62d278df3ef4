package destination

import (
	"crypto/tls"
	"io"
	"net/http"
	"time"

	"github.com/webhookd/webhookd/internal/failtext"
)

// MaxServiceAnswer bounds what is read of one answer of a cloud
// service's HTTP API (at the address a merchant may set as its
// endpoint): the services' own answers are a few KiB, and an endpoint
// that sends more is not the service. Past it the send fails with
// response_too_large and reading stops: memory does not grow with what a
// merchant's server sends. The time of the read is the send's deadline,
// which the request's context carries.
const MaxServiceAnswer = 1 << 20

// idleConns is how long an HTTP client's unused connection is kept.
const idleConns = 5 * time.Minute

// HTTPClient is the client a kind that speaks HTTP (a cloud service's
// SDK) is given: it dials through env.Dial, never the environment's
// proxy; it resumes TLS sessions; and its answers' bodies end in a
// *failtext.TooLargeError past MaxServiceAnswer bytes, so that an SDK
// that reads a whole body reads no more; and the transport writes its own
// copy of each request's body (wholeBodies), so that an answer that
// comes before the request is read is read for what it says. maxIdle
// bounds the connections it keeps.
func HTTPClient(env Env, maxIdle int) *http.Client {
	transport := &http.Transport{
		DialContext:         env.Dial,
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: env.Timeout,
		TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12, ClientSessionCache: tls.NewLRUClientSessionCache(64)},
		MaxIdleConnsPerHost: maxIdle,
		IdleConnTimeout:     idleConns,
	}
	client := BoundedClient(wholeBodies{next: transport}, MaxServiceAnswer)
	// A service answers; it does not send the request elsewhere. A
	// redirect is read as the answer it is, never followed: the next host
	// would be one the merchant's destination did not name.
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return client
}

// BoundedClient is an HTTP client on transport whose answers' bodies end
// in a *failtext.TooLargeError past limit bytes.
func BoundedClient(transport http.RoundTripper, limit int64) *http.Client {
	return &http.Client{Transport: boundedBodies{next: transport, limit: limit}}
}

// boundedBodies is a RoundTripper bounding the bodies it hands back.
type boundedBodies struct {
	next  http.RoundTripper
	limit int64
}

// RoundTrip implements http.RoundTripper. An answer that says it is
// longer than the bound is refused before a byte of its body is read.
func (b boundedBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if resp.ContentLength > b.limit {
		_ = resp.Body.Close()
		return nil, &failtext.TooLargeError{Limit: b.limit}
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body, left: b.limit, limit: b.limit}
	return resp, nil
}

// CloseIdleConnections closes the transport's idle connections
// (http.Client.CloseIdleConnections asks its transport).
func (b boundedBodies) CloseIdleConnections() {
	if c, ok := b.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// boundedBody reads at most limit bytes of a body; a body with more
// fails with *failtext.TooLargeError instead of ending, so that what was
// read is never mistaken for the whole answer.
type boundedBody struct {
	io.ReadCloser
	left, limit int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// The bound is reached: one byte more says whether the body
		// goes on.
		var one [1]byte
		if n, err := io.ReadFull(b.ReadCloser, one[:]); n == 0 {
			return 0, err
		}
		return 0, &failtext.TooLargeError{Limit: b.limit}
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
