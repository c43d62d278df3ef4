package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store/storetest"
)

// Issue 24, "Isolation that holds": end-to-end tests of what one merchant's
// load may take from the others, and of how much of the pool a fan-out
// uses, each on the real binary split as in production: one `api` and two
// `worker` processes. Latency is held as a ratio to the same merchant's
// figure alone (beside ≤ 2 × solo + 1 s, for a busy machine), never
// as an absolute; every wait is on a state, with a deadline.
//
// The pool: isolationWorkers processes of isolationConcurrency workers each,
// isolationPool in all, the default share (a quarter of a process's
// workers per merchant).

const (
	isolationWorkers     = 2
	isolationConcurrency = 16
	isolationPool        = isolationWorkers * isolationConcurrency
	// isolationPhase is how long a probe merchant publishes in each phase.
	isolationPhase = 3 * time.Second
	// isolationProbeRate is the probe merchant's events/s.
	isolationProbeRate = 10
	// isolationWait bounds the wait for a phase's events to arrive.
	isolationWait = 20 * time.Second
	// isolationSlowAnswer is how long the fan-out receivers take to answer.
	isolationSlowAnswer = time.Second
)

// TestIsolation runs the shapes of issue 24, one engine each, on one build
// of the binary. Not parallel: they measure latency and time.
func TestIsolation(t *testing.T) {
	storetest.FullLane(t, "isolation end-to-end tests of the real binary take minutes")
	base := newEngine(t)
	t.Run("HostileMerchantWith50HangingSubscriptions", func(t *testing.T) { testHostileMerchant(t, base) })
	t.Run("FanOutAcross20MerchantsUsesThePool", func(t *testing.T) { testSpreadFanOut(t, base) })
	t.Run("OneMerchantAloneUsesThePool", func(t *testing.T) { testSoloFanOut(t, base) })
	t.Run("BackloggedMerchantBeside50", func(t *testing.T) { testBacklog(t, base) })
	t.Run("RateLimitedBacklogThenDeleted", func(t *testing.T) { testRateLimitedBacklog(t, base) })
}

// isolationEngine is a fresh engine (database, Redis, ports) on base's
// binary, with short timeouts, its api and two workers started.
func isolationEngine(t *testing.T, base *engine, extraEnv ...string) (*engine, []*process) {
	t.Helper()
	e := &engine{t: t, bin: base.bin, public: storetest.FreeAddr(t), internal: storetest.FreeAddr(t), redis: storetest.NewRedis(t)}
	// base's environment, with what must be this engine's own after it
	// (a later setting wins).
	e.env = append(slices.Clip(base.env),
		"WEBHOOKD_DATABASE_URL="+storetest.NewDatabase(t),
		"WEBHOOKD_REDIS_URL="+e.redis.URL(),
		"WEBHOOKD_LISTEN="+e.public,
		"WEBHOOKD_INTERNAL_LISTEN="+e.internal,
		"WEBHOOKD_WORKER_CONCURRENCY="+strconv.Itoa(isolationConcurrency),
		"WEBHOOKD_DELIVERY_TIMEOUT=2s",
		"WEBHOOKD_RETRY_SCHEDULE=1s,1s,1s",
		"WEBHOOKD_API_RATE=10000/s",
		"WEBHOOKD_LOG_LEVEL=warn",
	)
	e.env = append(e.env, extraEnv...)
	procs := []*process{e.spawn("api", e.internal)}
	for range isolationWorkers {
		procs = append(procs, e.spawn("worker", storetest.FreeAddr(t)))
	}
	return e, procs
}

// isoCall is engine.call without failing the test, for goroutines.
func (e *engine) isoCall(method, url, auth string, body any) (int, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+auth)
	if method == http.MethodPost {
		req.Header.Set("Idempotency-Key", fmt.Sprintf("%d-%d", time.Now().UnixNano(), isoSeq.Add(1)))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m, nil
}

var isoSeq atomic.Int64

