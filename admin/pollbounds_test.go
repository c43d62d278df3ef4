package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/internal/merchants"
	"github.com/webhookd/webhookd/internal/pollcli"
)

// longPoll is one long poll's answer.
type longPoll struct {
	status int
	page   pollcli.Page
	body   string
	err    error
}

// startLongPoll reads sub's line with q in the background, over a real
// HTTP connection, and answers on the returned channel.
func (h *harness) startLongPoll(ctx context.Context, key, subID string, q url.Values) <-chan longPoll {
	done := make(chan longPoll, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet,
			h.public.URL+"/v1/webhook_subscriptions/"+subID+"/poll?"+q.Encode(), nil)
		if err != nil {
			done <- longPoll{err: err}
			return
		}
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- longPoll{err: err}
			return
		}
		defer resp.Body.Close()
		var raw json.RawMessage
		a := longPoll{status: resp.StatusCode}
		if a.err = json.NewDecoder(resp.Body).Decode(&raw); a.err == nil {
			a.body = string(raw)
			if a.status == http.StatusOK {
				a.err = json.Unmarshal(raw, &a.page)
			}
		}
		done <- a
	}()
	return done
}

// redisClients counts the connections of the harness's Redis server.
func (h *harness) redisClients() int {
	h.t.Helper()
	list, err := h.redis.ClientList(h.t.Context()).Result()
	if err != nil {
		h.t.Fatal(err)
	}
	return len(strings.Split(strings.TrimSpace(list), "\n"))
}

// waitingPolls counts the poll channels subscribed in Redis.
func (h *harness) waitingPolls() int {
	h.t.Helper()
	chans, err := h.redis.PubSubChannels(h.t.Context(), "webhookd:poll:*").Result()
	if err != nil {
		h.t.Fatal(err)
	}
	return len(chans)
}

// TestPollLongPollsShareOneRedisConnection: 200 long polls at once, on
// 200 subscriptions of 10 merchants, hold a number of Redis connections
// that does not grow with them (one shared subscription, not one each: a
// few merchants could otherwise take every connection Redis accepts; and
// the API's pool, 20 here), and each is
// answered, well before its wait, with the event its merchant published.
func TestPollLongPollsShareOneRedisConnection(t *testing.T) {
	t.Parallel()
	h := newPollHarness(t)
	const merchants, perMerchant = 10, 20
	type poller struct{ key, merchant, sub, iterator string }
	var polls []poller
	for m := range merchants {
		id := fmt.Sprintf("m%d", m)
		key := h.merchant(id)
		for range perMerchant {
			sub := h.subscribePoll(key, nil)
			polls = append(polls, poller{key: key, merchant: id, sub: sub.ID, iterator: h.poll(key, sub.ID, nil).Iterator})
		}
	}
	before := h.redisClients()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	answers := make([]<-chan longPoll, len(polls))
	for i, p := range polls {
		answers[i] = h.startLongPoll(ctx, p.key, p.sub, url.Values{"iterator": {p.iterator}, "wait": {"30"}})
	}
	if !eventually(20*time.Second, func() bool { return h.waitingPolls() == len(polls) }) {
		t.Fatalf("%d of %d long polls waiting on their channel", h.waitingPolls(), len(polls))
	}
	// The shared subscription, and the API's pool: each long poll asks
	// Redis for its merchant's place, a question of a millisecond on a
	// pooled connection, so that the pool may grow to its size.
	slack := 1 + h.redis.Options().PoolSize
	if during := h.redisClients(); during > before+slack {
		t.Fatalf("%d long polls took %d Redis connections (%d before them), want at most %d more",
			len(polls), during-before, before, slack)
	}
	published := time.Now()
	events := map[string]string{}
	for m := range merchants {
		id := fmt.Sprintf("m%d", m)
		events[id] = h.publish(id, "payout.paid", fmt.Sprintf(`{"id":"po_%d"}`, m)).ID
	}
	for i, p := range polls {
		a := <-answers[i]
		if a.err != nil || a.status != http.StatusOK {
			t.Fatalf("long poll %d: %d %v %s", i, a.status, a.err, a.body)
		}
		if len(a.page.Data) != 1 || a.page.Data[0].ID != events[p.merchant] {
			t.Fatalf("long poll %d of %s answered %+v, want its merchant's event %s", i, p.merchant, a.page, events[p.merchant])
		}
	}
	if took := time.Since(published); took > 20*time.Second {
		t.Fatalf("the long polls were answered %v after the publishes: not woken by them", took)
	}
}

// requestsByCode reads webhookd_http_requests_total of the routes whose
// pattern ends with suffix, by status code.
func requestsByCode(t *testing.T, h *harness, suffix string) map[string]float64 {
	t.Helper()
	families, err := h.cfg.Gatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "webhookd_http_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			var route, code string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "route":
					route = l.GetValue()
				case "code":
					code = l.GetValue()
				}
			}
			if strings.HasSuffix(route, suffix) {
				codes[code] += m.GetCounter().GetValue()
			}
		}
	}
	return codes
}

