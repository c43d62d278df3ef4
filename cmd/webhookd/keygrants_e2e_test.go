package main

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store/storetest"
)

// TestRevocationEndsSessionsAndListeners: two `webhookd api` processes and
// a worker. A key mints a portal session and opens two `webhookd listen`
// connections, one on each api process; another key of the merchant opens
// a third. Once `webhookd keys revoke` returns, within a second: the
// key's session gets 401 on both processes and both of its connections
// are closed (the commands then exit, refused). One of them has nothing
// to relay then, so its closing is the revocation's signal's doing, not
// a delivery's or a heartbeat's (every 10 s). The delivery the other was
// retrying ends listener_closed, and no event published after the
// revocation reaches either, while the other key's listener gets every
// one. Everything is polled against a deadline, never slept on.
func TestRevocationEndsSessionsAndListeners(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	e := newEngine(t, "WEBHOOKD_RETRY_SCHEDULE="+strings.TrimSuffix(strings.Repeat("300ms,", 100), ","))
	first := e.spawn("api", e.internal)
	second := *e
	second.public = storetest.FreeAddr(t)
	second.env = append(slices.Clip(e.env), "WEBHOOKD_LISTEN="+second.public)
	second.spawn("api", storetest.FreeAddr(t))
	e.spawn("worker", storetest.FreeAddr(t))
	publics := []string{e.public, second.public}

	const merchant = "m_grants"
	doomed, kept := e.keysCreate(merchant), e.keysCreate(merchant)
	mint := func(key string) string {
		t.Helper()
		status, s := e.call(http.MethodPost, "http://"+e.public+"/v1/portal_sessions", key, map[string]any{})
		if status != http.StatusCreated {
			t.Fatalf("mint a portal session: %d %v", status, s)
		}
		return s["token"].(string)
	}
	session, keptSession := mint(doomed), mint(kept)
	for _, public := range publics {
		for _, token := range []string{session, keptSession} {
			if status := e.keyStatus(public, token); status != http.StatusOK {
				t.Fatalf("a fresh session on %s: %d", public, status)
			}
		}
	}

	// A fails every delivery, so that one stays pending, retried, when
	// the key is revoked; the others succeed.
	localA := newLocalServer(t, func(int) int { return http.StatusInternalServerError })
	ok := func(int) int { return http.StatusOK }
	localB, localKept := newLocalServer(t, ok), newLocalServer(t, ok)
	cmdA := e.runCLI("listen", "--api", "http://"+e.public, "--api-key", doomed, "--forward-to", localA.URL)
	cmdB := e.runCLI("listen", "--api", "http://"+second.public, "--api-key", doomed, "--forward-to", localB.URL)
	cmdKept := e.runCLI("listen", "--api", "http://"+second.public, "--api-key", kept, "--forward-to", localKept.URL)
	listenerA, secret := cmdA.listening(t)
	listenerB, _ := cmdB.listening(t)
	_, keptSecret := cmdKept.listening(t)
	localA.setSecret(secret)
	localB.setSecret(secret)
	localKept.setSecret(keptSecret)

	retried := e.publish(merchant)
	waitFor(t, "the first event to reach every listener", 30*time.Second, func() bool {
		return localA.got(retried) >= 2 && localB.got(retried) == 1 && localKept.got(retried) == 1
	})

	id := e.keyIDByPrefix(merchant, doomed, "http://"+first.internal)
	out, err := e.keysCommand("revoke", "--merchant", merchant, "--key", id, "--api", "http://"+first.internal)
	revoked := time.Now()
	if err != nil || !strings.HasPrefix(out, "revoked key "+id) {
		t.Fatalf("keys revoke: %v\n%s", err, out)
	}

	type check struct {
		what string
		done func() bool
	}
	checks := []check{
		{"the session refused on " + e.public, func() bool { return e.keyStatus(e.public, session) == http.StatusUnauthorized }},
		{"the session refused on " + second.public, func() bool { return e.keyStatus(second.public, session) == http.StatusUnauthorized }},
		{"the connection on " + e.public + " closed", func() bool { return strings.Contains(cmdA.errOut.String(), "Connection lost") }},
		{"the connection on " + second.public + " closed", func() bool { return strings.Contains(cmdB.errOut.String(), "Connection lost") }},
	}
	took := map[string]time.Duration{}
	eventually(10*revocationDeadline-time.Since(revoked), func() bool {
		for _, c := range checks {
			if _, done := took[c.what]; !done && c.done() {
				took[c.what] = time.Since(revoked)
			}
		}
		return len(took) == len(checks)
	}) // the checks below name what did not happen in time
	for _, c := range checks {
		d, done := took[c.what]
		switch {
		case !done:
			t.Errorf("%s: not after %s", c.what, 10*revocationDeadline)
		case d > revocationDeadline:
			t.Errorf("%s: %s after the revocation, more than %s", c.what, d, revocationDeadline)
		default:
			t.Logf("%s: %s after the revocation", c.what, d)
		}
	}
	// Reconnecting, the commands are refused and exit.
	for _, c := range []*cli{cmdA, cmdB} {
		select {
		case err := <-c.done:
			c.done <- err
			if err == nil || !strings.Contains(c.errOut.String(), "401") {
				t.Errorf("webhookd listen exited %v, want refused with a 401:\n%s", err, c.errOut)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("webhookd listen still runs 10 s after its key was revoked:\n%s", c.errOut)
		}
	}
	for _, public := range publics {
		if status := e.keyStatus(public, keptSession); status != http.StatusOK {
			t.Errorf("the other key's session on %s after the revocation: %d", public, status)
		}
	}

	// Published after the revocation: the kept listener gets both, the
	// revoked ones nothing. The marker, last, says the engine is past the
	// first.
	after, marker := e.publish(merchant), e.publish(merchant)
	waitFor(t, "the events published after the revocation to reach the other key's listener", 30*time.Second, func() bool {
		return localKept.got(after) == 1 && localKept.got(marker) == 1
	})
	for _, local := range []*localServer{localA, localB} {
		if local.got(after) != 0 || local.got(marker) != 0 {
			t.Errorf("a revoked key's listener got an event published after the revocation (%d, %d)", local.got(after), local.got(marker))
		}
	}
	if d := e.delivery(kept, after); d["subscription_id"] == listenerA || d["subscription_id"] == listenerB {
		t.Errorf("the event after the revocation was delivered to a revoked key's listener: %v", d)
	}

	// The delivery A was retrying has stopped; B's had succeeded.
	waitFor(t, "the retried delivery to end listener_closed", 30*time.Second, func() bool {
		status, list := e.call(http.MethodGet, "http://"+e.public+"/v1/webhook_deliveries?event_id="+retried, kept, nil)
		if status != http.StatusOK {
			t.Fatalf("deliveries of %s: %d %v", retried, status, list)
		}
		stopped := 0
		for _, x := range list["data"].([]any) {
			d := x.(map[string]any)
			if d["subscription_id"] != listenerA {
				continue
			}
			_, full := e.call(http.MethodGet, "http://"+e.public+"/v1/webhook_deliveries/"+d["id"].(string), kept, nil)
			attempts := attemptsOf(full)
			if full["status"] == "failed" && len(attempts) > 0 && attempts[len(attempts)-1]["error"] == "listener_closed" {
				stopped++
			}
		}
		return stopped == 1
	})
}

// keyIDByPrefix reads from `webhookd keys list` the id of the merchant's key
// whose prefix key starts with.
func (e *engine) keyIDByPrefix(merchant, key, api string) string {
	e.t.Helper()
	out, err := e.keysCommand("list", "--merchant", merchant, "--api", api)
	if err != nil {
		e.t.Fatalf("keys list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(key, f[1]) {
			return f[0]
		}
	}
	e.t.Fatalf("no key of %s is %s…:\n%s", merchant, key[:14], out)
	return ""
}