// merchantKey issues an API key for merchant through the internal API
// (faster than `webhookd keys create` for fifty merchants).
func (e *engine) merchantKey(merchant string) string {
	e.t.Helper()
	status, out := e.call(http.MethodPost, "http://"+e.internal+"/internal/v1/merchants/"+merchant+"/api_keys", e2eToken,
		map[string]any{"scopes": []string{"webhooks:read", "webhooks:write"}})
	key, _ := out["key"].(string)
	if status/100 != 2 || key == "" {
		e.t.Fatalf("issue a key for %s: %d %v", merchant, status, out)
	}
	return key
}

// subscribeAll creates, eight at a time, one subscription of keys[i] to
// every event at urls[i], with fields added, and returns their ids.
func (e *engine) subscribeAll(keys, urls []string, fields map[string]any) []string {
	e.t.Helper()
	ids := make([]string, len(urls))
	errs := make([]error, len(urls))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(urls); i = int(next.Add(1) - 1) {
				body := map[string]any{"url": urls[i], "events": []string{"*"}}
				for k, v := range fields {
					body[k] = v
				}
				status, sub, err := e.isoCall(http.MethodPost, "http://"+e.public+"/v1/webhook_subscriptions", keys[i], body)
				if err == nil && status != http.StatusCreated {
					err = fmt.Errorf("HTTP %d %v", status, sub)
				}
				if err != nil {
					errs[i] = fmt.Errorf("create subscription to %s: %w", urls[i], err)
					continue
				}
				ids[i], _ = sub["id"].(string)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			e.t.Fatal(err)
		}
	}
	return ids
}

// publishQuiet publishes one event of merchant without failing the test,
// for a background load.
func (e *engine) publishQuiet(merchant string) error {
	status, ev, err := e.isoCall(http.MethodPost, "http://"+e.internal+"/internal/v1/events", e2eToken,
		map[string]any{"merchant_id": merchant, "type": "payout.paid", "payload": map[string]any{"id": "po_1", "status": "paid"}})
	if err == nil && status != http.StatusAccepted {
		err = fmt.Errorf("publish: HTTP %d %v", status, ev)
	}
	return err
}

// steadyLoad publishes events of merchant at rate per second in the
// background until stop is called; stop returns how many were published.
func (e *engine) steadyLoad(merchant string, rate int) (stop func() int) {
	done, finished := make(chan struct{}), make(chan int)
	go func() {
		n := 0
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for {
			select {
			case <-done:
				finished <- n
				return
			case <-tick.C:
				if e.publishQuiet(merchant) == nil {
					n++
				}
			}
		}
	}()
	var once sync.Once
	var n int
	return func() int {
		once.Do(func() { close(done); n = <-finished })
		return n
	}
}

// publishRoundRobin publishes rate events/s for d, one per request, to
// merchants in turn, and returns when each was published.
func (e *engine) publishRoundRobin(merchants []string, rate int, d time.Duration) map[string]time.Time {
	e.t.Helper()
	published := map[string]time.Time{}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for i, end := 0, time.Now().Add(d); time.Now().Before(end); i++ {
		sent := time.Now()
		published[e.publish(merchants[i%len(merchants)])] = sent
		<-tick.C
	}
	return published
}

// phase is a probe's publish → arrival over one phase.
type phase struct {
	name          string
	events        int
	missing       int // not arrived within isolationWait
	p50, p99, max time.Duration
}

func (p phase) String() string {
	s := fmt.Sprintf("%s: %d events, p50 %v, p99 %v, max %v", p.name, p.events,
		p.p50.Round(time.Millisecond), p.p99.Round(time.Millisecond), p.max.Round(time.Millisecond))
	if p.missing > 0 {
		s += fmt.Sprintf(", %d not arrived within %v (counted at that wait)", p.missing, isolationWait)
	}
	return s
}

