package nats_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/desttest"
	"github.com/webhookd/webhookd/internal/destination/nats"
)

// config is a nats destination object.
func config(servers []string, subject string, extra string) string {
	list, _ := json.Marshal(servers)
	return fmt.Sprintf(`{"type": "nats", "servers": %s, "subject": %q%s}`, list, subject, extra)
}

// authServer is an in-process server that checks a user and password.
func authServer(t testing.TB) *testServer {
	return startServer(t, func(o *server.Options) { o.Username, o.Password = "webhookd", "right-password" })
}

// TestConformance runs desttest against the machine's server (no auth:
// the wrong-credentials row goes to an in-process server that checks
// them; "down" is a port where nothing listens).
func TestConformance(t *testing.T) {
	s := newStream(t, machineServer)
	auth := authServer(t)
	desttest.Run(t, desttest.Case{
		Kind:             nats.New(),
		Config:           config([]string{machineServer}, s.subject, ""),
		Receive:          s.receive,
		WrongCredentials: config([]string{auth.addr()}, "webhookd.creds", `, "username": "webhookd", "password": "wrong-password"`),
		Unreachable:      config([]string{closedPort(t)}, s.subject, ""),
		Hostile:          hostile(),
		// Oversized: nil, NATS frames are bounded by the kind itself
		// (maxLine, maxFrame): TestFramesBounded checks them.
	})
}

// TestConformanceWithAuthDownAndBack runs desttest against an
// in-process server that checks credentials, which the down row stops
// and starts again (same port, same store).
func TestConformanceWithAuthDownAndBack(t *testing.T) {
	auth := authServer(t)
	s := newStream(t, auth.addr(), natsgo.UserInfo("webhookd", "right-password"))
	desttest.Run(t, desttest.Case{
		Kind:             nats.New(),
		Config:           config([]string{auth.addr()}, s.subject, `, "username": "webhookd", "password": "right-password"`),
		Receive:          s.receive,
		WrongCredentials: config([]string{auth.addr()}, s.subject, `, "username": "webhookd", "password": "wrong-password"`),
		Down:             auth.down,
		Hostile:          hostile(),
	})
}

// TestConnectionLostThenBack: a connection that was up and broke fails
// the send on it, and a later send dials again (the publisher neither
// reconnects nor buffers by itself).
func TestConnectionLostThenBack(t *testing.T) {
	srv := startServer(t, nil)
	s := newStream(t, srv.addr())
	p := open(t, config([]string{srv.addr()}, s.subject, ""))
	send(t, p, message("evt_before_restart"))
	up := srv.down(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err := p.Send(ctx, message("evt_while_down"))
	cancel()
	if code, _ := destination.Classify(err); code != destination.CodeUnreachable && code != destination.CodeNotConfirmed {
		t.Fatalf("a send while the server is down: %v, want broker_unreachable or not_confirmed", err)
	}
	up()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := p.Send(ctx, message("evt_after_restart"))
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server is back but a send still fails: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // kept: the pace of the retries
	}
	for _, want := range []string{"msg_evt_before_restart", "msg_evt_after_restart"} {
		if got := s.receive(receiveCtx(t), t); got.Headers["webhook-id"] != want {
			t.Fatalf("received %s, want %s", got.Headers["webhook-id"], want)
		}
	}
}

// TestTokenAuth: a server that checks a token takes the right one and
// refuses another as auth_failed.
func TestTokenAuth(t *testing.T) {
	srv := startServer(t, func(o *server.Options) { o.Authorization = "right-token" })
	s := newStream(t, srv.addr(), natsgo.Token("right-token"))
	p := open(t, config([]string{srv.addr()}, s.subject, `, "token": "right-token"`))
	send(t, p, message("evt_token"))
	if got := s.receive(receiveCtx(t), t); got.Headers["webhook-id"] != "msg_evt_token" {
		t.Errorf("received %v", got.Headers)
	}
	p = open(t, config([]string{srv.addr()}, s.subject, `, "token": "wrong-token"`))
	sendFails(t, p, message("evt_token_wrong"), destination.CodeAuthFailed, "refused the credentials")
}

