package oauthtoken_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/oauthtoken"
	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/internal/testfixtures/tokenserver"
	"github.com/webhookd/webhookd/receiver/receivertest"
)

const (
	clientID     = "webhookd-prod"
	clientSecret = "cs_9f2c4e8a7b61d03f5e2a9c8b7d6e5f40"
	subscription = "ep_2Zp9wq7Vn3xK"
)

// rig is a token server and worker processes sharing one Redis.
type rig struct {
	clock  *receivertest.Clock
	server *tokenserver.Server
	// connect opens a client of the rig's Redis, as a process would.
	connect func() redis.UniversalClient
	workers []*oauthtoken.Tokens
}

// newRig starts a token server granting clientID with clientSecret, a
// Redis, and two worker processes' Tokens, each on its own Redis client
// and configured by configure.
func newRig(t *testing.T, configure ...func(*oauthtoken.Config)) *rig {
	t.Helper()
	srv := storetest.NewRedis(t)
	return newRigOn(t, func() redis.UniversalClient {
		return redis.NewClient(&redis.Options{Network: "unix", Addr: srv.Socket})
	}, configure...)
}

// newRigOn is newRig on the Redis connect opens clients of.
func newRigOn(t *testing.T, connect func() redis.UniversalClient, configure ...func(*oauthtoken.Config)) *rig {
	t.Helper()
	clk := receivertest.NewClock(time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC))
	r := &rig{clock: clk, server: tokenserver.New(t, clientID, clk.Now), connect: connect}
	r.server.Accept(clientSecret)
	for range 2 {
		r.workers = append(r.workers, r.newWorker(t, configure...))
	}
	return r
}

// newWorker is one more worker process's Tokens.
func (r *rig) newWorker(t *testing.T, configure ...func(*oauthtoken.Config)) *oauthtoken.Tokens {
	t.Helper()
	rc := r.connect()
	t.Cleanup(func() { rc.Close() })
	cfg := oauthtoken.Config{
		Redis: rc, HTTP: &http.Client{Timeout: 5 * time.Second}, MasterKey: masterKey(), Clock: r.clock,
		PollInterval: 2 * time.Millisecond,
	}
	for _, c := range configure {
		c(&cfg)
	}
	tokens, err := oauthtoken.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tokens
}

func masterKey() []byte { return []byte("0123456789abcdef0123456789abcdef") }

// credentials are the rig's client's, with a secret.
func (r *rig) credentials() oauthtoken.Credentials {
	return oauthtoken.Credentials{TokenURL: r.server.TokenURL(), ClientID: clientID, ClientSecret: clientSecret,
		Scopes: []string{"webhooks:receive", "events:write"}, Audience: "https://hooks.bank.example"}
}

// spread makes calls calls, spread over every worker and 10 goroutines
// each at once.
func (r *rig) spread(calls int, call func(w *oauthtoken.Tokens)) {
	const perWorker = 10
	var wg sync.WaitGroup
	for _, w := range r.workers {
		for range perWorker {
			wg.Go(func() {
				for range calls / (len(r.workers) * perWorker) {
					call(w)
				}
			})
		}
	}
	wg.Wait()
}

// tokensFrom makes calls Token calls over every worker and counts the
// tokens they got.
func (r *rig) tokensFrom(t *testing.T, c oauthtoken.Credentials, calls int) map[string]int {
	t.Helper()
	return r.countTokens(t, c, calls, func(src *oauthtoken.Source) (oauthtoken.Token, error) { return src.Token(t.Context()) })
}

// countTokens makes calls calls of get over every worker and counts the
// tokens they got.
func (r *rig) countTokens(t *testing.T, c oauthtoken.Credentials, calls int, get func(*oauthtoken.Source) (oauthtoken.Token, error)) map[string]int {
	t.Helper()
	var mu sync.Mutex
	got := map[string]int{}
	r.spread(calls, func(w *oauthtoken.Tokens) {
		tok, err := get(w.Source(subscription, c))
		if err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		got[tok.AccessToken]++
		mu.Unlock()
	})
	return got
}

// onlyToken is the one token of got, failing when there are others.
func onlyToken(t *testing.T, got map[string]int) string {
	t.Helper()
	if len(got) != 1 {
		t.Fatalf("workers got %d different tokens, want one: %v", len(got), got)
	}
	for tok := range got {
		return tok
	}
	return ""
}

