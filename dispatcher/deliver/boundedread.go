package deliver

import (
	"io"
	"net/http"

	"github.com/webhookd/webhookd/internal/failtext"
)

// maxServiceAnswer bounds what is read of one answer of a cloud
// service's HTTP API (SQS's, at the address a merchant may set as its
// endpoint): SQS's own answers are a few
// KiB, and an endpoint that sends more is not SQS. Past it the attempt
// fails with response_too_large and reading stops: memory does not grow
// with what a merchant's server sends. The time of the read is the
// attempt's deadline, which the request's context carries.
const maxServiceAnswer = 1 << 20

// boundedClient is an HTTP client on transport whose answers' bodies
// end in a *failtext.TooLargeError past maxServiceAnswer bytes: an SDK
// that reads a whole body (SQS's decoder does) reads no more.
func boundedClient(transport http.RoundTripper) *http.Client {
	return &http.Client{Transport: boundedBodies{next: transport, limit: maxServiceAnswer}}
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
