package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/internal/sysmon"
)

// These tests are an operator's first hour: a wrong setting must fail at
// once and say which variable is wrong, an unreachable service must be
// told plainly, and the command line must behave as command lines do.

// runOnce runs `webhookd args…` with env and returns its exit code, its
// output and how long it ran. A process still running after a minute is
// killed and fails the test.
func runOnce(t *testing.T, bin string, env []string, args ...string) (code int, stdout, stderr string, took time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err := cmd.Run()
	took = time.Since(start)
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("webhookd %s still running after a minute; output:\n%s%s", strings.Join(args, " "), out.String(), errOut.String())
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return code, out.String(), errOut.String(), took
}

// withEnv is env with the given NAME=value settings last, so that they win.
func withEnv(env []string, settings ...string) []string {
	return append(slices.Clip(env), settings...)
}

// databaseURL is the test server's URL for database name as user.
func databaseURL(t *testing.T, user, name string) string {
	t.Helper()
	u, err := url.Parse(storetest.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		u.User = url.User(user)
	}
	u.Path = "/" + name
	return u.String()
}

// busyAddr is an address that a listener of the test holds.
func busyAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().String()
}

func TestBadConfigurationFailsAtOnce(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	e := newEngine(t)
	busy := busyAddr(t)
	tests := []struct {
		name string
		// setting is NAME=value; variable is the one the message must name.
		settings []string
		variable string
	}{
		{"database URL not a URL", []string{"WEBHOOKD_DATABASE_URL=notaurl"}, "WEBHOOKD_DATABASE_URL"},
		{"database URL of MySQL", []string{"WEBHOOKD_DATABASE_URL=mysql://root@127.0.0.1:3306/webhookd"}, "WEBHOOKD_DATABASE_URL"},
		{"missing database", []string{"WEBHOOKD_DATABASE_URL=" + databaseURL(t, "", "webhookd_no_such_database")}, "WEBHOOKD_DATABASE_URL"},
		{"unknown role", []string{"WEBHOOKD_DATABASE_URL=" + databaseURL(t, "webhookd_no_such_role", "postgres")}, "WEBHOOKD_DATABASE_URL"},
		{"retry schedule", []string{"WEBHOOKD_RETRY_SCHEDULE=1s,,2s"}, "WEBHOOKD_RETRY_SCHEDULE"},
		{"log level", []string{"WEBHOOKD_LOG_LEVEL=loud"}, "WEBHOOKD_LOG_LEVEL"},
		{"Redis URL", []string{"WEBHOOKD_REDIS_URL=http://127.0.0.1:6379"}, "WEBHOOKD_REDIS_URL"},
		{"master key", []string{"WEBHOOKD_MASTER_KEY=c2hvcnQ="}, "WEBHOOKD_MASTER_KEY"},
		{"TLS certificate missing", []string{"WEBHOOKD_TLS_CERT=/nonexistent/cert.pem", "WEBHOOKD_TLS_KEY=/nonexistent/key.pem"}, "WEBHOOKD_TLS_CERT"},
		{"public port in use", []string{"WEBHOOKD_LISTEN=" + busy}, "WEBHOOKD_LISTEN"},
		{"internal port in use", []string{"WEBHOOKD_INTERNAL_LISTEN=" + busy}, "WEBHOOKD_INTERNAL_LISTEN"},
		{"listen address", []string{"WEBHOOKD_LISTEN=nowhere"}, "WEBHOOKD_LISTEN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// The default start-up timeout (minutes) stays: retrying
			// any of these would show in the time taken.
			// Addresses of its own, since the cases run at once.
			env := withEnv(e.env, "WEBHOOKD_LISTEN="+storetest.FreeAddr(t), "WEBHOOKD_INTERNAL_LISTEN="+storetest.FreeAddr(t))
			code, _, stderr, took := runOnce(t, e.bin, withEnv(env, tt.settings...), "serve")
			if code != 1 || took > 2*time.Second {
				t.Errorf("exit %d after %s, want 1 within 2s; output:\n%s", code, took, stderr)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if last := lines[len(lines)-1]; !strings.HasPrefix(last, "webhookd: ") || !strings.Contains(last, tt.variable) {
				t.Errorf("last line %q, want webhookd's error naming %s", last, tt.variable)
			}
			if strings.Contains(stderr, `"msg":"listening","addr":"`+busy+`"`) {
				t.Errorf("logged listening on the port in use:\n%s", stderr)
			}
		})
	}
}