// measure waits until every published event arrived at a (or
// isolationWait passed since the last was published) and summarizes
// publish → arrival; an event that never came counts as the whole wait.
func (a *arrivals) measure(name string, published map[string]time.Time) phase {
	var took []time.Duration
	eventually(isolationWait, func() bool { took = a.took(published); return len(took) == len(published) })
	p := phase{name: name, events: len(published), missing: len(published) - len(took)}
	for range p.missing {
		took = append(took, isolationWait)
	}
	if len(took) == 0 {
		return p
	}
	slices.Sort(took)
	rank := func(q int) time.Duration { return took[(len(took)*q+99)/100-1] }
	p.p50, p.p99, p.max = rank(50), rank(99), took[len(took)-1]
	return p
}

// probe measures a phase of the calm merchant m_calm publishing
// isolationProbeRate events/s for isolationPhase. A phase in which the
// probe itself fell behind its pace (fewer than 80% of the events it
// planned were published: the test process was starved of CPU, as a
// loaded CI machine does to it) measured the machine, not the engine: it
// is logged and measured again, at most twice. A phase judged is always
// one whose probe kept its pace, or the third.
func (a *arrivals) probe(e *engine, name string) phase {
	planned := int(isolationPhase.Seconds()) * isolationProbeRate
	var p phase
	for try := 1; try <= 3; try++ {
		p = a.measure(name, e.publishSteadily("m_calm", isolationProbeRate, isolationPhase))
		if p.events*5 >= planned*4 {
			break
		}
		e.t.Logf("%s: the probe published %d of its %d events (the test process was starved); measured again", p, p.events, planned)
	}
	return p
}

// holdsBeside fails the test when beside's p99 is over twice solo's and a
// second (a loaded machine's noise), or events are missing.
func holdsBeside(t *testing.T, solo, beside phase, what string) {
	t.Helper()
	limit := 2*solo.p99 + time.Second
	t.Logf("%s | %s | ratio %.1f×", solo, beside, float64(beside.p99)/float64(max(solo.p99, time.Millisecond)))
	if beside.missing > 0 || beside.p99 > limit {
		t.Errorf("%s: p99 %v (%d of %d events never arrived), over %v (twice the %v alone, and a second)",
			what, beside.p99.Round(time.Millisecond), beside.missing, beside.events, limit.Round(time.Millisecond), solo.p99.Round(time.Millisecond))
	}
}

// testHostileMerchant (issue 24, shapes 1 and 6): a merchant with 50
// subscriptions that never answer, each of its events going to all of
// them, beside a merchant publishing steadily to one fast receiver.
func testHostileMerchant(t *testing.T, base *engine) {
	const hangingSubs, hostileRate = 50, 20
	calm := newArrivals(t)
	trap := hanging(t)
	e, _ := isolationEngine(t, base)
	e.subscribeURL(e.merchantKey("m_calm"), calm.URL+"/hook")
	hostileKey := e.merchantKey("m_hostile")
	var urls []string
	for i := range hangingSubs {
		urls = append(urls, fmt.Sprintf("%s/hook/%d", trap.URL, i))
	}
	e.subscribeAll(repeatString(hostileKey, hangingSubs), urls, nil)

	solo := calm.probe(e, "alone")
	stop := e.steadyLoad("m_hostile", hostileRate)
	defer stop()
	// The hanging attempts fill whatever the hostile merchant may hold
	// (at least its share in each worker), and its queue builds behind
	// them: the engine has given up on as many at the delivery timeout
	// (2 s) and scheduled them again.
	share := isolationWorkers * isolationConcurrency / 4
	waitFor(t, "the hanging attempts to fill the hostile merchant's share and time out", 30*time.Second,
		func() bool { return trap.held.Load() >= int64(share) && trap.cut.Load() >= int64(share) })
	beside := calm.probe(e, "beside 50 hanging subscriptions")
	n := stop()
	t.Logf("the hostile merchant published %d events (× %d hanging subscriptions)", n, hangingSubs)
	holdsBeside(t, solo, beside, "the calm merchant beside one with 50 hanging subscriptions")
}

