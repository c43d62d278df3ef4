package receiver_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/receiver"
	"github.com/webhookd/webhookd/receiver/redisdedup"
	"github.com/webhookd/webhookd/signer"
)

// endpoint is a Receiver behind a real httptest server, with a handler
// that records the events it gets and answers what handle says.
type endpoint struct {
	*httptest.Server
	key    signer.Key
	now    time.Time
	mu     sync.Mutex
	events []*receiver.Event
	handle func(*receiver.Event) error
}

func newEndpoint(t *testing.T, configure ...func(*receiver.Config)) *endpoint {
	t.Helper()
	secret, err := signer.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	key, err := signer.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	e := &endpoint{key: key, now: time.Unix(1795000000, 0), handle: func(*receiver.Event) error { return nil }}
	v, err := receiver.NewVerifier(receiver.VerifierConfig{Secrets: []string{secret}, Now: at(e.now)})
	if err != nil {
		t.Fatal(err)
	}
	dedup, err := receiver.NewMemoryDeduplicator(receiver.MemoryDeduplicatorConfig{Now: at(e.now)})
	if err != nil {
		t.Fatal(err)
	}
	cfg := receiver.Config{Verifier: v, Dedup: dedup, Logger: slog.New(slog.DiscardHandler),
		Handler: receiver.HandlerFunc(func(_ context.Context, ev *receiver.Event) error {
			e.mu.Lock()
			e.events = append(e.events, ev)
			handle := e.handle
			e.mu.Unlock()
			return handle(ev)
		})}
	for _, c := range configure {
		c(&cfg)
	}
	rc, err := receiver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.Server = httptest.NewUnstartedServer(rc)
	// The panic test's panic is expected; keep it out of the output.
	e.Config.ErrorLog = log.New(io.Discard, "", 0)
	e.Start()
	t.Cleanup(e.Close)
	return e
}

func (e *endpoint) got() []*receiver.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*receiver.Event(nil), e.events...)
}

func (e *endpoint) setHandle(f func(*receiver.Event) error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.handle = f
}

// envelope is a body as webhookd writes it.
func envelope(id string) []byte {
	return []byte(`{"id":"` + id + `","type":"payout.paid","api_version":"2026-05-01","payload":{"id":"po_1","type":"payout","status":"sent"},"date":"2026-11-23T09:14:05.123Z"}`)
}

