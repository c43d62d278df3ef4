package main

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// These tests run the real `webhookd listen` and `webhookd trigger`
// against a real engine split in its two roles, `webhookd api` and
// `webhookd worker`: the listener's WebSocket lands on the api process,
// the attempts run on the worker, and Redis relays between them.

// startSplit starts the engine as an api process and a worker process.
func (e *engine) startSplit() {
	e.t.Helper()
	api := e.spawn("api", e.internal)
	e.cmd, e.logs = api.cmd, api.logs
	e.spawn("worker", storetest.FreeAddr(e.t))
}

// localServer is the developer's local webhook handler: it verifies each
// request with the published Standard Webhooks library and the secret the
// command printed, and answers with answer(n) for its nth request.
type localServer struct {
	*httptest.Server
	mu       sync.Mutex
	secret   string
	verified map[string]int // webhook-id → requests that verified
	bad      int
	requests int
	answer   func(n int) int
}

func newLocalServer(t *testing.T, answer func(n int) int) *localServer {
	s := &localServer{verified: map[string]int{}, answer: answer}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.requests++
		wh, err := standardwebhooks.NewWebhook(s.secret)
		if err == nil {
			err = wh.Verify(body, r.Header)
		}
		if err != nil || r.Header.Get("Content-Type") != "application/json" {
			s.bad++
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		s.verified[r.Header.Get("webhook-id")]++
		w.WriteHeader(s.answer(s.requests))
		_, _ = io.WriteString(w, "local answer")
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *localServer) setSecret(secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secret = secret
}

func (s *localServer) got(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.verified[id]
}

func (s *localServer) badSignatures() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bad
}

// cli is a running `webhookd listen`.
type cli struct {
	cmd         *exec.Cmd
	out, errOut *logBuffer
	done        chan error
}

// runCLI starts `webhookd <args>` as a developer would, with no
// configuration of the engine in its environment.
func (e *engine) runCLI(args ...string) *cli {
	e.t.Helper()
	c := &cli{cmd: exec.Command(e.bin, args...), out: &logBuffer{}, errOut: &logBuffer{}, done: make(chan error, 1)}
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.errOut
	if err := c.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() { c.done <- c.cmd.Wait() }()
	e.t.Cleanup(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		<-c.done
	})
	return c
}

var (
	readyLine  = regexp.MustCompile(`Listener ([0-9a-f-]{36}) forwards`)
	secretLine = regexp.MustCompile(`secret is (whsec_\S+)`)
)

// listening waits for the command's ready lines and returns the listener
// id and the secret it printed.
func (c *cli) listening(t *testing.T) (id, secret string) {
	t.Helper()
	waitFor(t, "webhookd listen to be ready", 30*time.Second, func() bool {
		select {
		case err := <-c.done:
			c.done <- err
			t.Fatalf("webhookd listen exited: %v\n%s", err, c.errOut)
		default:
		}
		return secretLine.MatchString(c.errOut.String())
	})
	return readyLine.FindStringSubmatch(c.errOut.String())[1], secretLine.FindStringSubmatch(c.errOut.String())[1]
}

// delivery reads one delivery of the merchant through the public API.
func (e *engine) delivery(key, eventID string) map[string]any {
	e.t.Helper()
	status, list := e.call("GET", "http://"+e.public+"/v1/webhook_deliveries?event_id="+eventID, key, nil)
	data, _ := list["data"].([]any)
	if status != 200 || len(data) != 1 {
		e.t.Fatalf("deliveries of event %s: %d %v, want one", eventID, status, list)
	}
	id := data[0].(map[string]any)["id"].(string)
	status, d := e.call("GET", "http://"+e.public+"/v1/webhook_deliveries/"+id, key, nil)
	if status != 200 {
		e.t.Fatalf("GET delivery %s: %d %v", id, status, d)
	}
	return d
}

func attemptsOf(d map[string]any) []map[string]any {
	var out []map[string]any
	for _, a := range d["attempts"].([]any) {
		out = append(out, a.(map[string]any))
	}
	return out
}