func TestTwoWorkersShareOneToken(t *testing.T) {
	r := newRig(t)
	got := r.tokensFrom(t, r.credentials(), 200)
	onlyToken(t, got)
	if n := r.server.Requests(); n != 1 {
		t.Errorf("200 Token calls from 2 workers made %d token requests, want 1", n)
	}
	form := r.server.Form(0)
	if form["scope"][0] != "webhooks:receive events:write" || form["audience"][0] != "https://hooks.bank.example" {
		t.Errorf("scope %q and audience %q sent", form["scope"], form["audience"])
	}
}

func TestTokenIsRefreshedShortlyBeforeItExpires(t *testing.T) {
	cases := []struct {
		name      string
		expiresIn int
		advance   time.Duration
		refreshed bool
	}{
		{"an hour's token is kept until 30 s before expiry", 3600, 3569 * time.Second, false},
		{"an hour's token is replaced 30 s before expiry", 3600, 3571 * time.Second, true},
		{"a 20 s token is kept for half its life", 20, 9 * time.Second, false},
		{"a 20 s token is replaced after half its life", 20, 11 * time.Second, true},
		{"an expired token is replaced", 60, 2 * time.Minute, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t)
			r.server.Expire(c.expiresIn)
			first := onlyToken(t, r.tokensFrom(t, r.credentials(), 20))
			r.clock.Advance(c.advance)
			second := onlyToken(t, r.tokensFrom(t, r.credentials(), 200))
			wantRequests := 1
			if c.refreshed {
				wantRequests = 2
			}
			if n := r.server.Requests(); n != wantRequests || (first != second) != c.refreshed {
				t.Errorf("%d token requests, token replaced: %v; want %d, %v", n, first != second, wantRequests, c.refreshed)
			}
		})
	}
}

func TestConcurrent401sFetchOneNewToken(t *testing.T) {
	r := newRig(t)
	concurrent401sFetchOnce(t, r)
}

// Every key of a subscription is in one slot: the scripts and the
// transaction that stores a token each touch one slot.
func TestConcurrent401sFetchOneNewTokenOnRedisCluster(t *testing.T) {
	cluster := storetest.NewCluster(t)
	var addrs []string
	for _, n := range cluster.Nodes {
		addrs = append(addrs, n.Addr)
	}
	r := newRigOn(t, func() redis.UniversalClient { return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs}) })
	onlyToken(t, r.tokensFrom(t, r.credentials(), 200))
	concurrent401sFetchOnce(t, r)
}

// concurrent401sFetchOnce has every worker see a 401 for the current
// token at once, and checks that one new token is fetched.
func concurrent401sFetchOnce(t *testing.T, r *rig) {
	t.Helper()
	refused := tokenOf(t, r.workers[0], r.credentials())
	before := r.server.Requests()
	// Every worker's deliveries see the 401 at once: each invalidates
	// the refused token, then asks again.
	got := r.countTokens(t, r.credentials(), 20, func(src *oauthtoken.Source) (oauthtoken.Token, error) {
		if err := src.Invalidate(t.Context(), refused); err != nil {
			return oauthtoken.Token{}, err
		}
		return src.Token(t.Context())
	})
	if fresh := onlyToken(t, got); fresh == refused.AccessToken {
		t.Error("the refused token was served again")
	}
	if n := r.server.Requests() - before; n != 1 {
		t.Errorf("20 invalidations of one token made %d token requests, want 1", n)
	}
	// A late 401 for the old token leaves the new one alone.
	if err := r.workers[1].Source(subscription, r.credentials()).Invalidate(t.Context(), refused); err != nil {
		t.Fatal(err)
	}
	tokenOf(t, r.workers[1], r.credentials())
	if n := r.server.Requests() - before; n != 1 {
		t.Errorf("a late invalidation of the old token made a request: %d since the 401s", n)
	}
}

func TestOthersWaitForTheFetchingWorker(t *testing.T) {
	r := newRig(t)
	held := r.server.Holding()
	first := make(chan oauthtoken.Token)
	go func() { first <- tokenOf(t, r.workers[0], r.credentials()) }()
	<-held.Arrived
	// Worker 1 asks while worker 0's request is still at the endpoint.
	second := make(chan oauthtoken.Token)
	go func() { second <- tokenOf(t, r.workers[1], r.credentials()) }()
	close(held.Release)
	a, b := <-first, <-second
	if a.AccessToken != b.AccessToken || r.server.Requests() != 1 {
		t.Errorf("the waiting worker fetched its own token: %d requests", r.server.Requests())
	}
}

