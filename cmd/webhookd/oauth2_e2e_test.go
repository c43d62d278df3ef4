package main

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/internal/testfixtures/tokenserver"
)

// TestOAuth2TokenSharedByWorkers: two worker processes deliver 200 events
// to an endpoint that takes bearer tokens from its own authorization
// server, and fetch the token once between them; a token the endpoint
// refuses (401) is replaced and the delivery goes through in the same
// attempt; a short-lived token is replaced as it expires; a failing token
// endpoint fails the attempts with oauth_token and its status; no process
// logs the client secret or a token.
func TestOAuth2TokenSharedByWorkers(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	const clientID, secret = "webhookd-e2e", "e2e-client-secret-do-not-log"
	e := newEngine(t, "WEBHOOKD_WORKER_CONCURRENCY=16")
	server := tokenserver.New(t, clientID, time.Now)
	server.Accept(secret)
	endpoint := server.NewEndpoint(t)
	procs := []*process{e.spawn("api", e.internal), e.spawn("worker", storetest.FreeAddr(t)), e.spawn("worker", storetest.FreeAddr(t))}
	key := e.keysCreate("m_oauth")
	status, sub := e.call(http.MethodPost, "http://"+e.public+"/v1/webhook_subscriptions", key, map[string]any{
		"url": endpoint.URL, "events": []string{"*"}, "authentication": map[string]any{"type": "oauth2_client_credentials",
			"token_url": server.TokenURL(), "client_id": clientID, "client_secret": secret, "scopes": []string{"webhooks"}}})
	if status != http.StatusCreated {
		t.Fatalf("create subscription: %d %v", status, sub)
	}
	publish := func(n int) []string {
		var ids []string
		for len(ids) < n {
			batch := make([]map[string]any, 0, 100)
			for i := 0; i < min(100, n-len(ids)); i++ {
				batch = append(batch, map[string]any{"merchant_id": "m_oauth", "type": "payout.paid", "payload": map[string]any{"n": i}})
			}
			ids = append(ids, e.publishBatch(batch)...)
		}
		return ids
	}
	delivered := func(want int64, what string) {
		t.Helper()
		if !eventually(60*time.Second, func() bool { return endpoint.Accepted() >= want }) {
			t.Fatalf("%s: the endpoint accepted %d of %d deliveries (refused %d, %d token requests, refusals %v)",
				what, endpoint.Accepted(), want, endpoint.Refused(), server.Requests(), server.Refused())
		}
	}
	revokeAll := func() {
		for i := 1; i <= server.Requests(); i++ {
			server.Revoke(fmt.Sprintf("token-%d-%s", i, clientID))
		}
	}

	publish(200)
	delivered(200, "200 deliveries")
	if n := server.Requests(); n < 1 || n > 2 || endpoint.Refused() != 0 {
		t.Fatalf("200 deliveries by two workers: %d token requests and %d refusals, want one or two and none", n, endpoint.Refused())
	}

	// The authorization server revokes the token and makes its next ones
	// short-lived: the endpoint refuses the old one (401), and the
	// deliveries go through with a new one.
	server.Expire(2)
	before := server.Requests()
	revokeAll()
	publish(50)
	delivered(250, "after the token was revoked")
	if refused, n := endpoint.Refused(), server.Requests()-before; refused < 1 || n < 1 || n > 2 {
		t.Fatalf("after a revoked token: %d refusals and %d token requests, want some and one or two", refused, n)
	}

	// A 2 s token is replaced before it expires, while deliveries go on.
	before = server.Requests()
	sent := int64(250)
	if !eventually(30*time.Second, func() bool {
		sent += int64(len(publish(2)))
		return server.Requests() >= before+2
	}) {
		t.Fatalf("short-lived tokens were not replaced: %d token requests since", server.Requests()-before)
	}
	delivered(sent, "with short-lived tokens")

	// The token endpoint fails: attempts fail with oauth_token and its
	// status.
	server.Failing(http.StatusBadGateway)
	revokeAll()
	failing := publish(1)[0]
	var attempts []any
	if !eventually(30*time.Second, func() bool {
		status, list := e.call(http.MethodGet, "http://"+e.public+"/v1/webhook_deliveries?event_id="+failing, key, nil)
		if data, _ := list["data"].([]any); status == http.StatusOK && len(data) == 1 {
			d := data[0].(map[string]any)
			attempts, _ = d["attempts"].([]any)
			return d["status"] == "failed"
		}
		return false
	}) {
		t.Fatalf("the delivery with a failing token endpoint did not fail; attempts %v", attempts)
	}
	for _, a := range attempts {
		a := a.(map[string]any)
		if a["error"] != "oauth_token" || a["http_status"] != float64(http.StatusBadGateway) {
			t.Fatalf("attempt %v: want error oauth_token and http_status 502", a)
		}
	}

	tokenPattern := regexp.MustCompile(`token-\d+-` + clientID)
	for _, p := range procs {
		logs := p.logs.String()
		if logs == "" || strings.Contains(logs, secret) || tokenPattern.MatchString(logs) {
			t.Fatalf("webhookd %s logged the client secret or a token (or nothing):\n%s", p.cmd.Args[1], logs)
		}
	}
}