// TestListenEndToEnd: an event published while `webhookd listen` runs
// reaches the local server signed with the secret the command printed (and
// that --print-secret prints); a local 500 is retried; the local answers
// are the attempts in the delivery log; `webhookd trigger` reaches it too;
// another merchant's event never does; the listener is not listed as a
// subscription.
func TestListenEndToEnd(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	e := newEngine(t, "WEBHOOKD_RETRY_SCHEDULE=100ms,100ms,100ms")
	e.startSplit()
	key, otherKey := e.keysCreate("m_dev"), e.keysCreate("m_other")
	local := newLocalServer(t, func(n int) int {
		if n == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	api := "http://" + e.public

	printed := e.runCLI("listen", "--api", api, "--api-key", key, "--print-secret")
	if err := <-printed.done; err != nil {
		t.Fatalf("listen --print-secret: %v\n%s", err, printed.errOut)
	}
	printed.done <- nil
	cmd := e.runCLI("listen", "--api", api, "--api-key", key, "--forward-to", local.URL+"/webhooks", "--events", "payout.paid")
	listenerID, secret := cmd.listening(t)
	if strings.TrimSpace(printed.out.String()) != secret {
		t.Errorf("--print-secret printed %q, the listener signs with %q", printed.out, secret)
	}
	local.setSecret(secret)

	first := e.publish("m_dev")
	waitFor(t, "the event to reach the local server after a retry", 30*time.Second, func() bool { return local.got(first) == 2 })
	waitFor(t, "the delivery to succeed", 10*time.Second, func() bool { return e.delivery(key, first)["status"] == "succeeded" })
	d := e.delivery(key, first)
	attempts := attemptsOf(d)
	if d["subscription_id"] != listenerID || len(attempts) != 2 || attempts[0]["http_status"] != 500.0 || attempts[1]["http_status"] != 200.0 ||
		attempts[1]["response_body"] != "local answer" {
		t.Errorf("delivery = %v, want the listener's, a local 500 then a 200", d)
	}
	waitFor(t, "the command's lines", 10*time.Second, func() bool { return strings.Count(cmd.out.String(), first) == 2 })
	if out := cmd.out.String(); !strings.Contains(out, "payout.paid") || !strings.Contains(out, "→ 500") || !strings.Contains(out, "→ 200") {
		t.Errorf("the command printed %q, want a line per delivery with the local status", out)
	}

	// Another merchant's event fans out to nothing of this merchant's.
	stranger := e.publish("m_other")
	if status, list := e.call("GET", "http://"+e.public+"/v1/webhook_deliveries?event_id="+stranger, otherKey, nil); status != 200 ||
		len(list["data"].([]any)) != 0 {
		t.Errorf("the other merchant's event was delivered: %d %v", status, list)
	}

	trig := e.runCLI("trigger", "payout.paid", "--api", api, "--api-key", key)
	if err := <-trig.done; err != nil {
		t.Fatalf("trigger: %v\n%s", err, trig.errOut)
	}
	trig.done <- nil
	m := regexp.MustCompile(`event ([0-9a-f-]{36})`).FindStringSubmatch(trig.out.String())
	if m == nil {
		t.Fatalf("trigger printed %q, want the event id", trig.out)
	}
	waitFor(t, "the triggered event to reach the local server", 30*time.Second, func() bool { return local.got(m[1]) == 1 })
	if local.got(stranger) != 0 || local.badSignatures() != 0 {
		t.Errorf("the local server got the other merchant's event or a bad signature (%d bad)", local.badSignatures())
	}

	if status, list := e.call("GET", api+"/v1/webhook_subscriptions", key, nil); status != 200 || len(list["data"].([]any)) != 0 {
		t.Errorf("GET /v1/webhook_subscriptions = %d %v, want no listener listed", status, list)
	}
}

// TestListenStopsWhenKilled: a local server that always fails is retried
// while the command runs; once the command is killed, the listener ends
// after its grace and its delivery stops, failed with listener_closed,
// long before the retry schedule would have run out.
func TestListenStopsWhenKilled(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	schedule := "300ms" + strings.Repeat(",1s", 14)
	e := newEngine(t, "WEBHOOKD_RETRY_SCHEDULE="+schedule, "WEBHOOKD_LISTENER_GRACE=1s")
	e.startSplit()
	key := e.keysCreate("m_dev")
	local := newLocalServer(t, func(int) int { return http.StatusInternalServerError })
	cmd := e.runCLI("listen", "--api", "http://"+e.public, "--api-key", key, "--forward-to", local.URL)
	_, secret := cmd.listening(t)
	local.setSecret(secret)

	ev := e.publish("m_dev")
	waitFor(t, "two local attempts", 30*time.Second, func() bool { return local.got(ev) >= 2 })
	_ = cmd.cmd.Process.Kill()
	<-cmd.done
	cmd.done <- nil

	var d map[string]any
	waitFor(t, "the delivery to stop", 30*time.Second, func() bool {
		d = e.delivery(key, ev)
		return d["status"] != "pending"
	})
	attempts := attemptsOf(d)
	last := attempts[len(attempts)-1]
	if d["status"] != "failed" || d["next_attempt_at"] != nil || last["error"] != "listener_closed" {
		t.Errorf("delivery = %v, want failed with a last listener_closed attempt", d)
	}
	if len(attempts) >= 15 {
		t.Errorf("%d attempts: the schedule ran out instead of the listener ending", len(attempts))
	}
	if slices.ContainsFunc(attempts[:len(attempts)-1], func(a map[string]any) bool { return a["error"] == "listener_closed" }) {
		t.Errorf("attempts = %v, want listener_closed only last", attempts)
	}
}

// TestListenWithoutWriteScope: a key without webhooks:write is refused
// with an error naming the scope, and the command exits non-zero.
func TestListenWithoutWriteScope(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	e := newEngine(t)
	e.start()
	keys := exec.Command(e.bin, "keys", "create", "--merchant", "m_ro", "--scopes", "webhooks:read")
	keys.Env = e.env
	out, err := keys.Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	cmd := e.runCLI("listen", "--api", "http://"+e.public, "--api-key", lines[len(lines)-1], "--forward-to", "http://127.0.0.1:9/")
	var exitErr *exec.ExitError
	err = <-cmd.done
	cmd.done <- err
	if !errors.As(err, &exitErr) || exitErr.ExitCode() == 0 {
		t.Fatalf("listen with a read-only key exited %v, want non-zero", err)
	}
	if msg := cmd.errOut.String(); !strings.Contains(msg, "webhooks:write") || !strings.Contains(msg, "insufficient_scope") {
		t.Errorf("listen said %q, want the missing scope named", msg)
	}
}
