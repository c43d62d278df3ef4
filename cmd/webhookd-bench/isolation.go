package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// The isolation scenarios (issue 24, "Isolation that holds"): whether one
// merchant's load leaves another its latency, and whether one merchant's
// fan-out, alone or beside others, uses the whole pool of workers. Each
// latency scenario measures a well-behaved merchant (the probe) publishing
// steadily to fast receivers, first alone ("solo"), then beside the load
// ("beside"); each phase lasts -phase and is waited for until every one of
// its events arrived (or -duration ran out).
const (
	isolationPhase  = 20 * time.Second
	isolationWarmup = 5 * time.Second
	// answerDelay is how long the receivers of spread, solofanout and
	// backlog's backlogged merchant take to answer.
	answerDelay        = time.Second
	probeRate          = 10 // the probe merchant's events/s (hostile, burst, ratelimited)
	hostileHanging     = 5  // hostile: hanging subscriptions of the hostile merchant
	hostileRate        = 20 // hostile: the hostile merchant's events/s, each to every one of them
	spreadMerchants    = 20
	spreadSubs         = 100 // per merchant
	solofanoutSubs     = 100
	burstEvents        = 5000
	backlogMerchants   = 50
	backlogRate        = 50 // the 50 merchants' events/s together: one each
	backlogDeliveries  = 10000
	ratelimitedBacklog = 5000
	// deferredMetric counts attempt tasks put back without an attempt
	// (over a cap, a rate limit, not due yet), summed over its reasons.
	deferredMetric = "webhookd_attempts_deferred_total"
)

// phaseResult is one measured phase of a probe's publishing.
type phaseResult struct {
	name     string
	pub      publishStats
	expected int // arrivals awaited: accepted events × healthy subscriptions of their merchant
	arrived  int
	complete bool
	took     time.Duration // publish start to the last arrival counted
	lat      latencySummary
}

// sentOf maps the accepted events of pub to their publish instants.
func sentOf(f *fleet, pub publishStats) map[string]time.Time {
	sent := make(map[string]time.Time, len(pub.ids))
	for i, ok := range pub.ok {
		if !ok {
			continue
		}
		if at, known := f.log.lookup(pub.ids[i]); known {
			sent[pub.ids[i]] = at
		}
	}
	return sent
}