// TestUnreachablePostgresIsWaitedFor: a Postgres that does not answer is
// worth waiting for, and the operator sees the wait.
func TestUnreachablePostgresIsWaitedFor(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	e := newEngine(t)
	closed := storetest.FreeAddr(t)
	e.env = withEnv(e.env, "WEBHOOKD_DATABASE_URL=postgres://postgres@"+closed+"/webhookd?sslmode=disable",
		"WEBHOOKD_STARTUP_TIMEOUT=3s")
	code, _, stderr, took := runOnce(t, e.bin, e.env, "serve")
	if code != 1 || took < 2*time.Second {
		t.Errorf("exit %d after %s, want 1 after the 3s start-up timeout (best effort: at least 2s)", code, took)
	}
	var waits int
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		var entry map[string]any
		if json.Unmarshal([]byte(line), &entry) != nil {
			continue
		}
		if msg, _ := entry["msg"].(string); strings.HasPrefix(msg, "waiting for Postgres at "+closed+" (") &&
			entry["variable"] == "WEBHOOKD_DATABASE_URL" {
			waits++
		}
	}
	if waits == 0 {
		t.Errorf("no progress line naming WEBHOOKD_DATABASE_URL and %s while waiting:\n%s", closed, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "WEBHOOKD_DATABASE_URL") || !strings.Contains(last, "WEBHOOKD_STARTUP_TIMEOUT") ||
		!strings.Contains(last, closed) {
		t.Errorf("last line %q, want the address, WEBHOOKD_DATABASE_URL and WEBHOOKD_STARTUP_TIMEOUT", last)
	}
}

