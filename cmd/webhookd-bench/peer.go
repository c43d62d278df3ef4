package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// The peer scenario (issue 42) puts webhookd and Hookdeck Outpost under one
// load generator on one machine, so that "n times the peer" is a ratio of
// two runs of the same bench rather than of figures taken on different
// machines (the machines these sessions run on differ twofold in what a
// system call or a commit costs). Its generator is deliberately light: one
// request per event, the receivers only note each event's first arrival
// (neither peer's signature is checked here; the other scenarios check
// webhookd's), so that at full speed the bench takes little of the
// machine the parties share.
const (
	peerWebhookd = "webhookd"
	peerOutpost  = "outpost"
	// outpostTopic is the topic the scenario's Outpost destinations
	// subscribe to and its events carry; Outpost must list it in TOPICS.
	outpostTopic = "user.created"
	// peerPublishers caps the requests in flight of a paced run, so that
	// a stalled peer cannot make the bench open a connection per event.
	peerPublishers = 256
	// peerSettle is the pause between creating the destinations and the
	// first event: Outpost reads a tenant's destinations through caches.
	peerSettle = 2 * time.Second
	// peerWarmupTime is how long a paced run publishes before it is
	// measured, and peerWarmupEvents how many events a run at full speed
	// sends first: a freshly started engine is slow at first (a fresh
	// webhookd's publishes take 10-40 ms for about half a second, while
	// its first connections and their first statements are made), which
	// is a start, not the steady state the scenario compares.
	peerWarmupTime   = 2 * time.Second
	peerWarmupEvents = 1000
)

// peerTarget is one engine the peer scenario drives.
type peerTarget interface {
	// prepare creates a merchant (a tenant) subscribed once per url to
	// the events the scenario publishes.
	prepare(ctx context.Context, urls []string) error
	// publish sends event seq of the run with payload.
	publish(ctx context.Context, seq int, payload json.RawMessage) error
	// cleanup removes what prepare made, so that nothing of the run is
	// retried after it.
	cleanup(ctx context.Context)
}

// webhookdPeer drives webhookd through its ingest route, as the other
// scenarios do.
type webhookdPeer struct {
	eng      *engine
	merchant string
	key      string
	subs     []string
}

func (p *webhookdPeer) prepare(ctx context.Context, urls []string) error {
	key, err := p.eng.issueKey(ctx, p.merchant)
	if err != nil {
		return err
	}
	p.key = key
	for _, u := range urls {
		s, err := p.eng.createSubscription(ctx, key, u)
		if err != nil {
			return err
		}
		p.subs = append(p.subs, s.ID)
	}
	return nil
}

func (p *webhookdPeer) publish(ctx context.Context, _ int, payload json.RawMessage) error {
	return p.eng.publish(ctx, event{ID: uuid.NewString(), MerchantID: p.merchant, Type: benchEventType, Payload: payload})
}

func (p *webhookdPeer) cleanup(ctx context.Context) {
	for _, id := range p.subs {
		_ = p.eng.deleteSubscription(ctx, p.key, id)
	}
}

// outpostPeer drives Hookdeck Outpost's API (v1): a tenant, webhook
// destinations, and POST /api/v1/publish per event. Its requests go
// through an engine (a JSON client) whose public URL is Outpost's.
type outpostPeer struct {
	http   *engine
	tenant string
}

// call sends one request to Outpost's API with its key.
func (p *outpostPeer) call(ctx context.Context, method, path string, in, out any) error {
	return p.http.do(ctx, method, p.http.api+path, p.http.ingestHeader(), in, out)
}

func (p *outpostPeer) prepare(ctx context.Context, urls []string) error {
	if err := p.call(ctx, http.MethodPut, "/api/v1/tenants/"+p.tenant, map[string]any{}, nil); err != nil {
		return err
	}
	for _, u := range urls {
		if err := p.call(ctx, http.MethodPost, "/api/v1/tenants/"+p.tenant+"/destinations", map[string]any{
			"type": "webhook", "topics": []string{outpostTopic}, "config": map[string]string{"url": u},
		}, nil); err != nil {
			return err
		}
	}
	return nil
}

func (p *outpostPeer) publish(ctx context.Context, seq int, payload json.RawMessage) error {
	return p.call(ctx, http.MethodPost, "/api/v1/publish", map[string]any{
		"id": p.tenant + "-" + strconv.Itoa(seq), "tenant_id": p.tenant, "topic": outpostTopic,
		"eligible_for_retry": true, "data": payload,
	}, nil)
}

func (p *outpostPeer) cleanup(ctx context.Context) {
	_ = p.call(ctx, http.MethodDelete, "/api/v1/tenants/"+p.tenant, nil, nil)
}

