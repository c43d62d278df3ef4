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
// fan-out, alone or beside others, uses the whole pool of workers (those
// two, spread and solofanout, are in pool.go). Each latency scenario here
// (hostile, burst, backlog, ratelimited) measures a well-behaved merchant
// (the probe) publishing steadily to fast receivers, first alone ("solo"),
// then beside the load ("beside"); each phase lasts -phase and is waited
// for until every one of its events arrived (or -duration ran out).
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
func probePhase(ctx context.Context, l *lab, f *fleet, name string, merchants []string, rate float64, d time.Duration) phaseResult {
	events := max(int(math.Round(rate*d.Seconds())), 1)
	merchantOf := func(i int) string { return merchants[i%len(merchants)] }
	l.logf("%s: %d events at %g/s over %d merchant(s)", name, events, rate, len(merchants))
	pub := l.load.publish(ctx, publishPlan{events: events, merchant: merchantOf, payload: orDefault(l.cfg.payload, defaultPayload),
		rate: rate, batch: 1, run: l.cfg.merchant + "-" + name, deadline: time.Now().Add(d + l.cfg.duration),
		log: f.log, publisher: l.load.publishersFor(0)})
	per := f.healthyPerMerchant()
	p := phaseResult{name: name, pub: pub}
	for i, ok := range pub.ok {
		if ok {
			p.expected += int(per[merchantOf(i)])
		}
	}
	lat, complete := waitArrivals(ctx, f, sentOf(f, pub), p.expected, l.cfg.duration)
	p.arrived, p.complete = len(lat), complete && pub.failed == 0
	p.lat = summarize(lat)
	p.took = time.Since(pub.start)
	return p
}