func TestHungTokenEndpointFailsWithinTheLockTTL(t *testing.T) {
	const lockTTL = 500 * time.Millisecond
	r := newRig(t, func(c *oauthtoken.Config) { c.LockTTL = lockTTL })
	held := r.server.Holding()
	t.Cleanup(func() { close(held.Release) })
	start := time.Now()
	errs := r.errorsFrom(t, r.credentials(), 20)
	if took := time.Since(start); took > 4*lockTTL {
		t.Errorf("a hung token endpoint held its callers for %v", took)
	}
	// The fetching worker's error, and the one it shared with the others,
	// in the merchant's words.
	for _, err := range errs {
		var e *oauthtoken.Error
		if !errors.As(err, &e) || e.Status != 0 || !strings.Contains(err.Error(), "timed out") {
			t.Fatalf("error %v, want the fetch's deadline and no status", err)
		}
	}
	if n := r.server.Requests(); n != 1 {
		t.Errorf("%d requests to a hung endpoint, want 1", n)
	}
}

func TestChangedCredentialsNeverGetTheOldToken(t *testing.T) {
	r := newRig(t)
	const rotated = "cs_1b8e0d4f6a2c9e7b5d3f1a0c8e6b4d2f"
	r.server.Accept(rotated)
	before := r.credentials()
	after := before
	after.ClientSecret = rotated
	old := tokenOf(t, r.workers[0], before)
	if tokenOf(t, r.workers[1], after).AccessToken == old.AccessToken {
		t.Error("a new secret was served the old secret's token")
	}
	wider := before
	wider.Scopes = append(wider.Scopes, "admin")
	if tokenOf(t, r.workers[1], wider).AccessToken == old.AccessToken {
		t.Error("other scopes were served the old token")
	}
	if n := r.server.Requests(); n != 3 {
		t.Errorf("%d token requests for three sets of credentials, want 3", n)
	}
}

func TestSealedTokenOpensOnlyUnderItsOwnKey(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	rc := r.connect()
	t.Cleanup(func() { rc.Close() })
	mine := tokenOf(t, r.workers[0], r.credentials())
	theirs := r.workers[0].Source("ep_other", r.credentials())
	if _, err := theirs.Token(ctx); err != nil {
		t.Fatal(err)
	}
	// Whoever can write to Redis copies this subscription's sealed token
	// over the other's.
	mineKey := onlyKey(t, rc, "webhookd:oauth:{"+subscription+"}:*:token")
	theirKey := onlyKey(t, rc, "webhookd:oauth:{ep_other}:*:token")
	if err := rc.Copy(ctx, mineKey, theirKey, 0, true).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := theirs.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.AccessToken == mine.AccessToken {
		t.Error("a token sealed for one subscription was served for another")
	}
}

func TestFailingTokenEndpointReportsItsStatus(t *testing.T) {
	cases := []struct {
		name       string
		status     int
		secret     string
		wantStatus int
		wantCode   string
	}{
		{"server error", http.StatusServiceUnavailable, clientSecret, 503, ""},
		{"not found", http.StatusNotFound, clientSecret, 404, ""},
		{"a wrong secret", 0, "cs_wrong0000000000000000000000000", 401, "invalid_client"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t)
			r.server.Failing(c.status)
			creds := r.credentials()
			creds.ClientSecret = c.secret
			errs := r.errorsFrom(t, creds, 200)
			var e *oauthtoken.Error
			if !errors.As(errs[0], &e) || e.Status != c.wantStatus || e.Code != c.wantCode || oauthtoken.StatusOf(errs[0]) != c.wantStatus {
				t.Fatalf("error %v, want status %d code %q", errs[0], c.wantStatus, c.wantCode)
			}
			if n := r.server.Requests(); n != 1 {
				t.Errorf("200 Token calls on a failing endpoint made %d requests, want 1 shared failure", n)
			}
			// Once the failure is a few seconds old, the endpoint is asked
			// again.
			r.server.Failing(0)
			r.server.Accept(c.secret)
			r.clock.Advance(6 * time.Second)
			onlyToken(t, r.tokensFrom(t, creds, 20))
		})
	}
}