// TestRetryDeduplicated: a retry of a message whose acknowledgement was
// lost carries the same delivery id, and the stream keeps one.
func TestRetryDeduplicated(t *testing.T) {
	s := newStream(t, machineServer)
	p := open(t, config([]string{machineServer}, s.subject, ""))
	m := message("evt_dedup")
	first := send(t, p, m)
	again := send(t, p, m)
	if strings.Contains(first.Answer, "duplicate") || !strings.Contains(again.Answer, "duplicate") {
		t.Errorf("answers %q then %q, want the second to say it is a duplicate", first.Answer, again.Answer)
	}
	if n := s.count(t); n != 1 {
		t.Errorf("the stream holds %d messages, want 1", n)
	}
	got := s.receive(receiveCtx(t), t)
	if got.Headers["nats-msg-id"] != m.DeliveryID {
		t.Errorf("Nats-Msg-Id arrived as %q, want the delivery id %q", got.Headers["nats-msg-id"], m.DeliveryID)
	}
}

// TestNoStream: a subject no stream takes is refused in words that say
// so.
func TestNoStream(t *testing.T) {
	p := open(t, config([]string{machineServer}, "webhookd.nostream."+randomID(t), ""))
	sendFails(t, p, message("evt_nostream"), destination.CodeRefused, "no JetStream stream takes the subject")
}

// TestOverMaxPayload: a message over the server's max_payload is refused
// before it is sent, the connection kept.
func TestOverMaxPayload(t *testing.T) {
	srv := startServer(t, func(o *server.Options) { o.MaxPayload = 4096 })
	s := newStream(t, srv.addr())
	p := open(t, config([]string{srv.addr()}, s.subject, ""))
	m := message("evt_large")
	m.Body = []byte(`{"data":"` + strings.Repeat("x", 5000) + `"}`)
	sendFails(t, p, m, destination.CodeRefused, "larger than the NATS server's max_payload (4096 bytes)")
	send(t, p, message("evt_small"))
	if n := s.count(t); n != 1 {
		t.Errorf("the stream holds %d messages, want 1", n)
	}
}

// TestOverStreamMaxMsgSize: a stream that refuses a message (over its
// max_msg_size) is broker_refused in words naming why.
func TestOverStreamMaxMsgSize(t *testing.T) {
	s := newStream(t, machineServer)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.js.UpdateStream(ctx, jetstream.StreamConfig{Name: s.name, Subjects: []string{s.subject},
		Storage: jetstream.FileStorage, Duplicates: time.Minute, MaxMsgSize: 64}); err != nil {
		t.Fatal(err)
	}
	p := open(t, config([]string{machineServer}, s.subject, ""))
	sendFails(t, p, message("evt_over_stream_max"), destination.CodeRefused, "larger than its maximum message size")
}

// TestPublishDenied: a user the server does not allow to publish to the
// subject fails at once as auth_failed, not at the deadline.
func TestPublishDenied(t *testing.T) {
	srv := startServer(t, func(o *server.Options) {
		o.Users = []*server.User{
			{Username: "admin", Password: "admin-password"},
			{Username: "limited", Password: "limited-password", Permissions: &server.Permissions{
				Publish: &server.SubjectPermission{Allow: []string{"elsewhere.>"}}}},
		}
	})
	s := newStream(t, srv.addr(), natsgo.UserInfo("admin", "admin-password"))
	p := open(t, config([]string{srv.addr()}, s.subject, `, "username": "limited", "password": "limited-password"`))
	start := time.Now()
	sendFails(t, p, message("evt_denied"), destination.CodeAuthFailed, "does not allow the credentials to publish")
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("the refusal took %s: it waited for the deadline", took)
	}
}

// TestHeadersReservedForTheServer: a subscription's header named Nats-…
// (which JetStream would read: Nats-Rollup purges a stream) does not
// reach the server; the delivery id stays the Nats-Msg-Id.
func TestHeadersReservedForTheServer(t *testing.T) {
	s := newStream(t, machineServer)
	p := open(t, config([]string{machineServer}, s.subject, ""))
	send(t, p, message("evt_before"))
	m := message("evt_rollup")
	m.Headers["nats-rollup"] = "all"
	m.Headers["Nats-Msg-Id"] = "dlv_evt_before"
	if r := send(t, p, m); strings.Contains(r.Answer, "duplicate") {
		t.Fatalf("the message was taken as a duplicate of another: %s", r.Answer)
	}
	if n := s.count(t); n != 2 {
		t.Errorf("the stream holds %d messages, want 2 (no rollup)", n)
	}
	s.receive(receiveCtx(t), t)
	got := s.receive(receiveCtx(t), t)
	if _, ok := got.Headers["nats-rollup"]; ok || got.Headers["content-type"] != "application/json" {
		t.Errorf("headers arrived as %v", got.Headers)
	}
}

