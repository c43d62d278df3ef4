package dispatcher_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/store"
)

// smtpSink is a real SMTP server on 127.0.0.1 that accepts every message
// and keeps it. It speaks just enough of RFC 5321 for a client: greeting,
// EHLO, MAIL, RCPT, DATA, QUIT; anything else (NOOP, RSET) is 250.
type smtpSink struct {
	ln   net.Listener
	mu   sync.Mutex
	msgs []sunkMessage
}

// sunkMessage is one message the sink accepted.
type sunkMessage struct {
	From string
	To   []string
	Data string
}

func newSMTPSink(t *testing.T) *smtpSink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &smtpSink{ln: ln}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { s.serve(c) })
		}
	})
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return s
}

// URL is the notifier's form of the sink's address.
func (s *smtpSink) URL() string { return "smtp://" + s.ln.Addr().String() }

func (s *smtpSink) serve(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	reply := func(line string) { _, _ = c.Write([]byte(line + "\r\n")) }
	reply("220 sink ESMTP")
	var cur sunkMessage
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\r\n")
		verb := strings.ToUpper(strings.SplitN(line, " ", 2)[0])
		switch verb {
		case "EHLO", "HELO":
			reply("250 sink")
		case "MAIL":
			cur = sunkMessage{From: line}
			reply("250 ok")
		case "RCPT":
			cur.To = append(cur.To, line)
			reply("250 ok")
		case "DATA":
			reply("354 go ahead")
			var data strings.Builder
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if strings.TrimRight(l, "\r\n") == "." {
					break
				}
				data.WriteString(l)
			}
			cur.Data = data.String()
			s.mu.Lock()
			s.msgs = append(s.msgs, cur)
			s.mu.Unlock()
			reply("250 queued")
		case "QUIT":
			reply("221 bye")
			return
		default:
			reply("250 ok")
		}
	}
}

func (s *smtpSink) messages() []sunkMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sunkMessage(nil), s.msgs...)
}

// countingNotifier counts the calls that returned, so that a test knows
// the notifier has finished with a delivery.
type countingNotifier struct {
	inner dispatcher.Notifier
	calls atomic.Int32
}

func (c *countingNotifier) DeliveryFailed(ctx context.Context, d store.Delivery) {
	c.inner.DeliveryFailed(ctx, d)
	c.calls.Add(1)
}

// TestFailureEmailOncePerSubscriptionPerHour: two real deliveries to one
// subscription fail for good within the hour and the merchant gets exactly
// one e-mail; a failing test delivery sends none.
func TestFailureEmailOncePerSubscriptionPerHour(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	sink := newSMTPSink(t)
	rcv := newReceiver(t, answer(http.StatusInternalServerError))
	failing, _ := e.subscribe("m1", rcv.URL+"/a", "*")
	testOnly, _ := e.subscribe("m1", rcv.URL+"/b", "payout.created")
	email := "ops@merchant.example"
	if _, err := e.store.UpdateMerchant(ctx, "m1", testVersion, store.MerchantSettings{NotificationEmail: &email}); err != nil {
		t.Fatal(err)
	}
	mailer, err := dispatcher.NewMailNotifier(sink.URL(), "webhookd@example.com", e.store, e.cfg.Logger)
	if err != nil {
		t.Fatal(err)
	}
	counter := &countingNotifier{inner: mailer}
	d, _ := e.dispatcher(func(c *dispatcher.Config) { c.Notifier = counter })
	e.run(d)

	// A test delivery to the other subscription fails for good first.
	td, err := d.SendTestEvent(ctx, "m1", testOnly.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.waitSettled(td.ID, 5*time.Second); got.Status != store.DeliveryFailed {
		t.Fatalf("test delivery %s, want failed", got.Status)
	}

	// Then two real events to the failing one.
	for range 2 {
		ev := e.publish(d, "m1", "payout.paid")
		for _, del := range e.deliveries(ev.ID) {
			if del.SubscriptionID != failing.ID {
				t.Fatalf("event delivered to %s", del.SubscriptionID)
			}
			if got := e.waitSettled(del.ID, 5*time.Second); got.Status != store.DeliveryFailed {
				t.Fatalf("delivery %s, want failed", got.Status)
			}
		}
	}
	e.waitFor("the notifier to hear of both failures", 5*time.Second, func() bool { return counter.calls.Load() >= 2 })
	if n := counter.calls.Load(); n != 2 {
		t.Fatalf("notifier called %d times, want 2 (never for the test delivery)", n)
	}
	msgs := sink.messages()
	if len(msgs) != 1 {
		t.Fatalf("%d e-mails, want exactly 1", len(msgs))
	}
	m := msgs[0]
	if len(m.To) != 1 || !strings.Contains(m.To[0], email) {
		t.Errorf("recipients %v, want %s", m.To, email)
	}
	for _, want := range []string{"payout.paid", failing.URL, failing.ID.String(), "redeliver"} {
		if !strings.Contains(m.Data, want) {
			t.Errorf("e-mail lacks %q:\n%s", want, m.Data)
		}
	}
	if strings.Contains(m.Data, "ping.test") {
		t.Errorf("the e-mail is about the test delivery:\n%s", m.Data)
	}

	// Called directly with a test delivery, the notifier sends nothing and
	// claims nothing.
	mailer.DeliveryFailed(ctx, store.Delivery{ID: td.ID, SubscriptionID: testOnly.ID, MerchantID: "m1", Test: true})
	if n := len(sink.messages()); n != 1 {
		t.Fatalf("%d e-mails after a test delivery, want still 1", n)
	}
	if _, err := e.store.ClaimFailureNotification(ctx, testOnly.ID, dispatcher.NotifyInterval); err != nil {
		t.Fatalf("the test delivery took the e-mail claim: %v", err)
	}
}

func TestNewMailNotifierURLs(t *testing.T) {
	tests := []struct {
		url     string
		wantErr bool
	}{
		{"", false},
		{"smtp://mail.example.com:2525", false},
		{"smtp://user:secret@mail.example.com", false},
		{"smtps://user:secret@mail.example.com:465", false},
		{"http://mail.example.com", true},
		{"smtp://mail.example.com:port", true},
		{"smtp://", true},
	}
	for _, tt := range tests {
		_, err := dispatcher.NewMailNotifier(tt.url, "webhookd@example.com", nil, nil)
		if (err != nil) != tt.wantErr {
			t.Errorf("NewMailNotifier(%q) error %v, want error %v", tt.url, err, tt.wantErr)
		}
	}
}