// peerArrivals notes when each (event, destination) first arrived.
type peerArrivals struct {
	events, dests int
	mu            sync.Mutex
	first         []time.Time
	unique        atomic.Int64
	duplicates    atomic.Int64
	unknown       atomic.Int64
}

func newPeerArrivals(events, dests int) *peerArrivals {
	return &peerArrivals{events: events, dests: dests, first: make([]time.Time, events*dests)}
}

// peerBody is what the receivers read of a delivery: the payload's seq,
// at the top (Outpost sends an event's data as the body) or under
// "payload" (webhookd's envelope).
type peerBody struct {
	Seq     *int `json:"seq"`
	Payload *struct {
		Seq *int `json:"seq"`
	} `json:"payload"`
}

// seqOf reads the event's sequence number from a delivery's body.
func seqOf(body []byte) (int, bool) {
	var b peerBody
	if err := json.Unmarshal(body, &b); err != nil {
		return 0, false
	}
	switch {
	case b.Payload != nil && b.Payload.Seq != nil:
		return *b.Payload.Seq, true
	case b.Seq != nil:
		return *b.Seq, true
	}
	return 0, false
}

// note records one delivery of event seq to destination dest at.
func (a *peerArrivals) note(seq, dest int, at time.Time) {
	if seq < 0 || seq >= a.events || dest < 0 || dest >= a.dests {
		a.unknown.Add(1)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	i := seq*a.dests + dest
	if !a.first[i].IsZero() {
		a.duplicates.Add(1)
		return
	}
	a.first[i] = at
	a.unique.Add(1)
}

// ServeHTTP takes a delivery at /d/<destination>.
func (a *peerArrivals) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	at := time.Now()
	dest, derr := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/d/"))
	seq, ok := seqOf(body)
	if err != nil || derr != nil || !ok {
		a.unknown.Add(1)
	} else {
		a.note(seq, dest, at)
	}
	w.WriteHeader(http.StatusNoContent)
}

// latencies are the publish-to-first-arrival times of the events numbered
// below events, and the last of those arrivals.
func (a *peerArrivals) latencies(sent []time.Time, events int) ([]time.Duration, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []time.Duration
	var last time.Time
	for i, at := range a.first[:events*a.dests] {
		if at.IsZero() || sent[i/a.dests].IsZero() {
			continue
		}
		out = append(out, at.Sub(sent[i/a.dests]))
		if at.After(last) {
			last = at
		}
	}
	return out, last
}

// peerTargetFor is the target -peer names.
func (l *lab) peerTargetFor(run string) peerTarget {
	if l.cfg.peer == peerOutpost {
		return &outpostPeer{http: newEngine(l.cfg.peerAPI, "", l.cfg.peerKey, peerPublishers), tenant: run}
	}
	return &webhookdPeer{eng: l.eng, merchant: run}
}