// TestConcurrentSends: one publisher, one connection, many senders.
func TestConcurrentSends(t *testing.T) {
	s := newStream(t, machineServer)
	p := open(t, config([]string{machineServer}, s.subject, ""))
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := p.Send(ctx, message(fmt.Sprintf("evt_concurrent_%d", i))); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := s.count(t); got != n {
		t.Errorf("the stream holds %d messages, want %d", got, n)
	}
}

// TestDialThroughEnv: every connection goes through env.Dial, and a
// refusal there (the deliveries' address check) is the send's failure
// in its words.
func TestDialThroughEnv(t *testing.T) {
	s := newStream(t, machineServer)
	var dialed []string
	var mu sync.Mutex
	env := testEnv()
	env.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		mu.Lock()
		dialed = append(dialed, address)
		mu.Unlock()
		if strings.HasPrefix(address, "blocked.example.com") {
			return nil, fmt.Errorf("dial %s: %w", address, errBlocked)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, address)
	}
	p := openEnv(t, config([]string{machineServer}, s.subject, ""), env)
	send(t, p, message("evt_env"))
	blocked := openEnv(t, config([]string{"blocked.example.com:4222"}, s.subject, ""), env)
	sendFails(t, blocked, message("evt_blocked"), destination.CodeUnreachable, "")
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(dialed, " ") != machineServer+" blocked.example.com:4222" {
		t.Errorf("dialed %v", dialed)
	}
}

// errBlocked stands for the address check's refusal.
var errBlocked = fmt.Errorf("the address is not allowed")

// TestClosedBeforeConnecting: Close on a publisher that never connected,
// then a Send, fails without dialing.
func TestClosedBeforeConnecting(t *testing.T) {
	env := testEnv()
	env.Dial = func(context.Context, string, string) (net.Conn, error) {
		t.Error("a closed publisher dialed")
		return nil, errBlocked
	}
	p := openEnv(t, config([]string{machineServer}, "webhookd.closed", ""), env)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	sendFails(t, p, message("evt_closed"), destination.CodeUnreachable, "closed")
}

// --- helpers

func testEnv() destination.Env {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return destination.Env{Dial: d.DialContext, Timeout: 5 * time.Second, Clock: clock.Or(nil), Version: "test"}
}

func open(t testing.TB, raw string) destination.Publisher { return openEnv(t, raw, testEnv()) }

func openEnv(t testing.TB, raw string, env destination.Env) destination.Publisher {
	t.Helper()
	cfg, err := nats.New().Parse("destination", json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	p, err := nats.New().Open(cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// message is a delivery's message, its headers as the engine gives them.
func message(eventID string) destination.Message {
	return destination.Message{DeliveryID: "dlv_" + eventID, EventID: eventID, EventType: "payout.paid",
		Body: []byte(`{"id":"` + eventID + `"}`), ContentType: "application/json", Size: 1, SignedAt: time.Now(),
		Headers: map[string]string{"webhook-id": "msg_" + eventID, "webhook-timestamp": "1700000000",
			"webhook-signature": "v1,c2lnbmF0dXJl", "content-type": "application/json", "x-merchant-header": "kept"}}
}

func send(t testing.TB, p destination.Publisher, m destination.Message) destination.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := p.Send(ctx, m)
	if err != nil {
		code, said := destination.Classify(err)
		t.Fatalf("send: %s: %s (%v)", code, said, err)
	}
	return r
}

// sendFails checks that a send fails with code, in words holding want
// and naming nothing of this server.
func sendFails(t testing.TB, p destination.Publisher, m destination.Message, code, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := p.Send(ctx, m)
	if err == nil {
		t.Fatalf("send succeeded, want %s", code)
	}
	gotCode, said := destination.Classify(err)
	if gotCode != code || !strings.Contains(said, want) {
		t.Errorf("send failed as %s (%s; %v), want %s saying %q", gotCode, said, err, code, want)
	}
	desttest.CheckMerchantWords(t, said)
}

func receiveCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