// waitArrivals polls until the healthy receivers hold want arrivals of the
// events in sent, or wait runs out, and returns their latencies.
func waitArrivals(ctx context.Context, f *fleet, sent map[string]time.Time, want int, wait time.Duration) ([]time.Duration, bool) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		lat, n := f.rcv.arrivedOf(sent)
		if n >= want {
			return lat, true
		}
		select {
		case <-ctx.Done():
			return lat, false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// probePhase publishes rate events/s for d, one per request, to merchants
// round-robin, waits until each arrived at every healthy subscription of
// its merchant (up to -duration) and summarizes publish → arrival.
func (b *bench) probePhase(ctx context.Context, f *fleet, name string, merchants []string, rate float64, d time.Duration) phaseResult {
	events := max(int(math.Round(rate*d.Seconds())), 1)
	merchantOf := func(i int) string { return merchants[i%len(merchants)] }
	b.logf("%s: %d events at %g/s over %d merchant(s)", name, events, rate, len(merchants))
	pub := b.publish(ctx, publishPlan{events: events, merchant: merchantOf, payload: orDefault(b.cfg.payload, defaultPayload),
		rate: rate, batch: 1, run: b.cfg.merchant + "-" + name, deadline: time.Now().Add(d + b.cfg.duration),
		log: f.log, publisher: b.publishers(0)})
	per := f.healthyPerMerchant()
	p := phaseResult{name: name, pub: pub}
	for i, ok := range pub.ok {
		if ok {
			p.expected += int(per[merchantOf(i)])
		}
	}
	lat, complete := waitArrivals(ctx, f, sentOf(f, pub), p.expected, b.cfg.duration)
	p.arrived, p.complete = len(lat), complete && pub.failed == 0
	p.lat = summarize(lat)
	p.took = time.Since(pub.start)
	return p
}

// background publishes events of merchant in the background, at rate
// events/s one per request (rate 0: as fast as accepted, in -batch
// batches), until it has published events or stop is called; stop
// returns what was published.
func (b *bench) background(ctx context.Context, f *fleet, name, merchant string, events int, rate float64) (stop func() publishStats) {
	ctx, cancel := context.WithCancel(ctx)
	batch := 1
	if rate == 0 {
		batch = b.cfg.batch
	}
	done := make(chan publishStats, 1)
	go func() {
		done <- b.publish(ctx, publishPlan{events: events, merchant: func(int) string { return merchant },
			payload: orDefault(b.cfg.payload, defaultPayload), rate: rate, batch: batch, run: b.cfg.merchant + "-" + name,
			deadline: time.Now().Add(2 * b.cfg.duration), log: f.log, publisher: b.publishers(0)})
	}()
	var once sync.Once
	var st publishStats
	return func() publishStats {
		once.Do(func() {
			cancel()
			st = <-done
		})
		return st
	}
}

// publishAll publishes events of merchant in -batch batches as fast as
// the engine accepts them, and returns when all were.
func (b *bench) publishAll(ctx context.Context, f *fleet, name, merchant string, events int) publishStats {
	return b.publish(ctx, publishPlan{events: events, merchant: func(int) string { return merchant },
		payload: orDefault(b.cfg.payload, defaultPayload), batch: b.cfg.batch, run: b.cfg.merchant + "-" + name,
		deadline: time.Now().Add(b.cfg.duration), log: f.log, publisher: b.publishers(0)})
}

// sleepCtx waits d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// reportPhase adds a phase's figures, each prefixed with its name.
func reportPhase(r *report, p phaseResult) {
	r.add(p.name+"_events", p.pub.published, "events")
	r.add(p.name+"_p50_ms", ms(p.lat.P50), "ms")
	r.add(p.name+"_p99_ms", ms(p.lat.P99), "ms")
	r.add(p.name+"_max_ms", ms(p.lat.Max), "ms")
	r.add(p.name+"_complete", p.complete, "")
	if p.pub.failed > 0 {
		r.note("%s: %d events failed to publish: %v", p.name, p.pub.failed, p.pub.firstErr)
	}
	if !p.complete {
		r.add(p.name+"_arrived", p.arrived, "deliveries")
		r.note("%s: %d of %d deliveries arrived within -duration; the percentiles are of those that did", p.name, p.arrived, p.expected)
	}
}

// isolationLimit is what a probe's p99 beside a load may be: twice its p99
// alone and a second (a shared machine's noise), as the end-to-end tests
// hold it.
func isolationLimit(solo time.Duration) time.Duration {
	return 2*solo + time.Second
}

// judgeBeside adds the ratio of a later phase's p99 to solo's and holds
// the later phase's p99 against isolationLimit.
func judgeBeside(r *report, solo, beside phaseResult) {
	if solo.lat.P99 > 0 {
		r.add(beside.name+"_p99_over_solo", float64(beside.lat.P99)/float64(solo.lat.P99), "×")
	}
	limit := isolationLimit(solo.lat.P99)
	r.target(beside.name+"_p99_ms", fmt.Sprintf("<= %.0f (2 × solo + 1 s)", ms(limit)),
		beside.lat.P99 <= limit && beside.complete && solo.complete)
}

// metricTotal reads one metric summed over its series and over -metrics;
// a labelled counter none of whose series exists yet is 0.
func (b *bench) metricTotal(ctx context.Context, name string) (float64, bool) {
	m, err := b.eng.metrics(ctx, b.cfg.metricsURLs)
	if err != nil {
		return 0, false
	}
	return m[name], true
}

// repeat returns n copies of s.
func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// merchantNames returns prefix-0 … prefix-(n-1).
func merchantNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// hostile (issue 24, shapes 1 and 6): a merchant whose subscriptions all
// hang until the engine's delivery timeout, publishing steadily, beside a
// merchant publishing to one fast receiver.
func (b *bench) hostile(ctx context.Context) (*report, error) {
	hanging := orDefault(b.cfg.hanging, hostileHanging)
	loadRate := orDefault(b.cfg.loadRate, hostileRate)
	rate := orDefault(b.cfg.rate, probeRate)
	hostileM, calm := b.cfg.merchant+"-hostile-a", b.cfg.merchant+"-hostile-b"
	r := &report{scenario: "hostile", params: fmt.Sprintf("merchant A: %d hanging subscriptions, %g events/s each to all of them (%g attempts/s); merchant B: 1 fast subscription, %g events/s; phases of %s, A's load %s ahead of B's beside phase",
		hanging, loadRate, loadRate*float64(hanging), rate, b.cfg.phase, b.cfg.warmup)}
	owners := append(repeat(hostileM, hanging), calm)
	f, err := b.setUp(ctx, owners, len(owners), hanging, "", int(rate*b.cfg.phase.Seconds())*2)
	if err != nil {
		return r, err
	}
	defer b.tearDown(f)
	solo := b.probePhase(ctx, f, "solo", []string{calm}, rate, b.cfg.phase)
	stop := b.background(ctx, f, "hostile-load", hostileM, int(loadRate*(b.cfg.warmup+b.cfg.phase+2*b.cfg.duration).Seconds()), loadRate)
	sleepCtx(ctx, b.cfg.warmup)
	beside := b.probePhase(ctx, f, "beside", []string{calm}, rate, b.cfg.phase)
	load := stop()
	reportPhase(r, solo)
	reportPhase(r, beside)
	judgeBeside(r, solo, beside)
	r.add("hostile_events_published", load.published, "events")
	r.add("hanging_requests", int64(len(f.rcv.latencies(true)))+f.rcv.counts().HangRetries, "requests")
	r.add("peak_connections", f.rcv.peakInFlight.Load(), "connections")
	return r, ctx.Err()
}

// reportPool adds how much of the pool a fan-out used: the most
// connections open at once and the time to the last arrival and the last
// recorded attempt, against -workers and the ideal time, waves of
// -workers deliveries each taking delay.
func (b *bench) reportPool(r *report, res *deliveryResult, delay time.Duration) {
	r.add("peak_connections", res.peakInFlight, "connections")
	if !res.lastArrival.IsZero() {
		r.add("all_arrived_s", res.lastArrival.Sub(res.pub.start).Seconds(), "s")
	}
	if b.cfg.workers == 0 || res.expected == 0 {
		r.note("-workers not given: connections and time are not judged against the pool")
		return
	}
	want := min(int64(b.cfg.workers), res.expected)
	r.addTarget("peak_connections_pct", float64(res.peakInFlight)*100/float64(want), "%",
		fmt.Sprintf(">= 75 (of %d: -workers, or the deliveries if fewer)", want), res.peakInFlight*4 >= want*3)
	waves := (res.expected + int64(b.cfg.workers) - 1) / int64(b.cfg.workers)
	ideal := time.Duration(waves) * delay
	r.add("ideal_s", ideal.Seconds(), "s")
	if ideal > 0 {
		ratio := res.recordedAt.Sub(res.pub.start).Seconds() / ideal.Seconds()
		r.addTarget("end_to_end_over_ideal", ratio, "×", "<= 2", ratio <= 2 && res.complete)
	}
}

// spread (issue 24, shape 2): merchants × subscriptions receivers that
// answer in -delay, one event per merchant, published together in -batch
// batches as the core API would (-batch 1: each its own request); every
// merchant under its share of the pool, so only a pool used whole
// finishes in the ideal time.
func (b *bench) spread(ctx context.Context) (*report, error) {
	n := orDefault(b.cfg.merchants, spreadMerchants)
	per := orDefault(b.cfg.subscriptions, spreadSubs)
	payload := orDefault(b.cfg.payload, defaultPayload)
	// One port unless -listeners says otherwise: a receiving platform
	// every merchant uses, the layout the issue measured.
	listeners := 1
	if b.cfg.listenersSet {
		listeners = b.cfg.listeners
	}
	r := &report{scenario: "spread", params: fmt.Sprintf("%d merchants × %d subscriptions answering in %s on %d receiver port(s), one event per merchant (%d deliveries) published together in batches of %d, %d B payload",
		n, per, b.cfg.delay, min(listeners, n*per), n*per, b.cfg.batch, payload)}
	merchants := merchantNames(b.cfg.merchant+"-spread", n)
	var owners []string
	for _, m := range merchants {
		owners = append(owners, repeat(m, per)...)
	}
	res, err := b.deliver(ctx, deliveryRun{name: "spread", merchants: merchants, owners: owners, subs: len(owners),
		events: n, batch: b.cfg.batch, payload: payload, delay: b.cfg.delay, listeners: listeners})
	if err != nil {
		return r, err
	}
	b.reportDelivery(r, res)
	b.reportPool(r, res, b.cfg.delay)
	return r, nil
}

// solofanout (issue 24, shape 4): one merchant alone, one event to
// -subscriptions receivers answering in -delay: alone, the merchant should
// have the whole pool.
func (b *bench) solofanout(ctx context.Context) (*report, error) {
	subs := orDefault(b.cfg.subscriptions, solofanoutSubs)
	payload := orDefault(b.cfg.payload, defaultPayload)
	r := &report{scenario: "solofanout", params: fmt.Sprintf("1 merchant alone, 1 event × %d subscriptions answering in %s, %d B payload",
		subs, b.cfg.delay, payload)}
	res, err := b.deliver(ctx, deliveryRun{name: "solofanout", merchants: []string{b.cfg.merchant + "-solofan"},
		subs: subs, events: 1, batch: 1, payload: payload, delay: b.cfg.delay})
	if err != nil {
		return r, err
	}
	b.reportDelivery(r, res)
	b.reportPool(r, res, b.cfg.delay)
	return r, nil
}

// burst (issue 24, shape 3): one merchant publishes -events to its fast
// receiver as fast as the engine accepts them, in -batch batches, while
// another publishes steadily.
func (b *bench) burst(ctx context.Context) (*report, error) {
	events := orDefault(b.cfg.events, burstEvents)
	rate := orDefault(b.cfg.rate, probeRate)
	bursty, calm := b.cfg.merchant+"-burst-a", b.cfg.merchant+"-burst-b"
	r := &report{scenario: "burst", params: fmt.Sprintf("merchant A: %d events to 1 fast subscription in batches of %d, as fast as accepted, from the start of the beside phase; merchant B: 1 fast subscription, %g events/s; phases of %s",
		events, b.cfg.batch, rate, b.cfg.phase)}
	f, err := b.setUp(ctx, []string{bursty, calm}, 2, 0, "", events+int(rate*b.cfg.phase.Seconds())*2)
	if err != nil {
		return r, err
	}
	defer b.tearDown(f)
	solo := b.probePhase(ctx, f, "solo", []string{calm}, rate, b.cfg.phase)
	stop := b.background(ctx, f, "burst-load", bursty, events, 0)
	beside := b.probePhase(ctx, f, "beside", []string{calm}, rate, b.cfg.phase)
	load := stop()
	sent := sentOf(f, load)
	lat, complete := waitArrivals(ctx, f, sent, len(sent), b.cfg.duration)
	reportPhase(r, solo)
	reportPhase(r, beside)
	judgeBeside(r, solo, beside)
	r.add("burst_events_published", load.published, "events")
	r.add("burst_publish_s", load.end.Sub(load.start).Seconds(), "s")
	r.add("burst_arrived", len(lat), "deliveries")
	r.add("burst_complete", complete, "")
	s := summarize(lat)
	r.add("burst_p50_ms", ms(s.P50), "ms")
	r.add("burst_p99_ms", ms(s.P99), "ms")
	r.add("burst_max_ms", ms(s.Max), "ms")
	return r, ctx.Err()
}

// backlogScenario (backlog): merchants with one fast subscription each
// publish steadily, first alone, then beside a merchant with -backlog
// deliveries queued to a receiver that answers in -delay, so the backlog
// lasts the whole phase.
func (b *bench) backlogScenario(ctx context.Context) (*report, error) {
	n := orDefault(b.cfg.merchants, backlogMerchants)
	rate := orDefault(b.cfg.rate, backlogRate)
	queued := orDefault(b.cfg.backlog, backlogDeliveries)
	slow := b.cfg.merchant + "-backlog-slow"
	probes := merchantNames(b.cfg.merchant+"-backlog", n)
	r := &report{scenario: "backlog", params: fmt.Sprintf("%d merchants × 1 fast subscription, %g events/s together; beside a merchant with %d deliveries queued (batches of %d) to 1 subscription answering in %s; phases of %s",
		n, rate, queued, b.cfg.batch, b.cfg.delay, b.cfg.phase)}
	f, err := b.setUp(ctx, append([]string{slow}, probes...), n+1, 0, "", queued+int(rate*b.cfg.phase.Seconds())*2)
	if err != nil {
		return r, err
	}
	defer b.tearDown(f)
	f.rcv.setDelay(0, b.cfg.delay)
	solo := b.probePhase(ctx, f, "solo", probes, rate, b.cfg.phase)
	b.logf("backlog: queueing %d deliveries", queued)
	load := b.publishAll(ctx, f, "backlog-load", slow, queued)
	delivered := f.rcv.uniqueAt(0)
	beside := b.probePhase(ctx, f, "beside", probes, rate, b.cfg.phase)
	reportPhase(r, solo)
	reportPhase(r, beside)
	judgeBeside(r, solo, beside)
	r.add("backlog_events_published", load.published, "events")
	r.add("backlog_publish_s", load.end.Sub(load.start).Seconds(), "s")
	r.add("backlog_delivered_during_beside", f.rcv.uniqueAt(0)-delivered, "deliveries")
	if load.failed > 0 {
		r.note("backlog: %d events failed to publish: %v", load.failed, load.firstErr)
	}
	return r, ctx.Err()
}

// pendingOf counts a subscription's pending deliveries in Postgres.
func (b *bench) pendingOf(ctx context.Context, subscriptionID string) (int64, error) {
	var n int64
	err := b.db.QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE subscription_id = $1::uuid AND status = 'pending'`,
		subscriptionID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count pending deliveries: %w", err)
	}
	return n, nil
}

// ratelimited (issue 24, shape 7): a subscription limited to one delivery
// a second with -backlog deliveries queued, beside a merchant publishing
// steadily; then the subscription is deleted and the other merchant
// measured again, while the bench watches what the deleted subscription
// still causes: arrivals at its receiver, deferred attempt tasks, pending
// deliveries.
func (b *bench) ratelimited(ctx context.Context) (*report, error) {
	rate := orDefault(b.cfg.rate, probeRate)
	queued := orDefault(b.cfg.backlog, ratelimitedBacklog)
	limited, calm := b.cfg.merchant+"-rl-a", b.cfg.merchant+"-rl-b"
	r := &report{scenario: "ratelimited", params: fmt.Sprintf("merchant A: 1 subscription with rate_limit 1, %d deliveries queued (batches of %d); merchant B: 1 fast subscription, %g events/s; phases of %s: solo, beside, after (A's subscription deleted)",
		queued, b.cfg.batch, rate, b.cfg.phase)}
	f, err := b.setUp(ctx, []string{limited, calm}, 2, 0, "", queued+int(rate*b.cfg.phase.Seconds())*3)
	if err != nil {
		return r, err
	}
	defer b.tearDown(f)
	limitedKey, limitedID := f.keys[limited], f.subIDs[0]
	if err := b.eng.updateSubscription(ctx, limitedKey, limitedID, map[string]any{"rate_limit": 1}); err != nil {
		return r, err
	}
	solo := b.probePhase(ctx, f, "solo", []string{calm}, rate, b.cfg.phase)
	b.logf("ratelimited: queueing %d deliveries", queued)
	load := b.publishAll(ctx, f, "ratelimited-load", limited, queued)
	deferredBefore, deferredOK := b.metricTotal(ctx, deferredMetric)
	besideStart := time.Now()
	beside := b.probePhase(ctx, f, "beside", []string{calm}, rate, b.cfg.phase)
	deferredAtDelete, atDeleteOK := b.metricTotal(ctx, deferredMetric)
	besideTook := time.Since(besideStart)
	arrivedAtDelete := f.rcv.uniqueAt(0)
	// A delete can fail while an attempt of the subscription is being
	// recorded (a lock conflict): try again a few times.
	for try := 0; ; try++ {
		err := b.eng.deleteSubscription(ctx, limitedKey, limitedID)
		if err == nil {
			break
		}
		if try == 4 {
			return r, err
		}
		b.logf("ratelimited: %v; trying again", err)
		sleepCtx(ctx, 200*time.Millisecond)
	}
	f.subIDs[0] = "" // tearDown: already gone
	deleted := time.Now()
	pendingAtDelete, pendErr := b.pendingOf(ctx, limitedID)
	after := b.probePhase(ctx, f, "after", []string{calm}, rate, b.cfg.phase)
	deferredAfter, afterOK := b.metricTotal(ctx, deferredMetric)
	afterTook := time.Since(deleted)
	pendingAfter, pendErr2 := b.pendingOf(ctx, limitedID)

	reportPhase(r, solo)
	reportPhase(r, beside)
	reportPhase(r, after)
	judgeBeside(r, solo, beside)
	judgeBeside(r, solo, after)
	r.add("limited_events_published", load.published, "events")
	r.add("limited_delivered_before_delete", arrivedAtDelete, "deliveries")
	arrivedAfter := f.rcv.uniqueAt(0) - arrivedAtDelete
	// One attempt may have been in flight at the delete.
	r.addTarget("limited_arrivals_after_delete", arrivedAfter, "deliveries", "<= 1", arrivedAfter <= 1)
	if pendErr == nil && pendErr2 == nil {
		r.add("limited_pending_after_delete", pendingAtDelete, "deliveries")
		r.addTarget("limited_pending_at_end", pendingAfter, "deliveries", "0", pendingAfter == 0)
	} else {
		r.note("pending deliveries unknown: %v", errors.Join(pendErr, pendErr2))
	}
	if deferredOK && atDeleteOK && afterOK {
		r.add("deferred_per_s_beside", (deferredAtDelete-deferredBefore)/besideTook.Seconds(), "tasks/s")
		r.add("deferred_per_s_after_delete", (deferredAfter-deferredAtDelete)/afterTook.Seconds(), "tasks/s")
	} else {
		r.note("deferred attempts unknown: the /metrics of -metrics could not be read")
	}
	return r, ctx.Err()
}

// isolationScenarios are the scenarios of this file, for the tests.
var isolationScenarios = []string{"hostile", "spread", "burst", "solofanout", "backlog", "ratelimited"}