// post sends body signed for id at ts (with the endpoint's key unless
// edit changes the headers) and returns the status and answer.
func (e *endpoint) post(t *testing.T, id string, ts time.Time, body []byte, edit ...func(http.Header)) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.URL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	signer.SetHeaders(req.Header, id, ts, body, e.key)
	for _, f := range edit {
		f(req.Header)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// TestReceiverAnswers covers each way a single delivery can go.
func TestReceiverAnswers(t *testing.T) {
	t.Parallel()
	now := time.Unix(1795000000, 0)
	tests := []struct {
		name   string
		id     string
		ts     time.Time
		body   []byte
		edit   func(http.Header)
		status int
		answer string
		// handled says whether the handler must have run.
		handled bool
	}{
		{"valid", "e1", now, envelope("e1"), nil, 200, "ok", true},
		{"attempt a minute ago", "e1", now.Add(-time.Minute), envelope("e1"), nil, 200, "ok", true},
		{"no signature", "e1", now, envelope("e1"), func(h http.Header) { h.Del("webhook-signature") }, 401, "missing header webhook-signature", false},
		{"no id", "e1", now, envelope("e1"), func(h http.Header) { h.Del("webhook-id") }, 401, "missing header webhook-id", false},
		{"forged signature", "e1", now, envelope("e1"), func(h http.Header) {
			h.Set("webhook-signature", "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=")
		}, 401, "no matching signature", false},
		{"other id in the header", "e1", now, envelope("e1"), func(h http.Header) { h.Set("webhook-id", "e2") }, 401, "no matching signature", false},
		{"replayed an hour later", "e1", now.Add(-time.Hour), envelope("e1"), nil, 401, "webhook-timestamp too old", false},
		{"from the future", "e1", now.Add(10 * time.Minute), envelope("e1"), nil, 401, "webhook-timestamp too far in the future", false},
		{"bad timestamp", "e1", now, envelope("e1"), func(h http.Header) { h.Set("webhook-timestamp", "soon") }, 401, "webhook-timestamp is not Unix seconds", false},
		{"signed, not JSON", "e1", now, []byte(`not json`), nil, 400, "body is not a webhook event envelope", false},
		{"signed, no payload", "e1", now, []byte(`{"id":"e1","type":"payout.paid"}`), nil, 400, "body is not a webhook event envelope", false},
		{"signed, envelope of another id", "e1", now, envelope("e2"), nil, 400, "body is not a webhook event envelope", false},
		{"too large", "e1", now, append(envelope("e1"), bytes.Repeat([]byte(" "), 2048)...), nil, 413, "body larger than 1024 bytes", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEndpoint(t, func(c *receiver.Config) { c.MaxBodyBytes = 1024 })
			var edits []func(http.Header)
			if tt.edit != nil {
				edits = append(edits, tt.edit)
			}
			status, answer := e.post(t, tt.id, tt.ts, tt.body, edits...)
			if status != tt.status || answer != tt.answer {
				t.Fatalf("answer %d %q, want %d %q", status, answer, tt.status, tt.answer)
			}
			if got := len(e.got()); (got == 1) != tt.handled || got > 1 {
				t.Fatalf("handler ran %d times, want handled %v", got, tt.handled)
			}
			if !tt.handled {
				return
			}
			ev := e.got()[0]
			if ev.ID != "e1" || ev.Type != "payout.paid" || ev.APIVersion != "2026-05-01" ||
				string(ev.Payload) != `{"id":"po_1","type":"payout","status":"sent"}` ||
				!ev.Date.Equal(time.Date(2026, 11, 23, 9, 14, 5, 123e6, time.UTC)) || !ev.Attempted.Equal(tt.ts) {
				t.Fatalf("event %+v", ev)
			}
		})
	}
}

