package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhookd/webhookd/dashboards"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// These tests drive the real binary from outside, as an operator would:
// environment variables in, HTTP and stdout out.

// engine is a webhookd configuration (a fresh database, a private Redis)
// and the processes running it.
type engine struct {
	t                *testing.T
	bin              string
	env              []string
	public, internal string
	redis            *storetest.Redis
	// cmd and logs are those of the process start ran.
	cmd  *exec.Cmd
	logs *logBuffer
}

// logBuffer collects a process's output while tests read it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

const (
	e2eToken     = "e2e-ingest-token"
	e2eMasterKey = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
)

// theBinary is the engine, built once for every test of the package
// that runs it: each build links a binary of about 95 MB (five seconds of
// CPU), which forty-odd tests paid one after another. It is linked
// without DWARF (-ldflags=-w), which no test reads: 7.5-10.4 s of build
// became 5.4-9.0 s.
var theBinary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// TestMain removes the binary the tests shared once they are done.
func TestMain(m *testing.M) {
	code := m.Run()
	if theBinary.dir != "" {
		_ = os.RemoveAll(theBinary.dir)
	}
	os.Exit(code)
}

// buildBinary is the path of the engine's binary, built at its first use.
func buildBinary(t *testing.T) string {
	t.Helper()
	// Each test that runs the binary skips under -short itself; this
	// catches one that forgot.
	storetest.FullLane(t, "builds and runs the real binary")
	theBinary.once.Do(func() {
		dir, err := os.MkdirTemp("", "webhookd-e2e-")
		if err != nil {
			theBinary.err = err
			return
		}
		theBinary.dir = dir
		bin := filepath.Join(dir, "webhookd")
		if out, err := exec.Command("go", "build", "-ldflags=-w", "-o", bin, ".").CombinedOutput(); err != nil {
			theBinary.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		theBinary.path = bin
	})
	if theBinary.err != nil {
		t.Fatal(theBinary.err)
	}
	return theBinary.path
}

// newEngine prepares a webhookd on a fresh database of the shared Postgres
// and a private Redis.
func newEngine(t *testing.T, extraEnv ...string) *engine {
	t.Helper()
	return newEngineOn(t, storetest.NewDatabase(t), extraEnv...)
}

// newEngineOn prepares a webhookd on the database at dbURL and a private
// Redis.
func newEngineOn(t *testing.T, dbURL string, extraEnv ...string) *engine {
	t.Helper()
	e := &engine{t: t, bin: buildBinary(t), public: storetest.FreeAddr(t), internal: storetest.FreeAddr(t), redis: storetest.NewRedis(t)}
	e.env = append(os.Environ(),
		"WEBHOOKD_DATABASE_URL="+dbURL,
		"WEBHOOKD_REDIS_URL="+e.redis.URL(),
		"WEBHOOKD_LISTEN="+e.public,
		"WEBHOOKD_INTERNAL_LISTEN="+e.internal,
		"WEBHOOKD_INGEST_TOKEN="+e2eToken,
		"WEBHOOKD_MASTER_KEY="+e2eMasterKey,
		"WEBHOOKD_ALLOW_HTTP_TARGETS=true",
		"WEBHOOKD_ALLOW_PRIVATE_TARGETS=true",
		"WEBHOOKD_RETRY_SCHEDULE=100ms,200ms",
		"WEBHOOKD_DELIVERY_TIMEOUT=2s",
	)
	e.env = append(e.env, extraEnv...)
	return e
}

// process is one running webhookd command.
type process struct {
	cmd      *exec.Cmd
	logs     *logBuffer
	internal string
}

// spawn runs `webhookd <role>` with its internal listener on internal (and
// env added to the engine's) and waits until it is ready.
func (e *engine) spawn(role, internal string, env ...string) *process {
	e.t.Helper()
	p := e.launch(role, internal, env...)
	p.waitReady(e.t, 30*time.Second)
	return p
}

// waitReady waits until the process is ready, failing the test after
// within.
func (p *process) waitReady(t *testing.T, within time.Duration) {
	t.Helper()
	if !eventually(within, p.ready) {
		t.Fatalf("webhookd %s was not ready within %s; logs:\n%s", p.cmd.Args[1], within, p.logs)
	}
}

// launch runs `webhookd <role>` with its internal listener on internal,
// env added to the engine's (a later setting wins).
func (e *engine) launch(role, internal string, env ...string) *process {
	e.t.Helper()
	p := &process{logs: &logBuffer{}, internal: internal}
	p.cmd = exec.Command(e.bin, role)
	p.cmd.Env = append(append(slices.Clip(e.env), "WEBHOOKD_INTERNAL_LISTEN="+internal), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	cmd := p.cmd
	e.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	return p
}

// ready reports whether /readyz answers 200.
func (p *process) ready() bool {
	resp, err := http.Get("http://" + p.internal + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// kill stops the process at once, as a crash would.
func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

// start runs `webhookd serve` and waits until it is ready.
func (e *engine) start() {
	e.t.Helper()
	p := e.spawn("serve", e.internal)
	e.cmd, e.logs = p.cmd, p.logs
}

// kill stops the process start ran at once, as a crash would.
func (e *engine) kill() {
	e.t.Helper()
	_ = e.cmd.Process.Kill()
	_ = e.cmd.Wait()
}

// keysCreate runs `webhookd keys create` and returns the last line.
func (e *engine) keysCreate(merchant string) string {
	e.t.Helper()
	cmd := exec.Command(e.bin, "keys", "create", "--merchant", merchant, "--scopes", "webhooks:read,webhooks:write")
	cmd.Env = e.env
	out, err := cmd.Output()
	if err != nil {
		e.t.Fatalf("keys create: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

func (e *engine) call(method, url, auth string, body any) (int, map[string]any) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+auth)
	if method == http.MethodPost {
		req.Header.Set("Idempotency-Key", fmt.Sprint(time.Now().UnixNano()))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// receiver is a real HTTP endpoint on 127.0.0.1 that checks every delivery
// with the published Standard Webhooks library.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	secret   string
	got      []string // webhook-ids that verified
	bodies   []string // their bodies, as received
	headers  []http.Header
	bad      int
	handle   func(n int) // called before answering; may block
	requests int
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.requests++
		n, handle, secret := r.requests, r.handle, r.secret
		r.mu.Unlock()
		if handle != nil {
			handle(n)
		}
		wh, err := standardwebhooks.NewWebhook(secret)
		if err == nil {
			err = wh.Verify(body, req.Header)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if err != nil {
			r.bad++
			w.WriteHeader(400)
			return
		}
		r.got = append(r.got, req.Header.Get("webhook-id"))
		r.bodies, r.headers = append(r.bodies, string(body)), append(r.headers, req.Header.Clone())
		w.WriteHeader(204)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) wait(t *testing.T, id string, within time.Duration) {
	t.Helper()
	if eventually(within, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return slices.Contains(r.got, id)
	}) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t.Fatalf("event %s not delivered within %s (verified %v, bad signatures %d)", id, within, r.got, r.bad)
}

// subscribe creates a subscription to every event and gives the receiver
// its secret.
func (e *engine) subscribe(key string, r *receiver) {
	e.t.Helper()
	status, sub := e.call("POST", "http://"+e.public+"/v1/webhook_subscriptions", key,
		map[string]any{"url": r.URL + "/hook", "events": []string{"*"}})
	if status != 201 {
		e.t.Fatalf("create subscription: %d %v", status, sub)
	}
	r.mu.Lock()
	r.secret, _ = sub["secret"].(string)
	r.mu.Unlock()
}

func (e *engine) publish(merchant string) string {
	e.t.Helper()
	status, ev := e.call("POST", "http://"+e.internal+"/internal/v1/events", e2eToken,
		map[string]any{"merchant_id": merchant, "type": "payout.paid", "payload": map[string]any{"id": "po_1", "status": "paid"}})
	if status != 202 {
		e.t.Fatalf("publish: %d %v", status, ev)
	}
	return ev["id"].(string)
}

func TestEndToEndDeliveryAndMetrics(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	e := newEngine(t)
	e.start()
	key := e.keysCreate("m_e2e")
	if !strings.HasPrefix(key, "sandbox.") {
		t.Fatalf("keys create printed %q, want a sandbox key on the last line", key)
	}
	r := newReceiver(t)
	e.subscribe(key, r)
	id := e.publish("m_e2e")
	r.wait(t, id, 15*time.Second)

	// Every metric of DESIGN.md, and every one the dashboard and the alerts
	// query, is exported by a running engine after a delivery. The receiver
	// answers before the attempt is recorded and observed: scrape until the
	// delivery shows.
	var exported map[string]string
	var series map[string]float64
	eventually(10*time.Second, func() bool {
		exported, series = scrape(t, "http://"+e.internal+"/metrics")
		return series["webhookd_delivery_latency_seconds_count"] >= 1
	}) // on a timeout, the checks below say what is missing
	want := []string{
		"webhookd_events_ingested_total", "webhookd_delivery_attempts_total",
		"webhookd_delivery_attempt_duration_seconds_bucket", "webhookd_delivery_latency_seconds_bucket",
		"webhookd_deliveries_failed_total", "webhookd_retries_scheduled_total", "webhookd_sweeper_requeued_total",
		"webhookd_http_requests_total", "webhookd_http_request_duration_seconds_bucket",
		"webhookd_db_pool_acquired_conns", "go_goroutines", "process_resident_memory_bytes",
	}
	used, err := dashboards.MetricNames()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append(want, used...) {
		if _, ok := exported[name]; !ok {
			t.Errorf("metric %s is used (DESIGN.md, dashboard or alerts) but not exported", name)
		}
	}
	// Sensible values after one event delivered at the first attempt.
	values := []struct {
		series string
		want   func(float64) bool
		what   string
	}{
		{`webhookd_events_ingested_total{type="payout.paid"}`, func(v float64) bool { return v == 1 }, "1"},
		{`webhookd_delivery_attempts_total{outcome="success"}`, func(v float64) bool { return v == 1 }, "1"},
		{`webhookd_delivery_attempt_duration_seconds_count`, func(v float64) bool { return v == 1 }, "1"},
		{`webhookd_delivery_latency_seconds_count`, func(v float64) bool { return v == 1 }, "1"},
		{`webhookd_delivery_latency_seconds_sum`, func(v float64) bool { return v > 0 && v < 15 }, "between 0 and 15 s"},
		{`webhookd_deliveries_failed_total`, func(v float64) bool { return v == 0 }, "0"},
		{`webhookd_retries_scheduled_total`, func(v float64) bool { return v == 0 }, "0"},
		{`webhookd_http_requests_total{code="201",route="/v1/webhook_subscriptions"}`, func(v float64) bool { return v == 1 }, "1"},
		{`webhookd_db_pool_max_conns`, func(v float64) bool { return v > 0 }, "> 0"},
	}
	for _, c := range values {
		v, ok := series[c.series]
		if !ok || !c.want(v) {
			t.Errorf("%s = %v (exported %v), want %s", c.series, v, ok, c.what)
		}
	}
}

func TestCrashedWorkerLosesNoDelivery(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	e := newEngine(t, "WEBHOOKD_SWEEP_INTERVAL=1s")
	e.start()
	key := e.keysCreate("m_crash")
	r := newReceiver(t)
	inFlight := make(chan struct{})
	// The first attempt hangs, in flight when the process dies, until the
	// test ends (before the receiver closes: cleanups run last first).
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	var once sync.Once
	r.handle = func(n int) {
		if n == 1 {
			once.Do(func() { close(inFlight) })
			<-hang
		}
	}
	e.subscribe(key, r)
	id := e.publish("m_crash")
	select {
	case <-inFlight:
	case <-time.After(15 * time.Second):
		t.Fatalf("first attempt never arrived; logs:\n%s", e.logs)
	}
	e.kill()
	e.start()
	if !eventually(90*time.Second, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return slices.Contains(r.got, id)
	}) {
		fatalWithLogs(t, fmt.Sprintf("event %s not delivered within 90s of the restart; its delivery: %v", id, e.deliveryOf(key, id)),
			"logs of the restarted engine:\n"+tail(e.logs))
	}
}

// scrape reads a Prometheus text exposition: the last line of each metric
// name, and the value of each series (name and labels as written).
func scrape(t *testing.T, url string) (map[string]string, map[string]float64) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	exported := map[string]string{}
	series := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		exported[line[:strings.IndexAny(line, "{ ")]] = line
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
				series[line[:i]] = v
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return exported, series
}