// repeatString returns n copies of s.
func repeatString(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// poolReceiver is one receiver for many subscriptions, one path each,
// answering after delay: it notes each (path, webhook-id) once, when it was
// answered, and the most requests it held at once (the engine's
// connections open to it).
type poolReceiver struct {
	*httptest.Server
	inFlight, peak atomic.Int64
	mu             sync.Mutex
	answered       map[string]time.Time // by path and webhook-id
	last           time.Time
	byPath         map[string]int
}

func newPoolReceiver(t *testing.T, delay time.Duration) *poolReceiver {
	p := &poolReceiver{answered: map[string]time.Time{}, byPath: map[string]int{}}
	closing := make(chan struct{})
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := p.inFlight.Add(1)
		defer p.inFlight.Add(-1)
		for cur := p.peak.Load(); n > cur && !p.peak.CompareAndSwap(cur, n); cur = p.peak.Load() {
		}
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		case <-closing:
			return
		}
		key := r.URL.Path + " " + r.Header.Get("webhook-id")
		p.mu.Lock()
		if _, seen := p.answered[key]; !seen {
			now := time.Now()
			p.answered[key], p.last = now, now
			p.byPath[r.URL.Path]++
		}
		p.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(func() { close(closing); p.Close() })
	return p
}

// count is how many distinct deliveries were answered, and the last when.
func (p *poolReceiver) count() (int, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.answered), p.last
}

// waitAll waits until want deliveries were answered or within passed, and
// returns how many were and the time from start to the last.
func (p *poolReceiver) waitAll(want int, start time.Time, within time.Duration) (int, time.Duration) {
	eventually(time.Until(start.Add(within)), func() bool { n, _ := p.count(); return n >= want })
	n, last := p.count()
	return n, last.Sub(start)
}

// checkPoolUse fails the test unless a fan-out of deliveries, each
// answered in isolationSlowAnswer, kept at least three quarters of the
// pool busy and finished within twice the ideal time (full waves of the
// pool) and two seconds.
func checkPoolUse(t *testing.T, p *poolReceiver, deliveries int, start time.Time, what string) {
	t.Helper()
	waves := (deliveries + isolationPool - 1) / isolationPool
	ideal := time.Duration(waves) * isolationSlowAnswer
	limit := 2*ideal + 2*time.Second
	within := limit + 5*time.Second
	got, took := p.waitAll(deliveries, start, within)
	peak := p.peak.Load()
	want := min(isolationPool, deliveries) * 3 / 4
	t.Logf("%s: %d of %d deliveries answered in %v (ideal %v, %d waves of %d), at most %d connections at once",
		what, got, deliveries, took.Round(time.Millisecond), ideal, waves, isolationPool, peak)
	if got < deliveries {
		t.Errorf("%s: %d of %d deliveries answered within %v (want all within %v)", what, got, deliveries, within, limit)
	} else if took > limit {
		t.Errorf("%s: all answered in %v, over %v (twice the ideal %v, and 2 s)", what, took.Round(time.Millisecond), limit, ideal)
	}
	if int(peak) < want {
		t.Errorf("%s: at most %d connections at once, want at least %d (3/4 of the pool of %d)", what, peak, want, isolationPool)
	}
}

// testSpreadFanOut (issue 24, shape 2): 20 merchants with 10 subscriptions
// each, every receiver answering in a second, each merchant publishing one
// event at once: no merchant is over its share, so the whole pool should
// be busy until the work is done.
func testSpreadFanOut(t *testing.T, base *engine) {
	const merchants, perMerchant = 20, 10
	rcv := newPoolReceiver(t, isolationSlowAnswer)
	e, _ := isolationEngine(t, base)
	var keys, urls []string
	var events []map[string]any
	for m := range merchants {
		id := fmt.Sprintf("m_spread_%d", m)
		key := e.merchantKey(id)
		for s := range perMerchant {
			keys = append(keys, key)
			urls = append(urls, fmt.Sprintf("%s/%s/%d", rcv.URL, id, s))
		}
		events = append(events, map[string]any{"merchant_id": id, "type": "payout.paid", "payload": map[string]any{"n": m}})
	}
	e.subscribeAll(keys, urls, nil)
	start := time.Now()
	e.publishBatch(events)
	checkPoolUse(t, rcv, merchants*perMerchant, start, "20 merchants × 10 subscriptions")
}

