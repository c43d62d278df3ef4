package deliver_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
)

// TestNamesResolvingToForbiddenAddressesAreBlocked delivers to host names
// whose DNS answers are loopback, private or link-local, with private
// targets not allowed: the check applies to the resolved address when
// dialing, every attempt is recorded as target_blocked, and the receiver
// on 127.0.0.1, which some of the names resolve to, never gets a request.
func TestNamesResolvingToForbiddenAddressesAreBlocked(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusOK))
	port := strconv.Itoa(rcv.Listener.Addr().(*net.TCPAddr).Port)
	names := map[string][]netip.Addr{
		"private.merchant.test":  {netip.MustParseAddr("10.0.0.1")},
		"metadata.merchant.test": {netip.MustParseAddr("169.254.169.254")},
		"ula.merchant.test":      {netip.MustParseAddr("fd00::1")},
		"mapped.merchant.test":   {netip.MustParseAddr("::ffff:127.0.0.1")},
		// Any address of the answer that is forbidden is refused, whatever
		// the order the dialer tries them in.
		"rebound.merchant.test": {netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("127.0.0.1")},
	}
	// localhost comes from /etc/hosts (127.0.0.1), the others from DNS.
	hosts := []string{"localhost"}
	for name := range names {
		hosts = append(hosts, name)
	}
	want := map[uuid.UUID]expectation{}
	for _, host := range hosts {
		sub, _ := e.Subscribe("m1", "http://"+net.JoinHostPort(host, port)+"/hook", "*")
		want[sub.ID] = expectation{host, "failed, target_blocked, no status"}
	}
	d, reg := e.Dispatcher(func(c *dispatcher.Config) { c.AllowPrivateTargets = false }, dispatchertest.DialThrough(t, fakeResolver(t, names)))
	e.Run(d)
	ev := e.Publish(d, "m1", "payout.paid")

	attempts := everyAttemptFails(t, e, ev, want)
	if n := len(rcv.Got()); n != 0 {
		t.Errorf("the receiver behind the blocked names got %d requests", n)
	}
	if got := dispatchertest.CounterWith(t, reg, "webhookd_delivery_attempts_total", "outcome", "blocked"); got != float64(attempts) {
		t.Errorf("blocked outcomes = %v, want %d", got, attempts)
	}
}

// expectation is what every attempt to one subscription should record
// (an outcome), and the name it goes by in failures.
type expectation struct{ name, outcome string }

// everyAttemptFails waits for ev's deliveries, one per subscription of
// want, to fail after every attempt of the schedule, each attempt with its
// subscription's outcome; it returns the number of attempts.
func everyAttemptFails(t *testing.T, e *dispatchertest.Env, ev store.Event, want map[uuid.UUID]expectation) int {
	t.Helper()
	ds := e.Deliveries(ev.ID)
	if len(ds) != len(want) {
		t.Fatalf("%d deliveries, want %d", len(ds), len(want))
	}
	attempts := 0
	for _, del := range ds {
		w := want[del.SubscriptionID]
		del = e.WaitSettled(del.ID, 10*time.Second)
		if del.Status != store.DeliveryFailed || len(del.Attempts) != dispatchertest.FastSchedule.Attempts() {
			t.Errorf("%s: status %s after %d attempts, want failed after %d", w.name, del.Status, len(del.Attempts),
				dispatchertest.FastSchedule.Attempts())
		}
		for _, a := range del.Attempts {
			if got := outcome(a); got != w.outcome {
				t.Errorf("%s: attempt %d %s, want %s", w.name, a.Number, got, w.outcome)
			}
		}
		attempts += len(del.Attempts)
	}
	return attempts
}

// fakeResolver is a resolver whose DNS server, on 127.0.0.1, answers A and
// AAAA questions from names and NXDOMAIN for any other name, so that a
// test can make a name resolve to an address no test may reach.
func fakeResolver(t *testing.T, names map[string][]netip.Addr) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if reply := dnsReply(buf[:n], names); reply != nil {
				_, _ = pc.WriteTo(reply, from)
			}
		}
	}()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
}