// background publishes events of merchant in the background, at rate
// events/s one per request (rate 0: as fast as accepted, in -batch
// batches), until it has published events or stop is called; stop
// returns what was published.
func background(ctx context.Context, l *lab, f *fleet, name, merchant string, events int, rate float64) (stop func() publishStats) {
	ctx, cancel := context.WithCancel(ctx)
	batch := 1
	if rate == 0 {
		batch = l.cfg.batch
	}
	done := make(chan publishStats, 1)
	go func() {
		done <- l.load.publish(ctx, publishPlan{events: events, merchant: func(int) string { return merchant },
			payload: orDefault(l.cfg.payload, defaultPayload), rate: rate, batch: batch, run: l.cfg.merchant + "-" + name,
			deadline: time.Now().Add(2 * l.cfg.duration), log: f.log, publisher: l.load.publishersFor(0)})
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
func publishAll(ctx context.Context, l *lab, f *fleet, name, merchant string, events int) publishStats {
	return l.load.publish(ctx, publishPlan{events: events, merchant: func(int) string { return merchant },
		payload: orDefault(l.cfg.payload, defaultPayload), batch: l.cfg.batch, run: l.cfg.merchant + "-" + name,
		deadline: time.Now().Add(l.cfg.duration), log: f.log, publisher: l.load.publishersFor(0)})
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
func hostile(ctx context.Context, l *lab) (*report, error) {
	hanging := orDefault(l.cfg.hanging, hostileHanging)
	loadRate := orDefault(l.cfg.loadRate, hostileRate)
	rate := orDefault(l.cfg.rate, probeRate)
	hostileM, calm := l.cfg.merchant+"-hostile-a", l.cfg.merchant+"-hostile-b"
	r := &report{scenario: "hostile", params: fmt.Sprintf("merchant A: %d hanging subscriptions, %g events/s each to all of them (%g attempts/s); merchant B: 1 fast subscription, %g events/s; phases of %s, A's load %s ahead of B's beside phase",
		hanging, loadRate, loadRate*float64(hanging), rate, l.cfg.phase, l.cfg.warmup)}
	owners := append(repeat(hostileM, hanging), calm)
	f, err := l.fleets.setUp(ctx, owners, len(owners), hanging, "", int(rate*l.cfg.phase.Seconds())*2)
	if err != nil {
		return r, err
	}
	defer l.fleets.tearDown(f)
	load := soloThenBeside(ctx, l, f, r, "hostile-load", hostileM, calm, loadRate, rate)
	r.add("hostile_events_published", load.published, "events")
	r.add("hanging_requests", int64(len(f.rcv.latencies(true)))+f.rcv.counts().HangRetries, "requests")
	r.add("peak_connections", f.rcv.peakInFlight.Load(), "connections")
	return r, ctx.Err()
}

// soloThenBeside measures calm's probe alone, then beside loadMerchant
// publishing loadRate events/s in the background (name), a warm-up ahead
// of the beside phase; it reports and judges both phases and returns
// what the load published.
func soloThenBeside(ctx context.Context, l *lab, f *fleet, r *report, name, loadMerchant, calm string, loadRate, rate float64) publishStats {
	solo := probePhase(ctx, l, f, "solo", []string{calm}, rate, l.cfg.phase)
	stop := background(ctx, l, f, name, loadMerchant, int(loadRate*(l.cfg.warmup+l.cfg.phase+2*l.cfg.duration).Seconds()), loadRate)
	sleepCtx(ctx, l.cfg.warmup)
	beside := probePhase(ctx, l, f, "beside", []string{calm}, rate, l.cfg.phase)
	load := stop()
	reportPhase(r, solo)
	reportPhase(r, beside)
	judgeBeside(r, solo, beside)
	return load
}

// burst (issue 24, shape 3): one merchant publishes -events to its fast
// receiver as fast as the engine accepts them, in -batch batches, while
// another publishes steadily.
func burst(ctx context.Context, l *lab) (*report, error) {
	events := orDefault(l.cfg.events, burstEvents)
	rate := orDefault(l.cfg.rate, probeRate)
	bursty, calm := l.cfg.merchant+"-burst-a", l.cfg.merchant+"-burst-b"
	r := &report{scenario: "burst", params: fmt.Sprintf("merchant A: %d events to 1 fast subscription in batches of %d, as fast as accepted, from the start of the beside phase; merchant B: 1 fast subscription, %g events/s; phases of %s",
		events, l.cfg.batch, rate, l.cfg.phase)}
	f, err := l.fleets.setUp(ctx, []string{bursty, calm}, 2, 0, "", events+int(rate*l.cfg.phase.Seconds())*2)
	if err != nil {
		return r, err
	}
	defer l.fleets.tearDown(f)
	solo := probePhase(ctx, l, f, "solo", []string{calm}, rate, l.cfg.phase)
	stop := background(ctx, l, f, "burst-load", bursty, events, 0)
	beside := probePhase(ctx, l, f, "beside", []string{calm}, rate, l.cfg.phase)
	load := stop()
	sent := sentOf(f, load)
	lat, complete := waitArrivals(ctx, f, sent, len(sent), l.cfg.duration)
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
func backlogScenario(ctx context.Context, l *lab) (*report, error) {
	n := orDefault(l.cfg.merchants, backlogMerchants)
	rate := orDefault(l.cfg.rate, backlogRate)
	queued := orDefault(l.cfg.backlog, backlogDeliveries)
	slow := l.cfg.merchant + "-backlog-slow"
	probes := merchantNames(l.cfg.merchant+"-backlog", n)
	r := &report{scenario: "backlog", params: fmt.Sprintf("%d merchants × 1 fast subscription, %g events/s together; beside a merchant with %d deliveries queued (batches of %d) to 1 subscription answering in %s; phases of %s",
		n, rate, queued, l.cfg.batch, l.cfg.delay, l.cfg.phase)}
	f, err := l.fleets.setUp(ctx, append([]string{slow}, probes...), n+1, 0, "", queued+int(rate*l.cfg.phase.Seconds())*2)
	if err != nil {
		return r, err
	}
	defer l.fleets.tearDown(f)
	f.rcv.setDelay(0, l.cfg.delay)
	solo := probePhase(ctx, l, f, "solo", probes, rate, l.cfg.phase)
	l.logf("backlog: queueing %d deliveries", queued)
	load := publishAll(ctx, l, f, "backlog-load", slow, queued)
	delivered := f.rcv.uniqueAt(0)
	beside := probePhase(ctx, l, f, "beside", probes, rate, l.cfg.phase)
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

// ratelimited (issue 24, shape 7): a subscription limited to one delivery
// a second with -backlog deliveries queued, beside a merchant publishing
// steadily; then the subscription is deleted and the other merchant
// measured again, while the bench watches what the deleted subscription
// still causes: arrivals at its receiver, deferred attempt tasks, pending
// deliveries.
func ratelimited(ctx context.Context, l *lab) (*report, error) {
	rate := orDefault(l.cfg.rate, probeRate)
	queued := orDefault(l.cfg.backlog, ratelimitedBacklog)
	limited, calm := l.cfg.merchant+"-rl-a", l.cfg.merchant+"-rl-b"
	r := &report{scenario: "ratelimited", params: fmt.Sprintf("merchant A: 1 subscription with rate_limit 1, %d deliveries queued (batches of %d); merchant B: 1 fast subscription, %g events/s; phases of %s: solo, beside, after (A's subscription deleted)",
		queued, l.cfg.batch, rate, l.cfg.phase)}
	f, err := l.fleets.setUp(ctx, []string{limited, calm}, 2, 0, "", queued+int(rate*l.cfg.phase.Seconds())*3)
	if err != nil {
		return r, err
	}
	defer l.fleets.tearDown(f)
	limitedKey, limitedID := f.keys[limited], f.subIDs[0]
	if err := l.eng.updateSubscription(ctx, limitedKey, limitedID, map[string]any{"rate_limit": 1}); err != nil {
		return r, err
	}
	solo := probePhase(ctx, l, f, "solo", []string{calm}, rate, l.cfg.phase)
	l.logf("ratelimited: queueing %d deliveries", queued)
	load := publishAll(ctx, l, f, "ratelimited-load", limited, queued)
	deferredBefore, deferredOK := l.meter.metricTotal(ctx, deferredMetric)
	besideStart := time.Now()
	beside := probePhase(ctx, l, f, "beside", []string{calm}, rate, l.cfg.phase)
	deferredAtDelete, atDeleteOK := l.meter.metricTotal(ctx, deferredMetric)
	besideTook := time.Since(besideStart)
	arrivedAtDelete := f.rcv.uniqueAt(0)
	// A delete can fail while an attempt of the subscription is being
	// recorded (a lock conflict): try again a few times.
	for try := 0; ; try++ {
		err := l.eng.deleteSubscription(ctx, limitedKey, limitedID)
		if err == nil {
			break
		}
		if try == 4 {
			return r, err
		}
		l.logf("ratelimited: %v; trying again", err)
		sleepCtx(ctx, 200*time.Millisecond)
	}
	f.subIDs[0] = "" // tearDown: already gone
	deleted := time.Now()
	pendingAtDelete, pendErr := pendingOfSubscription(ctx, l.meter.db, limitedID)
	after := probePhase(ctx, l, f, "after", []string{calm}, rate, l.cfg.phase)
	deferredAfter, afterOK := l.meter.metricTotal(ctx, deferredMetric)
	afterTook := time.Since(deleted)
	pendingAfter, pendErr2 := pendingOfSubscription(ctx, l.meter.db, limitedID)

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

// isolationScenarios are the scenarios of issue 24, of this file and
// pool.go, for the tests.
var isolationScenarios = []string{"hostile", "spread", "burst", "solofanout", "backlog", "ratelimited"}