// testSoloFanOut (issue 24, shape 4): one merchant alone, one event to 64
// subscriptions answering in a second: with no one else waiting, the
// merchant should have the whole pool.
func testSoloFanOut(t *testing.T, base *engine) {
	const subs = 2 * isolationPool
	rcv := newPoolReceiver(t, isolationSlowAnswer)
	e, _ := isolationEngine(t, base)
	key := e.merchantKey("m_alone")
	var urls []string
	for s := range subs {
		urls = append(urls, fmt.Sprintf("%s/hook/%d", rcv.URL, s))
	}
	e.subscribeAll(repeatString(key, subs), urls, nil)
	start := time.Now()
	e.publish("m_alone")
	checkPoolUse(t, rcv, subs, start, fmt.Sprintf("one merchant alone, one event × %d subscriptions", subs))
}

// testBacklog: 50 merchants with one fast subscription each publish
// steadily, alone, then beside a merchant with 5,000 deliveries queued to
// a receiver answering in half a second (a backlog that outlasts the test).
func testBacklog(t *testing.T, base *engine) {
	const merchants, rate, backlog = 50, 50, 5000
	fast := newArrivals(t)
	slow := newPoolReceiver(t, 500*time.Millisecond)
	e, _ := isolationEngine(t, base)
	var names, keys, urls []string
	for m := range merchants {
		id := fmt.Sprintf("m_steady_%d", m)
		names = append(names, id)
		keys = append(keys, e.merchantKey(id))
		urls = append(urls, fmt.Sprintf("%s/%s", fast.URL, id))
	}
	e.subscribeAll(keys, urls, nil)
	e.subscribeAll([]string{e.merchantKey("m_backlog")}, []string{slow.URL + "/hook"}, nil)

	solo := fast.measure("50 merchants alone", e.publishRoundRobin(names, rate, isolationPhase))
	publishMany(e, "m_backlog", backlog)
	beside := fast.measure("beside a backlog of 5,000", e.publishRoundRobin(names, rate, isolationPhase))
	n, _ := slow.count()
	t.Logf("the backlogged merchant got %d of its %d deliveries meanwhile", n, backlog)
	holdsBeside(t, solo, beside, "50 merchants beside one with a backlog")
}

// publishMany publishes n events of merchant in batches of 100.
func publishMany(e *engine, merchant string, n int) []string {
	e.t.Helper()
	var ids []string
	batch := make([]map[string]any, 0, 100)
	for i := range n {
		batch = append(batch, map[string]any{"merchant_id": merchant, "type": "payout.paid", "payload": map[string]any{"n": i}})
		if len(batch) == cap(batch) || i == n-1 {
			ids = append(ids, e.publishBatch(batch)...)
			batch = batch[:0]
		}
	}
	return ids
}

// deferredTotal sums webhookd_attempts_deferred_total over its reasons and
// over the worker processes.
func deferredTotal(t *testing.T, workers []*process) float64 {
	t.Helper()
	var total float64
	for _, w := range workers {
		_, series := scrape(t, "http://"+w.internal+"/metrics")
		for name, v := range series {
			if strings.HasPrefix(name, "webhookd_attempts_deferred_total") {
				total += v
			}
		}
	}
	return total
}

// pendingDeliveries tells whether a subscription has a pending delivery,
// through the public API.
func (e *engine) pendingDeliveries(key, subscriptionID string) int {
	e.t.Helper()
	q := url.Values{"subscription_id": {subscriptionID}, "status": {"pending"}, "limit": {"100"}}
	status, page := e.call(http.MethodGet, "http://"+e.public+"/v1/webhook_deliveries?"+q.Encode(), key, nil)
	if status != http.StatusOK {
		e.t.Fatalf("list pending deliveries: %d %v", status, page)
	}
	data, _ := page["data"].([]any)
	return len(data)
}

