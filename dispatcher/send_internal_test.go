package dispatcher

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestPushBack pins how a receiver's Retry-After moves the next attempt:
// later by that much, never earlier than scheduled, never beyond twice the
// scheduled delay.
func TestPushBack(t *testing.T) {
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	next := now.Add(10 * time.Second)
	cases := []struct {
		retryAfter time.Duration
		want       time.Duration
	}{
		{0, 10 * time.Second},
		{5 * time.Second, 10 * time.Second},
		{15 * time.Second, 15 * time.Second},
		{time.Hour, 20 * time.Second},
	}
	for _, tc := range cases {
		if got := pushBack(now, next, tc.retryAfter).Sub(now); got != tc.want {
			t.Errorf("pushBack(Retry-After %v) = +%v, want +%v", tc.retryAfter, got, tc.want)
		}
	}
	if got := parseRetryAfter("120", now); got != 2*time.Minute {
		t.Errorf("Retry-After 120 = %v", got)
	}
	if got := parseRetryAfter(now.Add(time.Minute).Format(http.TimeFormat), now); got != time.Minute {
		t.Errorf("Retry-After as a date = %v", got)
	}
	if got := parseRetryAfter("soon", now); got != 0 {
		t.Errorf("Retry-After soon = %v", got)
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
	cfg := Config{DeliveryTimeout: 2 * time.Second, AllowPrivateTargets: true, Concurrency: 4, SubscriptionConcurrency: 1, Now: time.Now}
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
			c.AllowHTTPTargets = tc.allowHTTP
			d := &Dispatcher{cfg: c, http: newHTTPClient(c)}
			res := d.send(context.Background(), tc.url, "evt", []byte(`{}`), nil)
			if res.errCode == nil || *res.errCode != tc.want {
				t.Fatalf("send(%s) error %v, want %s", tc.url, res.errCode, tc.want)
			}
		})
	}
}