// TestRedisUnreachable: with Redis away the engine runs, not ready, with a
// log that stays JSON and short, and the API says upstream_error.
func TestRedisUnreachable(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	t.Parallel() // it waits for the outage log's interval and measures no latency
	e := newEngine(t)
	socket := filepath.Join(t.TempDir(), "no-redis.sock")
	e.env = withEnv(e.env, "WEBHOOKD_REDIS_URL=unix://"+socket)
	p := e.launch("serve", e.internal)
	if !eventually(30*time.Second, func() bool { return strings.Contains(p.logs.String(), `"msg":"webhookd started"`) }) {
		t.Fatalf("webhookd did not start without Redis; logs:\n%s", p.logs)
	}
	// The observation: every client of the missing Redis reports
	// every failed dial, dozens of lines a second. The outage's line says
	// how many reports it held back since the last one: once it has held
	// some back (an interval after the first), the log is still short.
	var logs string
	if !eventually(30*time.Second, func() bool { logs = p.logs.String(); return redisReportsHeldBack(logs) > 0 }) {
		t.Fatalf("no outage line counts Redis reports held back; logs:\n%s", logs)
	}
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	namesVariable := false
	for _, line := range lines {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Errorf("not a JSON line: %q", line)
		}
		namesVariable = namesVariable || entry["variable"] == "WEBHOOKD_REDIS_URL"
	}
	if len(lines) >= 10 || !namesVariable {
		t.Errorf("%d lines when %d reports were held back (want fewer than 10), naming WEBHOOKD_REDIS_URL: %v:\n%s",
			len(lines), redisReportsHeldBack(logs), namesVariable, logs)
	}

	if status, body := e.call("GET", "http://"+e.internal+"/readyz", "", nil); status != http.StatusServiceUnavailable || body["redis"] != "unavailable" {
		t.Errorf("/readyz: %d %v, want 503 with redis unavailable", status, body)
	}
	key := e.keysCreate("m_noredis")
	r := newReceiver(t)
	e.subscribe(key, r)
	status, sub := e.call("GET", "http://"+e.public+"/v1/webhook_subscriptions", key, nil)
	subs, _ := sub["data"].([]any)
	if status != http.StatusOK || len(subs) != 1 {
		t.Fatalf("list subscriptions: %d %v", status, sub)
	}
	id := subs[0].(map[string]any)["id"].(string)
	req, _ := http.NewRequest("POST", "http://"+e.public+"/v1/webhook_subscriptions/"+id+"/send_test_event", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Idempotency-Key", "test-event-without-redis")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode < 500 || body["code"] != "upstream_error" || body["category"] != "api_error" ||
		resp.Header.Get("Retry-After") != "1" {
		t.Errorf("send_test_event without Redis: %d (Retry-After %q) %v, want 5xx upstream_error with Retry-After 1",
			resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	for _, field := range []string{"category", "code", "message", "param", "doc_url", "correlation_id"} {
		if _, ok := body[field]; !ok {
			t.Errorf("error body lacks %s (spec 7): %v", field, body)
		}
	}
}

// redisReportsHeldBack is how many reports of a Redis outage the log's
// outage lines say were held back, in all.
func redisReportsHeldBack(logs string) int {
	held := 0
	for _, line := range strings.Split(logs, "\n") {
		var entry struct {
			Unreachable string `json:"unreachable"`
			Repeated    int    `json:"repeated"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Unreachable == "Redis" {
			held += entry.Repeated
		}
	}
	return held
}

// TestIngestToken: without WEBHOOKD_INGEST_TOKEN the engine warns, and the
// internal API's refusals speak of the ingest token, not an API key.
func TestIngestToken(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	e := newEngine(t, "WEBHOOKD_INGEST_TOKEN=")
	e.start()
	if !strings.Contains(e.logs.String(), `"variable":"WEBHOOKD_INGEST_TOKEN"`) {
		t.Errorf("no start-up warning naming WEBHOOKD_INGEST_TOKEN:\n%s", e.logs)
	}
	status, body := e.call("POST", "http://"+e.internal+"/internal/v1/events", "anything", map[string]any{"merchant_id": "m_x"})
	if msg, _ := body["message"].(string); status != http.StatusUnauthorized || !strings.Contains(msg, "WEBHOOKD_INGEST_TOKEN") {
		t.Errorf("internal API without a configured token: %d %v, want 401 naming WEBHOOKD_INGEST_TOKEN", status, body)
	}
}

func TestCommandLine(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	e := newEngine(t, "WEBHOOKD_MASTER_KEY=")
	tests := []struct {
		name     string
		args     []string
		settings []string
		code     int
		// stdout and stderr must contain these; quiet is true when
		// stderr must be empty.
		stdout, stderr string
		quiet          bool
	}{
		{name: "help", args: []string{"help"}, stdout: "usage: webhookd", quiet: true},
		{name: "--help", args: []string{"--help"}, stdout: "usage: webhookd", quiet: true},
		{name: "-h", args: []string{"-h"}, stdout: "usage: webhookd", quiet: true},
		{name: "serve --help", args: []string{"serve", "--help"}, stdout: "usage: webhookd", quiet: true},
		{name: "version", args: []string{"version"}, stdout: "webhookd dev (commit ", quiet: true},
		{name: "unknown command", args: []string{"serv"}, code: 1, stderr: `unknown command "serv"`},
		{name: "stray argument", args: []string{"serve", "now"}, code: 1, stderr: `serve takes no arguments, not "now"`},
		{name: "misspelt variable", args: []string{"migrate"}, settings: []string{"WEBHOOKD_RETRY_SCHEDUL=1s"},
			stderr: `"closest":"WEBHOOKD_RETRY_SCHEDULE"`},
		// After migrate, in the same database.
		{name: "keys create names its database", args: []string{"keys", "create", "--merchant", "m_cli"},
			stdout: "sandbox.", stderr: "WEBHOOKD_DATABASE_URL"},
		// keys list|revoke|roll call the internal API and read no other
		// configuration: production without a master key is no error.
		{name: "keys list without a merchant", args: []string{"keys", "list"}, code: 1, stderr: "--merchant is required"},
		{name: "keys list with no engine running", args: []string{"keys", "list", "--merchant", "m_cli"},
			settings: []string{"WEBHOOKD_ENVIRONMENT=production"}, code: 1, stderr: "cannot reach the internal API at http://" + e.internal},
		{name: "keys roll --help", args: []string{"keys", "roll", "--help"}, stdout: "--overlap", quiet: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr, _ := runOnce(t, e.bin, withEnv(e.env, tt.settings...), tt.args...)
			if code != tt.code || !strings.Contains(stdout, tt.stdout) || !strings.Contains(stderr, tt.stderr) ||
				tt.quiet && stderr != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q (empty: %v)",
					code, stdout, stderr, tt.code, tt.stdout, tt.stderr, tt.quiet)
			}
			if strings.Contains(stderr, "WEBHOOKD_MASTER_KEY unset") {
				t.Errorf("%s warned of a generated master key it does not use:\n%s", tt.name, stderr)
			}
		})
	}
}

// TestServersRunWithTheMonitorTuned: the server commands run, under the
// same process id, with GODEBUG's schedtrace set (internal/sysmon), the
// operator's other GODEBUG settings kept beside it; an operator's own
// schedtrace (schedtrace=0 turns the tuning off) is left as it is.
func TestServersRunWithTheMonitorTuned(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	t.Parallel()
	e := newEngine(t)
	e.start()
	for _, tc := range []struct {
		role, godebug, want string
	}{
		{"serve", "", "GODEBUG=" + sysmon.Setting},
		{"worker", "GODEBUG=madvdontneed=1", "GODEBUG=madvdontneed=1," + sysmon.Setting},
		{"api", "GODEBUG=schedtrace=0", "GODEBUG=schedtrace=0"},
	} {
		cmd := e.cmd
		if tc.role != "serve" {
			// (Its own public listener: serve holds the engine's.)
			cmd = e.spawn(tc.role, storetest.FreeAddr(t), tc.godebug, "WEBHOOKD_LISTEN="+storetest.FreeAddr(t)).cmd
		}
		// The process the test started is the server: executing itself
		// again kept its id.
		environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, kv := range strings.Split(string(environ), "\x00") {
			if strings.HasPrefix(kv, "GODEBUG=") {
				got = append(got, kv)
			}
		}
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("webhookd %s started with %q runs with %q, want %q", tc.role, tc.godebug, got, tc.want)
		}
	}
}

// TestIdleServersRunOnOneP: an idle server narrows to one P
// (internal/procs), which its metrics show; one whose operator set
// GOMAXPROCS keeps what was set. The pinned process is judged once the
// governed one, started before it and idle as long, has narrowed. (On a
// machine of one CPU the first holds from the start; CI's have two.)
func TestIdleServersRunOnOneP(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	t.Parallel()
	e := newEngine(t)
	e.start()
	pinned := e.spawn("worker", storetest.FreeAddr(t), "GOMAXPROCS=2")
	procsOf := func(internal string) float64 {
		_, series := scrape(t, "http://"+internal+"/metrics")
		return series["go_sched_gomaxprocs_threads"]
	}
	waitFor(t, "the idle serve process to run on one P", 30*time.Second, func() bool { return procsOf(e.internal) == 1 })
	if got := procsOf(pinned.internal); got != 2 {
		t.Fatalf("a worker started with GOMAXPROCS=2 runs on %v Ps", got)
	}
}