// TestPollClientGoneIsNoError: a client that closes its long poll is
// counted as 499 (nginx's client closed request), not as a 500, and
// leaves no error in the log: nothing went wrong on the engine's side.
func TestPollClientGoneIsNoError(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	h := newPollHarness(t, func(cfg *admin.Config) {
		cfg.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	key := h.merchant("m1")
	sub := h.subscribePoll(key, nil)
	iterator := h.poll(key, sub.ID, nil).Iterator
	ctx, cancel := context.WithCancel(t.Context())
	answer := h.startLongPoll(ctx, key, sub.ID, url.Values{"iterator": {iterator}, "wait": {"30"}})
	if !eventually(5*time.Second, func() bool { return h.waitingPolls() == 1 }) {
		t.Fatal("the long poll never waited")
	}
	cancel()
	if a := <-answer; a.err == nil {
		t.Fatalf("the closed long poll was answered: %d %s", a.status, a.body)
	}
	if !eventually(10*time.Second, func() bool { return requestsByCode(t, h, "/poll")["499"] == 1 }) {
		t.Fatalf("poll requests by code %v, want the closed one counted as 499", requestsByCode(t, h, "/poll"))
	}
	if got := requestsByCode(t, h, "/poll")["500"]; got != 0 {
		t.Errorf("%v closed long polls counted as 500", got)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"level":"ERROR"`) || strings.Contains(line, "internal error") {
			t.Errorf("the closed long poll logged an error: %s", line)
		}
	}
}

// TestHeldRequestsBoundedPerMerchant: a merchant holds at most
// MaxLongPollsPerMerchant long polls and MaxListenersPerMerchant listen
// connections at once; one more is 429 rate_limit_exceeded with
// Retry-After, in the spec's format, while another merchant opens its own
// and a read that does not wait is answered. Once one ends, its place is
// taken again. The places are counted across API processes sharing Redis.
func TestHeldRequestsBoundedPerMerchant(t *testing.T) {
	t.Parallel()
	const bound = 2
	h := newPollHarness(t, func(cfg *admin.Config) {
		cfg.MaxLongPollsPerMerchant = bound
		cfg.MaxListenersPerMerchant = bound
	})
	// holder opens held requests of one kind: hold returns once the
	// request is held, with what ends it; try makes one more and answers
	// its status, Retry-After and body.
	type holder struct {
		name string
		hold func(t *testing.T, key string) (end func())
		try  func(t *testing.T, key string) (status int, retryAfter, body string)
	}
	longPoll := func(t *testing.T, key string) (func(), subscription) {
		sub := h.subscribePoll(key, nil)
		ctx, cancel := context.WithCancel(t.Context())
		h.startLongPoll(ctx, key, sub.ID, url.Values{"wait": {"30"}})
		channel := "webhookd:poll:{" + sub.ID + "}"
		if !eventually(5*time.Second, func() bool {
			n, err := h.redis.PubSubNumSub(t.Context(), channel).Result()
			return err == nil && n[channel] == 1
		}) {
			t.Fatal("the long poll never waited")
		}
		return cancel, sub
	}
	for _, tc := range []holder{
		{name: "long polls",
			hold: func(t *testing.T, key string) func() { end, _ := longPoll(t, key); return end },
			try: func(t *testing.T, key string) (int, string, string) {
				sub := h.subscribePoll(key, nil)
				// An empty line: answered 200 after its wait, or refused.
				r := h.pollRaw(key, sub.ID, url.Values{"wait": {"1"}})
				return r.Status, r.Header.Get("Retry-After"), string(r.Body)
			}},
		{name: "listen connections",
			hold: func(t *testing.T, key string) func() {
				conn, _ := h.dialListen(t.Context(), key, "")
				return func() { conn.CloseNow() }
			},
			try: func(t *testing.T, key string) (int, string, string) {
				conn, resp, err := websocket.Dial(t.Context(), h.public.URL+"/v1/listen", &websocket.DialOptions{
					HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}})
				if err == nil {
					conn.CloseNow()
					return http.StatusSwitchingProtocols, "", ""
				}
				if resp == nil {
					t.Fatalf("dial /v1/listen: %v", err)
				}
				body, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, resp.Header.Get("Retry-After"), string(body)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, other := h.merchant("m_"+strings.ReplaceAll(tc.name, " ", "_")), h.merchant("o_"+strings.ReplaceAll(tc.name, " ", "_"))
			var ends []func()
			for range bound {
				ends = append(ends, tc.hold(t, key))
			}
			status, retryAfter, body := tc.try(t, key)
			var e struct {
				Category, Code string
			}
			_ = json.Unmarshal([]byte(body), &e)
			if status != http.StatusTooManyRequests || e.Category != "rate_limit_error" || e.Code != "rate_limit_exceeded" || retryAfter == "" {
				t.Fatalf("one more than %d: %d Retry-After %q %s, want 429 rate_limit_exceeded with Retry-After", bound, status, retryAfter, body)
			}
			if status, _, body := tc.try(t, other); status == http.StatusTooManyRequests {
				t.Fatalf("another merchant refused: %s", body)
			}
			ends[0]()
			if !eventually(10*time.Second, func() bool { s, _, _ := tc.try(t, key); return s != http.StatusTooManyRequests }) {
				t.Fatal("the place of a held request that ended was never given again")
			}
			for _, end := range ends[1:] {
				end()
			}
		})
	}
	// Another API process on the same Redis counts the same places.
	t.Run("across processes", func(t *testing.T) {
		cfg := h.cfg
		cfg.Registerer, cfg.Gatherer = nil, nil
		srv, err := admin.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		other := httptest.NewServer(srv.Public())
		defer other.Close()
		key := h.merchant("m_processes")
		for range bound {
			end, _ := longPoll(t, key)
			defer end()
		}
		sub := h.subscribePoll(key, nil)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet,
			other.URL+"/v1/webhook_subscriptions/"+sub.ID+"/poll?wait=1", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("a long poll on another process beside %d on the first: %d, want 429", bound, resp.StatusCode)
		}
	})
	// A read that does not wait holds nothing and is never refused.
	key := h.merchant("m_reads")
	end, sub := longPoll(t, key)
	defer end()
	endSecond, _ := longPoll(t, key)
	defer endSecond()
	if r := h.pollRaw(key, sub.ID, url.Values{"wait": {"0"}}); r.Status != http.StatusOK {
		t.Fatalf("a read without wait at the bound: %d %s", r.Status, r.Body)
	}
}

// FuzzPollQuery sends arbitrary query strings (iterator, since, limit,
// wait, and anything else) to a poll subscription's read: no input is
// answered with a 5xx; a refusal is spec 7's error naming the parameter;
// an accepted one is a page no longer than its limit, with an iterator. A
// query that would wait (wait in range) is left out: it would hold the
// input for up to 30 s, and its parameters are the ones tried without it.
func FuzzPollQuery(f *testing.F) {
	h := startHarness(f, withPoller(f))
	key, err := merchants.NewKeyIssuer(h.store.APIKeys, "sandbox", admin.DefaultVersion).Issue(context.Background(), "m_fuzz",
		[]string{admin.ScopeRead, admin.ScopeWrite})
	if err != nil {
		f.Fatal(err)
	}
	// The subscription and its events are made by the first input, with
	// its t (the harness's helpers need one); ITER in an input stands for
	// an iterator of the subscription's.
	var once sync.Once
	var sub, iterator string
	for _, q := range []string{
		"", "limit=1", "limit=250", "limit=251", "limit=0", "limit=-1", "limit=1e3", "limit=%ff", "limit=99999999999999999999",
		"wait=0", "wait=31", "wait=-1", "wait=1.5", "wait=%00", "wait=99999999999999999999",
		"iterator=", "iterator=nope", "iterator=ITER", "iterator=ITERx", "iterator=xITER",
		"since=2026-01-01T00:00:00Z", "since=1999-01-01T00:00:00Z", "since=2999-01-01T00:00:00Z", "since=%ff", "since=yesterday",
		"since=2026-01-01T00:00:00Z&iterator=ITER", "limit=1&limit=2", "%zz=1", "unknown=1", "=0",
		"limit=5;wait=0", "iterator=%00", "since=", "limit=", "wait=",
	} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, query string) {
		if strings.ContainsFunc(query, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '#' }) {
			return // not a request line: net/http refuses it before any handler
		}
		h := h.with(t)
		once.Do(func() {
			sub = h.subscribePoll(key, nil).ID
			for i := range 3 {
				h.publish("m_fuzz", "payout.paid", fmt.Sprintf(`{"id":"po_%d"}`, i))
			}
			iterator = h.poll(key, sub, url.Values{"limit": {"1"}}).Iterator
		})
		query = strings.ReplaceAll(query, "ITER", url.QueryEscape(iterator))
		v, _ := url.ParseQuery(query)
		if n, err := strconv.Atoi(v.Get("wait")); err == nil && n > 0 && n <= 30 {
			return
		}
		r := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + sub + "/poll?" + query, Key: key})
		noServerError(t, r)
		if r.Status != http.StatusOK {
			checkRefusal(t, r, false)
			return
		}
		limit := 50
		if n, err := strconv.Atoi(v.Get("limit")); err == nil {
			limit = n
		}
		page := decodeAs[pollcli.Page](t, r.Body)
		if len(page.Data) > limit || page.Iterator == "" {
			t.Fatalf("%d items for limit %d, iterator %q", len(page.Data), limit, page.Iterator)
		}
	})
}