func TestUnreachableTokenEndpoint(t *testing.T) {
	r := newRig(t)
	r.server.HTTP.Close()
	_, err := r.workers[0].Source(subscription, r.credentials()).Token(t.Context())
	var e *oauthtoken.Error
	if !errors.As(err, &e) || e.Status != 0 || errors.Unwrap(err) == nil {
		t.Fatalf("error %#v, want an *oauthtoken.Error with status 0 and its cause", err)
	}
	if !strings.Contains(err.Error(), "connect") {
		t.Errorf("error %q does not say the endpoint could not be reached", err)
	}
}

// errorsFrom makes calls Token calls over every worker, each expected to
// fail, and returns the errors.
func (r *rig) errorsFrom(t *testing.T, c oauthtoken.Credentials, calls int) []error {
	t.Helper()
	var mu sync.Mutex
	var errs []error
	r.spread(calls, func(w *oauthtoken.Tokens) {
		_, err := w.Source(subscription, c).Token(t.Context())
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	})
	for _, err := range errs {
		if err == nil {
			t.Fatal("a Token call on a failing endpoint succeeded")
		}
	}
	return errs
}

// tokenOf is w's token for c, failing the test on an error.
func tokenOf(t *testing.T, w *oauthtoken.Tokens, c oauthtoken.Credentials) oauthtoken.Token {
	t.Helper()
	tok, err := w.Source(subscription, c).Token(context.Background())
	if err != nil {
		t.Error(err)
	}
	return tok
}

// onlyKey is the one Redis key matching pattern.
func onlyKey(t *testing.T, rc redis.UniversalClient, pattern string) string {
	t.Helper()
	keys, err := rc.Keys(t.Context(), pattern).Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys %s: %v, %v", pattern, keys, err)
	}
	return keys[0]
}

// TestAskedForTokenAsksAfresh: within FailureTTL of a failed fetch, an
// automatic call gets the shared failure without a request; a call a
// person asked for (TokenAsked) asks the endpoint again and, the endpoint
// fixed, gets a token every worker then shares; a failure of an asked-for
// fetch answers the asked-for calls that follow (a recover of many
// deliveries asks once), and the automatic ones.
func TestAskedForTokenAsksAfresh(t *testing.T) {
	r := newRig(t)
	creds := r.credentials()
	automatic := func(w int) (oauthtoken.Token, error) {
		return r.workers[w].Source(subscription, creds).Token(t.Context())
	}
	asked := func(w int) (oauthtoken.Token, error) {
		return r.workers[w].Source(subscription, creds).TokenAsked(t.Context())
	}
	steps := []struct {
		name string
		// failing is the endpoint's status from this step on (0: grants).
		failing int
		get     func(w int) (oauthtoken.Token, error)
		worker  int
		// wantOK: a token; else the endpoint's 503.
		wantOK       bool
		wantRequests int
	}{
		{"the endpoint fails an automatic attempt", http.StatusServiceUnavailable, automatic, 0, false, 1},
		{"another automatic attempt gets the shared failure", http.StatusServiceUnavailable, automatic, 1, false, 1},
		{"an asked-for attempt asks again, and fails", http.StatusServiceUnavailable, asked, 1, false, 2},
		{"the next asked-for attempt gets that failure", 0, asked, 0, false, 2},
		{"and so does an automatic one", 0, automatic, 1, false, 2},
		{"after FailureTTL an automatic attempt asks, and fails", http.StatusServiceUnavailable, automatic, 0, false, 3},
		{"the endpoint fixed, an asked-for attempt asks and gets a token", 0, asked, 1, true, 4},
		{"which every attempt shares", 0, automatic, 0, true, 4},
	}
	for i, st := range steps {
		if i == 5 {
			r.clock.Advance(6 * time.Second)
		}
		r.server.Failing(st.failing)
		tok, err := st.get(st.worker)
		if st.wantOK && (err != nil || tok.AccessToken == "") || !st.wantOK && oauthtoken.StatusOf(err) != http.StatusServiceUnavailable {
			t.Fatalf("%s: token %q, error %v", st.name, tok.AccessToken, err)
		}
		if n := r.server.Requests(); n != st.wantRequests {
			t.Fatalf("%s: %d requests to the endpoint, want %d", st.name, n, st.wantRequests)
		}
	}
}
