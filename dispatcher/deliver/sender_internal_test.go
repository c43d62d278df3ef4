package deliver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/webhookd/webhookd/dispatcher/internal/metrics"
	"github.com/webhookd/webhookd/internal/clock"
)

// TestParseRetryAfter reads both forms of the header.
func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		header string
		want   time.Duration
	}{
		{"120", 2 * time.Minute},
		{now.Add(time.Minute).Format(http.TimeFormat), time.Minute},
		{"soon", 0},
		{"", 0},
		{"-5", 0},
	}
	for _, tc := range cases {
		if got := parseRetryAfter(tc.header, now); got != tc.want {
			t.Errorf("Retry-After %q = %v, want %v", tc.header, got, tc.want)
		}
	}
}

// TestSendClassifiesNetworkErrors dials real failures and checks the
// attempt error codes.
func TestSendClassifiesNetworkErrors(t *testing.T) {
	// A port that was just free: nothing listens there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	cfg := SenderConfig{Timeout: 2 * time.Second, AllowPrivate: true, MaxConns: 4, MaxConnsPerHost: 1, Version: "test"}
	cases := []struct {
		name, url, want string
		allowHTTP       bool
	}{
		{"refused", closed, errConnectionRefused, true},
		{"unresolvable", "http://no-such-host.invalid/", errDNS, true},
		{"http not allowed", closed, errTargetBlocked, false},
		{"not a url", "ftp://example.com/", errTargetBlocked, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			c.AllowHTTP = tc.allowHTTP
			snd, err := NewSender(c, clock.System{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			res := sendPlain(t, snd, tc.url)
			if res.ErrCode == nil || *res.ErrCode != tc.want {
				t.Fatalf("send(%s) error %v, want %s", tc.url, res.ErrCode, tc.want)
			}
		})
	}
}

// sendPlain sends {} to target as event "evt", unsigned, with no headers
// and no credentials: nothing to open, so Send has no error to give.
func sendPlain(t *testing.T, snd *Sender, target string) Result {
	t.Helper()
	res, err := snd.Send(context.Background(), Request{Target: target, EventID: "evt", Body: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestCountedConnEndsReadsBeforeItsFIN: the transport's read loop, if it
// resumes while Close is under way, must not read what a receiver sends
// once it sees the engine hang up: that would be taken as the answer to a
// request whose deadline had passed. The receiver here answers the FIN;
// the read loop is played by a read made inside Close, after the FIN went
// out and the answer came back, the latest it can run.
func TestCountedConnEndsReadsBeforeItsFIN(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	answered := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			answered <- err
			return
		}
		defer c.Close()
		// Wait for the engine's FIN, as a server waits before it ends a
		// request's context, then answer.
		_, _ = io.Copy(io.Discard, c)
		_, err = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
		answered <- err
	}()
	raw, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	conn := &lateReader{TCPConn: raw.(*net.TCPConn), answered: answered}
	released := 0
	c := &countedConn{Conn: conn, release: func() { released++ }}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if conn.serverErr != nil {
		t.Fatalf("the receiver could not answer: %v", conn.serverErr)
	}
	if conn.n > 0 || !errors.Is(conn.err, os.ErrDeadlineExceeded) {
		t.Errorf("a read after the FIN got %q (error %v), want nothing and the deadline's error", conn.got[:conn.n], conn.err)
	}
	if released != 1 {
		t.Errorf("slot released %d times, want once", released)
	}
}

// lateReader is a TCP connection whose CloseWrite, once the FIN is out and
// the peer has answered it, reads as a read loop resuming then would.
type lateReader struct {
	*net.TCPConn
	answered  chan error
	serverErr error
	got       [64]byte
	n         int
	err       error
}

func (r *lateReader) CloseWrite() error {
	err := r.TCPConn.CloseWrite()
	r.serverErr = <-r.answered
	// The answer is in the socket's queue once the peer's write returned
	// (loopback); a read that reaches the socket returns it at once.
	r.n, r.err = r.TCPConn.Read(r.got[:])
	return err
}

// TestExchangeTakesNoAnswerPastItsDeadline: an answer the transport hands
// over once the attempt's deadline has passed (Go's transport returns one
// that raced its close of the connection) is a timeout, whatever its
// status; one within the deadline is the answer. Traced, the exchange's
// span says the same as its record.
func TestExchangeTakesNoAnswerPastItsDeadline(t *testing.T) {
	cases := []struct {
		name     string
		answer   roundTripFunc
		wantCode string // "" for a success
	}{
		{"answered in time", func(*http.Request) (*http.Response, error) { return okResponse(), nil }, ""},
		{"answered as the deadline closed the connection", func(r *http.Request) (*http.Response, error) {
			<-r.Context().Done()
			return okResponse(), nil
		}, errTimeout},
	}
	for _, tc := range cases {
		for _, traced := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/traced=%v", tc.name, traced), func(t *testing.T) {
				snd, err := NewSender(SenderConfig{Timeout: 50 * time.Millisecond, AllowHTTP: true, AllowPrivate: true, MaxConns: 4,
					MaxConnsPerHost: 1, Version: "test"}, clock.System{}, nil)
				if err != nil {
					t.Fatal(err)
				}
				snd.http = &http.Client{Transport: tc.answer}
				spans := tracetest.NewInMemoryExporter()
				if traced {
					snd.tracer = sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)).Tracer("test")
				}
				res := sendPlain(t, snd, "http://127.0.0.1:1/")
				code := ""
				if res.ErrCode != nil {
					code = *res.ErrCode
				}
				if code != tc.wantCode || (tc.wantCode == "") != (res.outcome == metrics.OutcomeSuccess) {
					t.Errorf("error code %q, outcome %s; want code %q", code, res.outcome, tc.wantCode)
				}
				if !traced {
					return
				}
				got := spans.GetSpans()
				if len(got) != 1 {
					t.Fatalf("%d spans ended, want the exchange's one", len(got))
				}
				errorType := ""
				for _, a := range got[0].Attributes {
					if a.Key == "error.type" {
						errorType = a.Value.AsString()
					}
				}
				if errorType != tc.wantCode {
					t.Errorf("span's error.type %q, want %q (as the record)", errorType, tc.wantCode)
				}
			})
		}
	}
}

// roundTripFunc is an http.RoundTripper of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// okResponse is a 200 with an empty body.
func okResponse() *http.Response {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(""))}
}