func TestReceiverRefusesOtherMethods(t *testing.T) {
	t.Parallel()
	e := newEndpoint(t)
	resp, err := http.Get(e.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPost {
		t.Fatalf("GET: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// TestReceiverRetriesAfterFailureOnly: a failed handler is not marked, so
// the engine's retry runs it again; once it succeeded, a repeat (a retry
// after a lost answer, a redelivery) is acknowledged without running it.
func TestReceiverRetriesAfterFailureOnly(t *testing.T) {
	t.Parallel()
	e := newEndpoint(t)
	now := e.now
	e.setHandle(func(*receiver.Event) error { return errors.New("database down") })
	if status, answer := e.post(t, "e1", now, envelope("e1")); status != 500 || answer != "handler failed" {
		t.Fatalf("failing handler: %d %q, want 500", status, answer)
	}
	e.setHandle(func(*receiver.Event) error { return nil })
	if status, _ := e.post(t, "e1", now.Add(5*time.Second), envelope("e1")); status != 200 {
		t.Fatalf("retry: %d, want 200", status)
	}
	if status, answer := e.post(t, "e1", now.Add(15*time.Second), envelope("e1")); status != 200 || answer != "duplicate" {
		t.Fatalf("duplicate: %d %q, want 200 duplicate", status, answer)
	}
	if n := len(e.got()); n != 2 {
		t.Fatalf("handler ran %d times, want 2 (the failure and the retry)", n)
	}
}

// TestReceiverConcurrentDuplicate: while one delivery of an event is being
// handled, another is answered 409 so that the engine tries it again later.
func TestReceiverConcurrentDuplicate(t *testing.T) {
	t.Parallel()
	e := newEndpoint(t)
	started, finish := make(chan struct{}), make(chan struct{})
	e.setHandle(func(*receiver.Event) error {
		close(started)
		<-finish
		return nil
	})
	first := make(chan int)
	go func() {
		status, _ := e.post(t, "e1", e.now, envelope("e1"))
		first <- status
	}()
	<-started
	if status, _ := e.post(t, "e1", e.now, envelope("e1")); status != http.StatusConflict {
		t.Errorf("second delivery while the first runs: %d, want 409", status)
	}
	close(finish)
	if status := <-first; status != 200 {
		t.Errorf("first delivery: %d", status)
	}
	if status, answer := e.post(t, "e1", e.now, envelope("e1")); status != 200 || answer != "duplicate" {
		t.Errorf("after the first finished: %d %q", status, answer)
	}
}

// TestReceiverReleasesOnPanic: a panicking handler's claim is released, so
// the next attempt runs it at once rather than after the lease.
func TestReceiverReleasesOnPanic(t *testing.T) {
	t.Parallel()
	e := newEndpoint(t)
	e.setHandle(func(*receiver.Event) error { panic("bug") })
	// net/http recovers the panic and drops the connection.
	req, _ := http.NewRequest(http.MethodPost, e.URL, bytes.NewReader(envelope("e1")))
	signer.SetHeaders(req.Header, "e1", e.now, envelope("e1"), e.key)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("panicking handler answered %d", resp.StatusCode)
	}
	e.setHandle(func(*receiver.Event) error { return nil })
	if status, answer := e.post(t, "e1", e.now, envelope("e1")); status != 200 || answer != "ok" {
		t.Fatalf("after the panic: %d %q, want the handler to run", status, answer)
	}
}

// TestReceiverDedupStoreDown: when the duplicate store fails, the
// delivery is refused with 503 and the handler does not run.
func TestReceiverDedupStoreDown(t *testing.T) {
	t.Parallel()
	rd := storetest.NewRedis(t)
	rc := redis.NewClient(&redis.Options{Network: "unix", Addr: rd.Socket, MaxRetries: -1})
	t.Cleanup(func() { rc.Close() })
	dedup, err := redisdedup.New(redisdedup.Config{Client: rc})
	if err != nil {
		t.Fatal(err)
	}
	e := newEndpoint(t, func(c *receiver.Config) { c.Dedup = dedup })
	if status, _ := e.post(t, "e1", e.now, envelope("e1")); status != 200 {
		t.Fatalf("with Redis up: %d", status)
	}
	rd.Stop()
	if status, answer := e.post(t, "e2", e.now, envelope("e2")); status != 503 || answer != "duplicate check failed" {
		t.Fatalf("with Redis down: %d %q, want 503", status, answer)
	}
	if n := len(e.got()); n != 1 {
		t.Fatalf("handler ran %d times, want once", n)
	}
}

// TestReceiverWithoutDedup runs the handler for every verified delivery.
func TestReceiverWithoutDedup(t *testing.T) {
	t.Parallel()
	e := newEndpoint(t, func(c *receiver.Config) { c.Dedup = nil })
	for range 2 {
		if status, answer := e.post(t, "e1", e.now, envelope("e1")); status != 200 || answer != "ok" {
			t.Fatalf("%d %q", status, answer)
		}
	}
	if n := len(e.got()); n != 2 {
		t.Fatalf("handler ran %d times, want 2", n)
	}
}

func TestNewRefusesIncompleteConfig(t *testing.T) {
	t.Parallel()
	v := newVerifier(t, time.Now(), vectorSecret)
	h := receiver.HandlerFunc(func(context.Context, *receiver.Event) error { return nil })
	for name, cfg := range map[string]receiver.Config{
		"no verifier":   {Handler: h},
		"no handler":    {Verifier: v},
		"negative size": {Verifier: v, Handler: h, MaxBodyBytes: -1},
	} {
		if _, err := receiver.New(cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}
