package destination

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// roundTripFunc is a RoundTripper of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// closeOnRead is a request body as smithy-go gives it: once closed,
// reads end.
type closeOnRead struct {
	r      io.Reader
	closed bool
}

func (c *closeOnRead) Read(p []byte) (int, error) {
	if c.closed {
		return 0, io.EOF
	}
	return c.r.Read(p)
}

func (c *closeOnRead) Close() error { c.closed = true; return nil }

// TestWholeBodiesOutliveTheCallersClose: the transport still writes the
// whole body after the caller closed its own, as smithy-go does when
// the answer's headers arrive before the body is written.
func TestWholeBodiesOutliveTheCallersClose(t *testing.T) {
	const body = `{"Entries":[{"Source":"webhookd"}]}`
	var sent *http.Request
	rt := wholeBodies{next: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent = r // the transport would write its body on another goroutine, later
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
	})}
	orig := &closeOnRead{r: strings.NewReader(body)}
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/", orig)
	req.ContentLength = int64(len(body))
	if _, err := rt.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	_ = orig.Close()
	got, err := io.ReadAll(sent.Body)
	if err != nil || string(got) != body || sent.ContentLength != int64(len(body)) {
		t.Fatalf("the transport wrote %q (%d bytes declared), %v; want the whole body", got, sent.ContentLength, err)
	}
	if req.Body != orig {
		t.Error("the caller's request was changed")
	}
}
