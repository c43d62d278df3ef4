package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhookd/webhookd/internal/store/storetest"
)

// controlledReceiver is a real endpoint that verifies every request with
// the published Standard Webhooks library and our own verifier, notes what
// it saw, and answers as fail says.
type controlledReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	secret string
	fail   func(req *http.Request, body []byte) bool
	seen   []arrival
	bad    []string
}

// arrival is one request a controlledReceiver answered.
type arrival struct {
	at       time.Time
	id       string
	key      string
	sequence int64
	body     []byte
	ok       bool
}

func newControlledReceiver(t *testing.T, fail func(req *http.Request, body []byte) bool) *controlledReceiver {
	c := &controlledReceiver{fail: fail}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		at := time.Now()
		c.mu.Lock()
		secret := c.secret
		c.mu.Unlock()
		wh, err := standardwebhooks.NewWebhook(secret)
		if err == nil {
			err = wh.Verify(body, req.Header)
		}
		if err == nil {
			err = verifyWithReceiver(secret, req.Header, body, at)
		}
		if err != nil {
			c.mu.Lock()
			c.bad = append(c.bad, err.Error())
			c.mu.Unlock()
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		a := arrival{at: at, id: req.Header.Get("webhook-id"), key: req.Header.Get("webhook-ordering-key"), body: body, ok: true}
		if seq := req.Header.Get("webhook-sequence"); seq != "" {
			a.sequence, _ = strconv.ParseInt(seq, 10, 64)
		}
		if c.fail != nil && c.fail(req, body) {
			a.ok = false
		}
		c.mu.Lock()
		c.seen = append(c.seen, a)
		c.mu.Unlock()
		if !a.ok {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(c.Close)
	return c
}

// arrivals is a copy of what the receiver saw.
func (c *controlledReceiver) arrivals() []arrival {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.seen)
}

// subscribeWith creates a subscription with extra fields and gives the
// receiver its secret.
func (e *engine) subscribeWith(key string, c *controlledReceiver, fields map[string]any) string {
	e.t.Helper()
	body := map[string]any{"url": c.URL + "/hook", "events": []string{"*"}}
	for k, v := range fields {
		body[k] = v
	}
	status, sub := e.call("POST", "http://"+e.public+"/v1/webhook_subscriptions", key, body)
	if status != http.StatusCreated {
		e.t.Fatalf("create subscription: %d %v", status, sub)
	}
	c.mu.Lock()
	c.secret, _ = sub["secret"].(string)
	c.mu.Unlock()
	return sub["id"].(string)
}

// publishBatch publishes events in one batch, in order, and returns their
// ids.
func (e *engine) publishBatch(events []map[string]any) []string {
	e.t.Helper()
	status, res := e.call("POST", "http://"+e.internal+"/internal/v1/events/batch", e2eToken, map[string]any{"events": events})
	if status != http.StatusAccepted {
		e.t.Fatalf("publish batch: %d %v", status, res)
	}
	var ids []string
	for _, d := range res["data"].([]any) {
		ids = append(ids, d.(map[string]any)["id"].(string))
	}
	return ids
}

// subscriptionDeliveries lists every delivery of a subscription through
// the public API.
func (e *engine) subscriptionDeliveries(key, subscriptionID string) []map[string]any {
	e.t.Helper()
	var out []map[string]any
	cursor := ""
	for {
		q := url.Values{"subscription_id": {subscriptionID}, "limit": {"100"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		status, page := e.call("GET", "http://"+e.public+"/v1/webhook_deliveries?"+q.Encode(), key, nil)
		if status != http.StatusOK {
			e.t.Fatalf("list deliveries: %d %v", status, page)
		}
		for _, d := range page["data"].([]any) {
			out = append(out, d.(map[string]any))
		}
		next, _ := page["next_cursor"].(string)
		if more, _ := page["has_more"].(bool); !more || next == "" {
			return out
		}
		cursor = next
	}
}

// TestRateLimitAcrossWorkers: an endpoint limited to 5 deliveries a second
// receives 5 a second (±10 % over 20 s) from two worker processes sharing
// the limit, no attempt is counted as failed, and an endpoint of the same
// merchant without a limit receives every event at once. The package's
// one slow test: the rate is measured over 20 s.
func TestRateLimitAcrossWorkers(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	const rate, window, events = 5, 20 * time.Second, 130
	e := newEngine(t, "WEBHOOKD_WORKER_CONCURRENCY=16")
	limited := newControlledReceiver(t, nil)
	free := newControlledReceiver(t, nil)
	e.spawn("api", e.internal)
	e.spawn("worker", storetest.FreeAddr(t))
	e.spawn("worker", storetest.FreeAddr(t))
	key := e.keysCreate("m_rate")
	limitedID := e.subscribeWith(key, limited, map[string]any{"rate_limit": rate})
	e.subscribeWith(key, free, nil)

	batch := make([]map[string]any, 0, 100)
	for i := range events {
		batch = append(batch, map[string]any{"merchant_id": "m_rate", "type": "payout.paid", "payload": map[string]any{"n": i}})
		if len(batch) == 100 || i == events-1 {
			e.publishBatch(batch)
			batch = batch[:0]
		}
	}
	published := time.Now()

	// The unlimited endpoint gets every event while the limited one is
	// still at its first few seconds.
	if !eventually(10*time.Second-time.Since(published), func() bool { return len(free.arrivals()) >= events }) {
		t.Fatalf("the endpoint without a limit got %d of %d events in 10 s", len(free.arrivals()), events)
	}
	if got := len(limited.arrivals()); got > rate*int(time.Since(published)/time.Second+2) {
		t.Fatalf("the limited endpoint got %d events in %v", got, time.Since(published))
	}
	freeTook := time.Since(published)

	// The window the rate is measured over has closed, and every request
	// that arrived in it is on record, once one arrives a second after its
	// end: the limited endpoint still has events to come then (130 at 5 a
	// second last 26 s), unless a limit that let too many through sent
	// them all already, which the count below reports.
	first := limited.arrivals()[0].at
	if !eventually(window+time.Minute, func() bool {
		seen := limited.arrivals()
		return len(seen) >= events || slices.ContainsFunc(seen, func(a arrival) bool { return a.at.After(first.Add(window + time.Second)) })
	}) {
		t.Fatalf("the limited endpoint got nothing after %v", window+time.Second)
	}
	var inWindow int
	for _, a := range limited.arrivals() {
		if a.at.Before(first.Add(window)) {
			inWindow++
		}
	}
	want := rate * int(window/time.Second)
	t.Logf("limited endpoint: %d deliveries in %v (want %d ± 10 %%); unlimited endpoint: %d in %v",
		inWindow, window, want, events, freeTook.Round(time.Millisecond))
	if inWindow < want*9/10 || inWindow > want*11/10 {
		t.Errorf("%d deliveries in %v at %d/s, want %d ± 10 %%", inWindow, window, rate, want)
	}
	// Waiting for the limit is no attempt: every delivery made has one
	// attempt, succeeded; the others have none.
	var sent []time.Time
	for _, d := range e.subscriptionDeliveries(key, limitedID) {
		attempts := d["attempts"].([]any)
		switch d["status"] {
		case "succeeded":
			if len(attempts) != 1 || d["attempt_count"].(float64) != 1 {
				t.Errorf("delivery %s succeeded after %d attempts", d["id"], len(attempts))
			}
			if at, err := time.Parse(time.RFC3339Nano, attempts[len(attempts)-1].(map[string]any)["attempted_at"].(string)); err == nil {
				sent = append(sent, at)
			} else {
				t.Errorf("delivery %s: attempted_at: %v", d["id"], err)
			}
		case "pending":
			if len(attempts) == 0 {
				break
			}
			// The list reads the deliveries, then their attempts: an
			// attempt recorded between the two shows on a delivery read
			// as pending. Read alone once its record has settled, it is
			// a success of one attempt like the others.
			var again map[string]any
			settled := eventually(10*time.Second, func() bool {
				status, one := e.call("GET", "http://"+e.public+"/v1/webhook_deliveries/"+d["id"].(string), key, nil)
				again = one
				return status == http.StatusOK && one["status"] != "pending"
			})
			if !settled || again["status"] != "succeeded" || len(again["attempts"].([]any)) != 1 {
				t.Errorf("pending delivery %s has %d attempts; read again: %v", d["id"], len(attempts), again)
				break
			}
			if at, err := time.Parse(time.RFC3339Nano, again["attempts"].([]any)[0].(map[string]any)["attempted_at"].(string)); err == nil {
				sent = append(sent, at)
			}
		default:
			t.Errorf("delivery %s is %s", d["id"], d["status"])
		}
	}
	// No second ever holds a burst, by the engine's record of when it sent
	// each: the receiver's clock would count the test process's own
	// delays, which on a loaded machine bunch arrivals let out on their
	// turns. A burst the limiter let through shows as twice the limit.
	// The engine's own record bunches too, less: an attempt starts after
	// its worker took its turn and leased it, and a worker paused on a
	// loaded machine (every package's tests at once, the race detector)
	// starts a few turns together; CI saw 9 in a second twice, with the
	// 20 s count exact (101). The count above is what holds the rate.
	slices.SortFunc(sent, time.Time.Compare)
	busiest, from := 0, time.Time{}
	for i := range sent {
		n := 0
		for _, b := range sent[i:] {
			if b.Sub(sent[i]) < time.Second {
				n++
			}
		}
		if n > busiest {
			busiest, from = n, sent[i]
		}
	}
	t.Logf("the busiest second held %d attempts, from %v", busiest, from)
	if busiest >= 2*rate {
		t.Errorf("%d attempts sent within one second from %v: a burst of twice the limit", busiest, from)
	}
	if len(limited.bad)+len(free.bad) > 0 {
		t.Errorf("bad signatures: %v %v", limited.bad, free.bad)
	}
}

// TestOrderedDeliveryAcrossWorkers: 1,000 events over 50 keys, delivered by
// three worker processes to an endpoint ordered by payload.account that
// fails 30 % of first attempts at random: every key's events arrive one
// at a time, in publish order, numbered 1, 2, 3...; a key whose first
// event keeps failing holds back only its own events, which follow in order
// once it succeeds.
func TestOrderedDeliveryAcrossWorkers(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	const keys, perKey = 50, 20
	const stuck = "acct_0"
	// Long enough that the stuck key's first event outlasts the others.
	e := newEngine(t, "WEBHOOKD_WORKER_CONCURRENCY=32",
		"WEBHOOKD_RETRY_SCHEDULE=100ms,200ms,500ms,2s,2s,2s,2s,2s,2s,2s,2s,2s,2s,2s")
	var (
		mu        sync.Mutex
		firstSeen = map[string]bool{}
		inFlight  = map[string]int{}
		overlaps  []string
		othersOK  = map[string]int{}
		release   = make(chan struct{})
		released  bool
		rnd       = rand.New(rand.NewPCG(1, 2))
	)
	var rcv *controlledReceiver
	rcv = newControlledReceiver(t, func(req *http.Request, _ []byte) bool {
		key, id := req.Header.Get("webhook-ordering-key"), req.Header.Get("webhook-id")
		mu.Lock()
		inFlight[key]++
		if inFlight[key] > 1 {
			overlaps = append(overlaps, key)
		}
		mu.Unlock()
		// Kept: the receiver holds each request a moment, as a slow one
		// would, so that a second one of the key arriving meanwhile would
		// be seen.
		time.Sleep(2 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		inFlight[key]--
		if key == stuck && req.Header.Get("webhook-sequence") == "1" {
			select {
			case <-release:
				return false
			default:
				return true
			}
		}
		fail := false
		if !firstSeen[id] {
			firstSeen[id] = true
			fail = rnd.Float64() < 0.3
		}
		if !fail && key != stuck {
			othersOK[key]++
			if !released && len(othersOK) == keys-1 && allAtLeast(othersOK, perKey) {
				released = true
				close(release)
			}
		}
		return fail
	})
	var failedID string
	procs := []*process{e.spawn("api", e.internal)}
	for range 3 {
		procs = append(procs, e.spawn("worker", storetest.FreeAddr(t)))
	}
	// On a failure, the processes' warnings and errors and every line
	// about the event that broke the order: seen once under CI load (a
	// success of the key's current event arriving twice) and not since in
	// 18 runs under load, so the next one must come with its evidence.
	t.Cleanup(func() {
		if t.Failed() {
			for i, p := range procs {
				for _, l := range strings.Split(p.logs.String(), "\n") {
					if strings.Contains(l, "WARN") || strings.Contains(l, "ERROR") || (failedID != "" && strings.Contains(l, failedID)) {
						t.Logf("proc %d: %s", i, l)
					}
				}
			}
		}
	})
	key := e.keysCreate("m_order")
	e.subscribeWith(key, rcv, map[string]any{"ordering": map[string]string{"key": "payload.account"}})

	// Publish order: n counts each key's events; keys interleave.
	var batch []map[string]any
	for i := range keys * perKey {
		k := fmt.Sprintf("acct_%d", i%keys)
		batch = append(batch, map[string]any{"merchant_id": "m_order", "type": "payout.paid",
			"payload": map[string]any{"account": k, "n": i / keys}})
		if len(batch) == 100 {
			e.publishBatch(batch)
			batch = nil
		}
	}
	published := time.Now()

	select {
	case <-release:
	case <-time.After(60 * time.Second):
		t.Fatalf("the other keys did not all arrive within 60 s: %d keys done", doneKeys(&mu, othersOK, perKey))
	}
	othersTook := time.Since(published)
	// While the others flowed, the stuck key got nothing past its first.
	for _, a := range rcv.arrivals() {
		if a.key == stuck && a.sequence != 1 {
			t.Fatalf("the stuck key's sequence %d arrived before its first succeeded", a.sequence)
		}
	}
	ok := 0
	if !eventually(30*time.Second, func() bool {
		ok = 0
		for _, a := range rcv.arrivals() {
			if a.key == stuck && a.ok {
				ok++
			}
		}
		return ok == perKey
	}) {
		t.Fatalf("the stuck key got %d of %d events within 30 s of its release", ok, perKey)
	}
	t.Logf("%d events over %d keys: the others took %v; the stuck key followed in %v",
		keys*perKey, keys, othersTook.Round(time.Millisecond), (time.Since(published) - othersTook).Round(time.Millisecond))

	// Per key: requests never overlap, the sequence never goes back, each
	// success is the next event in publish order.
	mu.Lock()
	if len(overlaps) > 0 {
		t.Errorf("two requests of one key at once: %v", overlaps[:min(5, len(overlaps))])
	}
	mu.Unlock()
	last := map[string]int64{}
	next := map[string]int{}
	for _, a := range rcv.arrivals() {
		if a.key == "" {
			t.Fatalf("a delivery without webhook-ordering-key: %s", a.body)
		}
		if a.sequence < last[a.key] {
			t.Fatalf("key %s: sequence %d after %d", a.key, a.sequence, last[a.key])
		}
		last[a.key] = a.sequence
		if !a.ok {
			continue
		}
		var env struct {
			Payload struct {
				N int `json:"n"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(a.body, &env); err != nil {
			t.Fatalf("envelope %s: %v", a.body, err)
		}
		n := env.Payload.N
		if n != next[a.key] || a.sequence != int64(n+1) {
			failedID = a.id
			for _, b := range rcv.arrivals() {
				if b.key == a.key {
					t.Logf("arrival key %s seq %d ok %v id %s", b.key, b.sequence, b.ok, b.id)
				}
			}
			t.Fatalf("key %s: event n=%d (sequence %d) arrived, want n=%d", a.key, n, a.sequence, next[a.key])
		}
		next[a.key]++
	}
	if len(rcv.bad) > 0 {
		t.Errorf("bad signatures: %v", rcv.bad[:min(3, len(rcv.bad))])
	}
}

func allAtLeast(m map[string]int, n int) bool {
	for _, v := range m {
		if v < n {
			return false
		}
	}
	return true
}

func doneKeys(mu *sync.Mutex, m map[string]int, n int) int {
	mu.Lock()
	defer mu.Unlock()
	done := 0
	for _, v := range m {
		if v >= n {
			done++
		}
	}
	return done
}