// dnsReply answers one DNS query (RFC 1035 section 4) about names, or nil
// for a message it cannot read.
func dnsReply(query []byte, names map[string][]netip.Addr) []byte {
	const headerLen = 12
	if len(query) < headerLen || binary.BigEndian.Uint16(query[4:]) != 1 {
		return nil
	}
	var labels []string
	i := headerLen
	for i < len(query) && query[i] != 0 {
		n := int(query[i])
		if i+1+n > len(query) {
			return nil
		}
		labels = append(labels, string(query[i+1:i+1+n]))
		i += 1 + n
	}
	end := i + 5 // root label, type, class
	if end > len(query) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(query[i+1:])
	addrs, known := names[strings.ToLower(strings.Join(labels, "."))]

	var answers [][]byte
	for _, a := range addrs {
		switch {
		case qtype == 1 && a.Is4():
			answers = append(answers, a.AsSlice())
		case qtype == 28 && a.Is6():
			answers = append(answers, a.AsSlice())
		}
	}
	flags := uint16(0x8180) // response, recursion desired and available
	if !known {
		flags |= 3 // NXDOMAIN
	}
	reply := binary.BigEndian.AppendUint16(nil, binary.BigEndian.Uint16(query))
	reply = binary.BigEndian.AppendUint16(reply, flags)
	reply = binary.BigEndian.AppendUint16(reply, 1)
	reply = binary.BigEndian.AppendUint16(reply, uint16(len(answers)))
	reply = append(reply, 0, 0, 0, 0) // no authority, no additional records
	reply = append(reply, query[headerLen:end]...)
	for _, rdata := range answers {
		reply = append(reply, 0xc0, headerLen) // the question's name
		reply = binary.BigEndian.AppendUint16(reply, qtype)
		reply = binary.BigEndian.AppendUint16(reply, 1) // IN
		reply = binary.BigEndian.AppendUint32(reply, 60)
		reply = binary.BigEndian.AppendUint16(reply, uint16(len(rdata)))
		reply = append(reply, rdata...)
	}
	return reply
}

// TestRedirectsAreNotFollowed answers every attempt with a redirect to a
// receiver the engine may reach: each attempt fails with error redirect
// and the redirect's status, and the target never gets a request.
func TestRedirectsAreNotFollowed(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	target := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusOK))
	codes := []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect,
		http.StatusPermanentRedirect}
	redirector := dispatchertest.NewReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		http.Redirect(w, r, target.URL+"/after-"+strconv.Itoa(code), code)
	})
	want := map[uuid.UUID]expectation{}
	for _, code := range codes {
		sub, _ := e.Subscribe("m1", redirector.URL+"/"+strconv.Itoa(code), "*")
		want[sub.ID] = expectation{strconv.Itoa(code), fmt.Sprintf("failed, redirect, status %d", code)}
	}
	d, _ := e.Dispatcher()
	e.Run(d)
	everyAttemptFails(t, e, e.Publish(d, "m1", "payout.paid"), want)
	if n := len(redirector.Got()); n != len(codes)*dispatchertest.FastSchedule.Attempts() {
		t.Errorf("the redirecting receiver got %d requests, want %d", n, len(codes)*dispatchertest.FastSchedule.Attempts())
	}
	if got := target.Got(); len(got) != 0 {
		t.Errorf("the redirect target got %d requests (first %s)", len(got), got[0].Path)
	}
}

// endlessCap bounds the endless answer, so that the test stops by itself
// even when the engine reads everything.
const endlessCap = 64 << 20

