package main

import (
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store/storetest"
)

// revocationDeadline is how soon after a revocation every process must
// refuse the key.
const revocationDeadline = time.Second

// TestRevokedKeyRefusedByEveryProcess: two `webhookd api` processes serve
// /v1 from one database, with a worker beside them. A key works on both;
// once `webhookd keys revoke` (through the first one's internal API)
// returns, both refuse it within a second, polled, never slept on. The
// key's use is written at shutdown: `keys list` shows its last_used_at.
func TestRevokedKeyRefusedByEveryProcess(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	e := newEngine(t)
	first := e.spawn("api", e.internal)
	second := *e
	second.public = storetest.FreeAddr(t)
	second.env = append(slices.Clip(e.env), "WEBHOOKD_LISTEN="+second.public)
	secondProc := second.spawn("api", storetest.FreeAddr(t))
	worker := e.spawn("worker", storetest.FreeAddr(t))

	key := e.keysCreate("m_revoke")
	publics := []string{e.public, second.public}
	for _, public := range publics {
		// Several times, so that any cache of the key would be warm.
		for range 5 {
			if status := e.keyStatus(public, key); status != http.StatusOK {
				t.Fatalf("the new key on %s: %d", public, status)
			}
		}
	}
	id := e.keyID("m_revoke", "http://"+first.internal)

	out, err := e.keysCommand("revoke", "--merchant", "m_revoke", "--key", id, "--api", "http://"+first.internal)
	revoked := time.Now()
	if err != nil || !strings.HasPrefix(out, "revoked key "+id) {
		t.Fatalf("keys revoke: %v\n%s", err, out)
	}
	refusedAfter := map[string]time.Duration{}
	eventually(10*revocationDeadline-time.Since(revoked), func() bool {
		for _, public := range publics {
			if _, done := refusedAfter[public]; !done && e.keyStatus(public, key) == http.StatusUnauthorized {
				refusedAfter[public] = time.Since(revoked)
			}
		}
		return len(refusedAfter) == len(publics)
	}) // the checks below name the processes that did not refuse it in time
	for _, public := range publics {
		took, refused := refusedAfter[public]
		switch {
		case !refused:
			t.Errorf("the api process on %s still accepts the revoked key after %s", public, 10*revocationDeadline)
		case took > revocationDeadline:
			t.Errorf("the api process on %s refused the revoked key %s after the revocation, more than %s", public, took, revocationDeadline)
		default:
			t.Logf("the api process on %s refused the revoked key %s after the revocation", public, took)
		}
	}

	// The api processes write what they saw when they stop.
	for _, p := range []*process{first, secondProc} {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		_ = p.cmd.Wait()
	}
	out, err = e.keysCommand("list", "--merchant", "m_revoke", "--api", "http://"+worker.internal)
	if err != nil {
		t.Fatalf("keys list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "revoked") {
		t.Errorf("keys list after the revocation:\n%s", out)
	}
	if fields := strings.Fields(lines[1]); len(fields) < 6 || fields[5] == "-" {
		t.Errorf("keys list shows no last use of a key used 10 times:\n%s", out)
	}
}

// keyStatus is the status of an authenticated GET on the public listener.
func (e *engine) keyStatus(public, key string) int {
	e.t.Helper()
	status, _ := e.call(http.MethodGet, "http://"+public+"/v1/webhook_subscriptions", key, nil)
	return status
}

// keysCommand runs `webhookd keys <args>` with the engine's environment
// and returns its stdout.
func (e *engine) keysCommand(args ...string) (string, error) {
	e.t.Helper()
	cmd := exec.Command(e.bin, append([]string{"keys"}, args...)...)
	cmd.Env = e.env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		e.t.Logf("webhookd keys %s: stderr:\n%s", strings.Join(args, " "), stderr.String())
	}
	return string(out), err
}

// keyID reads the id of the merchant's only key from `webhookd keys list`.
func (e *engine) keyID(merchant, api string) string {
	e.t.Helper()
	out, err := e.keysCommand("list", "--merchant", merchant, "--api", api)
	if err != nil {
		e.t.Fatalf("keys list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		e.t.Fatalf("keys list of a merchant with one key:\n%s", out)
	}
	return strings.Fields(lines[1])[0]
}
