package destination

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
)

// wholeBodies is a RoundTripper that hands the transport its own copy of
// each request's body. The SDK (smithy-go's HTTP client) closes the body
// it gave as soon as RoundTrip returns, which is when the answer's
// headers arrive: a server that answers before it has read the whole
// request (a merchant's endpoint, the conformance suite's endless one)
// then has the transport's write of the rest fail, and the transport
// closes the connection under the answer being read, so that the
// attempt fails as a broken answer instead of for what the answer was.
// A cloud service request is one bounded message: a copy costs little.
type wholeBodies struct {
	next http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (w wholeBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return w.next.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("destination: read the request body: %w", err)
	}
	copied := req.Clone(req.Context())
	copied.Body = io.NopCloser(bytes.NewReader(body))
	copied.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	copied.ContentLength = int64(len(body))
	return w.next.RoundTrip(copied)
}

// CloseIdleConnections closes the next transport's idle connections.
func (w wholeBodies) CloseIdleConnections() {
	if c, ok := w.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