// TestEndlessAnswerIsCut answers with a body that never ends: the engine
// keeps the first 1 KiB, stops reading at once, the attempt succeeds (it
// did not run into the delivery timeout), and the receiver finds its
// connection closed after writing a small fraction of what it would.
func TestEndlessAnswerIsCut(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 1024) // 16 KiB
	written := make(chan int, 1)
	rcv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		n := 0
		for n < endlessCap {
			k, err := w.Write(chunk)
			n += k
			if err != nil {
				break
			}
		}
		written <- n
	}))
	// What the receiver manages to write then measures what the engine
	// took, not what its own kernel queued: its send buffer is small.
	rcv.Listener = smallSendBuffer{rcv.Listener}
	rcv.Start()
	t.Cleanup(rcv.Close)
	e.Subscribe("m1", rcv.URL, "*")
	// A timeout far longer than reading 1 KiB takes: success shows that the
	// engine did not wait for the end of the body.
	d, _ := e.Dispatcher(func(c *dispatcher.Config) { c.DeliveryTimeout = 20 * time.Second })
	e.Run(d)
	ev := e.Publish(d, "m1", "payout.paid")
	del := e.WaitSettled(e.Deliveries(ev.ID)[0].ID, 30*time.Second)

	if del.Status != store.DeliverySucceeded || len(del.Attempts) != 1 {
		t.Fatalf("status %s after %d attempts, want succeeded after 1", del.Status, len(del.Attempts))
	}
	if a := del.Attempts[0]; a.Error != nil || a.ResponseBody != string(chunk[:1024]) {
		t.Errorf("attempt error %v, response_body of %d bytes, want no error and the first 1024 bytes", a.Error,
			len(a.ResponseBody))
	}
	var n int
	select {
	case n = <-written:
	case <-time.After(30 * time.Second):
		t.Fatal("the receiver is still writing: the engine did not close the connection")
	}
	t.Logf("the receiver wrote %d bytes before its connection was closed", n)
	if n >= 1<<20 {
		t.Errorf("the receiver wrote %d bytes before the engine stopped reading, want well under 1 MiB", n)
	}
}

// TestSuccessAfterTheTimeoutIsATimeout answers 2xx only once the delivery
// timeout has passed: the attempt fails with error timeout, and the next
// one, answered at once, succeeds.
func TestSuccessAfterTheTimeoutIsATimeout(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		late func(w http.ResponseWriter, wait <-chan time.Time)
		want string // attempt 1
	}{
		{
			name: "status after the timeout",
			late: func(w http.ResponseWriter, wait <-chan time.Time) {
				<-wait
				w.WriteHeader(http.StatusOK)
			},
			want: "failed, timeout, no status",
		},
		{
			name: "status in time, body after the timeout",
			late: func(w http.ResponseWriter, wait <-chan time.Time) {
				w.WriteHeader(http.StatusOK)
				_, _ = w.Write([]byte(`{"received":`))
				w.(http.Flusher).Flush()
				<-wait
				_, _ = w.Write([]byte(`true}`))
			},
			want: "failed, timeout, status 200",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := dispatchertest.New(t)
			const timeout = time.Second
			rcv := dispatchertest.NewReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
				if n == 1 {
					// Deaf to the engine leaving, the answer comes late, but
					// before the attempt task's own deadline (the timeout
					// plus a second from the task's start), so that only
					// the delivery timeout tells it from a success.
					tc.late(w, time.After(timeout+300*time.Millisecond))
					return
				}
				w.WriteHeader(http.StatusOK)
			})
			e.Subscribe("m1", rcv.URL, "*")
			d, _ := e.Dispatcher(func(c *dispatcher.Config) { c.DeliveryTimeout = timeout })
			e.Run(d)
			ev := e.Publish(d, "m1", "payout.paid")
			del := e.WaitSettled(e.Deliveries(ev.ID)[0].ID, 10*time.Second)
			if del.Status != store.DeliverySucceeded || len(del.Attempts) != 2 {
				t.Fatalf("status %s after %d attempts, want succeeded after 2", del.Status, len(del.Attempts))
			}
			if got := outcome(del.Attempts[0]); got != tc.want {
				t.Errorf("attempt 1 %s, want %s", got, tc.want)
			}
		})
	}
}

// smallSendBuffer is a listener whose connections have a 16 KiB send
// buffer.
type smallSendBuffer struct{ net.Listener }

func (l smallSendBuffer) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		if err := tc.SetWriteBuffer(16 << 10); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, err
}

// outcome sums up an attempt record as "status, error, HTTP status".
func outcome(a store.Attempt) string {
	code, status := "no error", "no status"
	if a.Error != nil {
		code = *a.Error
	}
	if a.HTTPStatus != nil {
		status = fmt.Sprintf("status %d", *a.HTTPStatus)
	}
	return string(a.Status) + ", " + code + ", " + status
}