// testRateLimitedBacklog (issue 24, shape 7): a subscription limited to one
// delivery a second with 5,000 deliveries queued leaves another merchant
// its latency; once the subscription is deleted its queued work is gone:
// every delivery ends (failed, or succeeded before), no attempt follows,
// and the workers stop deferring its tasks.
func testRateLimitedBacklog(t *testing.T, base *engine) {
	const backlog = 5000
	calm := newArrivals(t)
	limited := newPoolReceiver(t, 0)
	e, procs := isolationEngine(t, base)
	workers := procs[1:]
	e.subscribeURL(e.merchantKey("m_calm"), calm.URL+"/hook")
	limitedKey := e.merchantKey("m_limited")
	limitedID := e.subscribeAll([]string{limitedKey}, []string{limited.URL + "/hook"}, map[string]any{"rate_limit": 1})[0]

	solo := calm.probe(e, "alone")
	publishMany(e, "m_limited", backlog)
	beside := calm.probe(e, "beside a rate-limited backlog")

	if status, body := e.call(http.MethodDelete, "http://"+e.public+"/v1/webhook_subscriptions/"+limitedID, limitedKey, nil); status/100 != 2 {
		t.Fatalf("delete the rate-limited subscription: %d %v", status, body)
	}
	deleted := time.Now()
	atDelete := deferredTotal(t, workers)
	after := calm.probe(e, "after its delete")
	holdsBeside(t, solo, beside, "the calm merchant beside a rate-limited backlog")
	holdsBeside(t, solo, after, "the calm merchant after the rate-limited subscription was deleted")

	// Its queued deliveries end: none stays pending.
	if !eventually(max(15*time.Second-time.Since(deleted), 5*time.Second), func() bool { return e.pendingDeliveries(limitedKey, limitedID) == 0 }) {
		t.Fatalf("the deleted subscription still has pending deliveries %v after its delete", time.Since(deleted).Round(time.Millisecond))
	}
	// The workers stop putting its tasks back: the deferral counter holds
	// still for a settle window (several rate-limit periods and delayed-task
	// checks) before the deadline. Kept as a quiet window: the positive
	// state, the deleted subscription's attempts still parked or queued,
	// the engine does not expose.
	const settle, settleBy = 3 * time.Second, 15 * time.Second
	last, since := deferredTotal(t, workers), time.Now()
	// A probe measured again (probe) may have used the deadline up: the
	// window then still gets its settle time.
	deadline := deleted.Add(settleBy)
	if late := since.Add(2 * settle); late.After(deadline) {
		deadline = late
	}
	for time.Since(since) < settle {
		if time.Now().After(deadline) {
			t.Errorf("webhookd_attempts_deferred_total still growing %v after the delete: %.0f more since (%.0f/s)",
				settleBy, last-atDelete, (last-atDelete)/time.Since(deleted).Seconds())
			break
		}
		time.Sleep(200 * time.Millisecond) // kept: the window's pace; each look scrapes every worker's metrics
		if v := deferredTotal(t, workers); v != last {
			last, since = v, time.Now()
		}
	}
	// Every delivery of the subscription has ended, with one succeeded
	// attempt for each the receiver answered and no other attempt.
	arrivedCount, _ := limited.count()
	var failed, succeeded, attempts int
	for _, d := range e.subscriptionDeliveries(limitedKey, limitedID) {
		attempts += len(d["attempts"].([]any))
		switch d["status"] {
		case "failed":
			failed++
		case "succeeded":
			succeeded++
		default:
			t.Errorf("delivery %s of the deleted subscription is %s", d["id"], d["status"])
		}
	}
	t.Logf("rate-limited subscription: %d delivered before its delete, %d failed by it; %d attempts recorded; %.0f deferrals counted after the delete",
		succeeded, failed, attempts, last-atDelete)
	if succeeded+failed != backlog || succeeded != arrivedCount || attempts != arrivedCount {
		t.Errorf("deleted subscription: %d succeeded + %d failed of %d, %d attempts recorded, %d arrived at its receiver: want every delivery ended and an attempt only for each arrival",
			succeeded, failed, backlog, attempts, arrivedCount)
	}
}
