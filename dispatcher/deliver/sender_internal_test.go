package deliver

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

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