// peer runs the peer comparison's load against -peer: -events events of
// -payload bytes (default 512), each one request, at -rate events/s, or as
// fast as -publishers (default 32) allow when -rate is 0, to -subscriptions
// destinations (default 1), after a warm-up (peerWarmup) left out of every
// figure. The CPU figures are the meter's: -pid (for
// Outpost, its server and its message broker's), the Postgres of
// -database and the Redis of -redis. With -disk-probe, the disk's flush
// times over the measured run (diskProbe) are reported beside its latency.
func peer(ctx context.Context, l *lab) (*report, error) {
	events := orDefault(l.cfg.events, 9000)
	dests := orDefault(l.cfg.subscriptions, 1)
	size := orDefault(l.cfg.payload, defaultPayload)
	r := &report{scenario: "peer"}
	r.add("peer", l.cfg.peer, "")

	warm := peerWarmup(events, l.cfg.rate)
	arrivals := newPeerArrivals(warm+events, dests)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: arrivals, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	urls := make([]string, dests)
	for i := range urls {
		urls[i] = fmt.Sprintf("http://%s/d/%d", ln.Addr(), i)
	}
	run := l.cfg.merchant + "-peer-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	target := l.peerTargetFor(run)
	if err := target.prepare(ctx, urls); err != nil {
		return nil, err
	}
	defer target.cleanup(context.WithoutCancel(ctx))
	time.Sleep(peerSettle)

	sent := make([]time.Time, warm+events)
	var failed atomic.Int64
	var firstErr error
	var errOnce sync.Once
	send := func(seq int) {
		payload := payloadFor(run, seq, size)
		sent[seq] = time.Now()
		if err := target.publish(ctx, seq, payload); err != nil {
			failed.Add(1)
			sent[seq] = time.Time{}
			errOnce.Do(func() { firstErr = err })
		}
	}
	publishers := l.load.publishersFor(singlePublishers)
	// The warm-up's events are numbered after the measured ones.
	peerPublish(ctx, warm, l.cfg.rate, publishers, func(i int) { send(events + i) })
	warmed := int64(warm) * int64(dests)
	if !awaitArrivals(ctx, arrivals, warmed, time.Now().Add(l.cfg.duration)) || failed.Load() > 0 {
		return nil, fmt.Errorf("peer: warm-up: %d of %d deliveries arrived, %d events refused (%v)",
			arrivals.unique.Load(), warmed, failed.Load(), firstErr)
	}

	var stopProbe func() ([]time.Duration, error)
	if l.cfg.diskProbe != "" {
		if stopProbe, err = (diskProbe{dir: l.cfg.diskProbe, interval: diskProbeInterval}).start(ctx); err != nil {
			return nil, err
		}
	}
	cpuBefore, cpuErr := l.meter.sampleCPU(ctx)
	start := time.Now()
	peerPublish(ctx, events, l.cfg.rate, publishers, send)
	published := time.Now()
	want := int64(events-int(failed.Load())) * int64(dests)
	awaitArrivals(ctx, arrivals, warmed+want, time.Now().Add(l.cfg.duration))
	var flushes []time.Duration
	var probeErr error
	if stopProbe != nil {
		flushes, probeErr = stopProbe()
	}
	lat, last := arrivals.latencies(sent, events)
	got := arrivals.unique.Load() - warmed
	if cpuErr == nil {
		// The engines may still be writing what they record of the last
		// attempts (Outpost writes its log in batches, webhookd's
		// records wait up to 40 ms for company): a second more counts
		// that work in.
		time.Sleep(time.Second)
		if after, err := l.meter.sampleCPU(ctx); err == nil {
			l.meter.reportCPU(r, after.sub(cpuBefore), got)
		}
	}
	r.add("events_published", events-int(failed.Load()), "events")
	if n := failed.Load(); n > 0 {
		r.add("events_failed_to_publish", n, "events")
		r.note("first publish error: %v", firstErr)
	}
	r.add("events_accepted_per_s", float64(events-int(failed.Load()))/published.Sub(start).Seconds(), "events/s")
	r.add("deliveries_expected", want, "deliveries")
	r.add("deliveries_received", got, "deliveries")
	r.add("complete", got >= want, "")
	r.add("duplicates", arrivals.duplicates.Load(), "requests")
	r.add("unknown_requests", arrivals.unknown.Load(), "requests")
	if got > 0 && last.After(start) {
		r.add("deliveries_per_s", float64(got)/last.Sub(start).Seconds(), "deliveries/s")
	}
	s := summarize(lat)
	r.add("latency_p50_ms", ms(s.P50), "ms")
	r.add("latency_p99_ms", ms(s.P99), "ms")
	r.add("latency_max_ms", ms(s.Max), "ms")
	if stopProbe != nil {
		// A probe that failed midway still reports the flushes it timed:
		// the run's own figures are kept either way.
		if probeErr != nil {
			r.note("%v", probeErr)
		}
		reportDiskFlushes(r, flushes)
	}
	if got < want {
		return r, fmt.Errorf("peer: %d of %d deliveries arrived within -duration %s", got, want, l.cfg.duration)
	}
	if firstErr != nil {
		return r, errors.Join(errors.New("peer: some events were not accepted"), firstErr)
	}
	return r, nil
}

// peerWarmup is how many events a run sends before it is measured: two
// seconds' worth at rate, or peerWarmupEvents at full speed, never more
// than the run itself.
func peerWarmup(events int, rate float64) int {
	if rate > 0 {
		return min(events, int(rate*peerWarmupTime.Seconds()))
	}
	return min(events, peerWarmupEvents)
}

// awaitArrivals waits until a holds want deliveries, the deadline passes
// or ctx ends, and reports whether a holds them.
func awaitArrivals(ctx context.Context, a *peerArrivals, want int64, deadline time.Time) bool {
	for a.unique.Load() < want && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	return a.unique.Load() >= want
}

// peerPublish calls send for each of events sequence numbers: paced at
// rate events/s (each send in its own goroutine, at most peerPublishers
// at once), or with rate 0 by publishers senders as fast as they go.
func peerPublish(ctx context.Context, events int, rate float64, publishers int, send func(seq int)) {
	var wg sync.WaitGroup
	if rate > 0 {
		slots := make(chan struct{}, peerPublishers)
		interval := time.Duration(float64(time.Second) / rate)
		start := time.Now()
		for seq := 0; seq < events && ctx.Err() == nil; seq++ {
			if d := time.Until(start.Add(time.Duration(seq) * interval)); d > 0 {
				time.Sleep(d)
			}
			slots <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				send(seq)
			}()
		}
		wg.Wait()
		return
	}
	var next atomic.Int64
	for range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := int(next.Add(1) - 1); seq < events && ctx.Err() == nil; seq = int(next.Add(1) - 1) {
				send(seq)
			}
		}()
	}
	wg.Wait()
}
