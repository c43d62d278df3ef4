package main

import (
	"context"
	"encoding/json"
	"math"
	"time"
)

// deliveryRun is the common shape of the delivery scenarios (throughput,
// latency, noisy, fanout, ordered, single, retrystorm, footprint, spread,
// solofanout): publish, wait until every healthy receiver has its
// deliveries and Postgres holds a succeeded attempt for each, and measure
// on the way.
type deliveryRun struct {
	name      string
	merchants []string // events go to these round-robin
	owners    []string // merchant of each subscription; nil: merchants round-robin
	subs      int
	hanging   int
	events    int
	rate      float64
	batch     int
	payload   int
	orderKeys int // see publishPlan
	// publishers is the scenario's default of -publishers (0: defaultPublishers).
	publishers int
	// payloadOf: see publishPlan.
	payloadOf func(run string, seq, size int) json.RawMessage
	// failFirst makes every receiver refuse the first attempt of each
	// delivery (retrystorm).
	failFirst bool
	// delay makes every receiver answer that long after a delivery
	// arrives (spread, solofanout).
	delay time.Duration
	// listeners, when positive, replaces -listeners (spread: one host).
	listeners int
	// prepare, when set, runs on the fleet before publishing (the ordered
	// scenario turns ordering on).
	prepare func(context.Context, *fleet) error
	// shape, when set, makes the subscriptions and receivers other than
	// plain HTTP (mtls, jwe, broker).
	shape endpointShape
}

// deliveryResult is what a deliveryRun measured.
type deliveryResult struct {
	pub          publishStats
	expected     int64 // healthy deliveries that should complete
	received     int64
	recorded     int64
	firstArrival time.Time
	lastArrival  time.Time
	recordedAt   time.Time
	complete     bool
	latency      latencySummary
	hangLatency  latencySummary
	counts       endpointCounts
	cpu          cpuSample
	cpuOK        bool
	retryGaps    latencySummary // failFirst: refused first attempt to accepted retry
	// requeued is the growth of webhookd_sweeper_requeued_total over the
	// run, summed over -metrics; requeuedOK says it could be read.
	requeued   int64
	requeuedOK bool
	// peakInFlight is the most requests the receivers served at once: the
	// engine's connections open to them.
	peakInFlight int64
}

// deliver sets up d's fleet, publishes d's events, waits until every
// healthy receiver has its deliveries and Postgres holds a succeeded
// attempt for each (or -duration ran out), and measures on the way: the
// run most scenarios are made of.
func (l *lab) deliver(ctx context.Context, d deliveryRun) (*deliveryResult, error) {
	owners := d.owners
	if owners == nil {
		owners = d.merchants
	}
	f, err := l.fleets.setUpWith(ctx, owners, d.subs, d.hanging, "", d.events, orDefault(d.listeners, l.cfg.listeners), d.shape)
	if err != nil {
		return nil, err
	}
	defer l.fleets.tearDown(f)
	if d.prepare != nil {
		if err := d.prepare(ctx, f); err != nil {
			return nil, err
		}
	}
	for i := range f.rcv.endpoints {
		if d.failFirst {
			f.rcv.refuseFirst(i)
		}
		if d.delay > 0 {
			f.rcv.setDelay(i, d.delay)
		}
	}
	healthyPer := f.healthyPerMerchant()
	merchantOf := func(i int) string { return d.merchants[i%len(d.merchants)] }
	requeuedBefore, requeuedErr := l.meter.sweeperRequeued(ctx)
	cpuBefore, cpuErr := l.meter.sampleCPU(ctx)
	deadline := time.Now().Add(l.cfg.duration)
	pub := l.load.publish(ctx, publishPlan{events: d.events, merchant: merchantOf, payload: d.payload, rate: d.rate,
		batch: d.batch, run: l.cfg.merchant + "-" + d.name, deadline: deadline, log: f.log, publisher: l.load.publishersFor(d.publishers),
		orderKeys: d.orderKeys, payloadOf: d.payloadOf})
	res := &deliveryResult{pub: pub}
	if pub.firstErr != nil {
		l.logf("%s: %d events failed to publish: %v", d.name, pub.failed, pub.firstErr)
	}
	// Only the events that were accepted can be delivered.
	for i, ok := range pub.ok {
		if ok {
			res.expected += healthyPer[merchantOf(i)]
		}
	}
	l.logf("%s: published %d events in %s, waiting for %d deliveries", d.name, pub.published,
		pub.end.Sub(pub.start).Round(time.Millisecond), res.expected)
	waitCtx, cancel := context.WithDeadline(ctx, deadline.Add(30*time.Second))
	defer cancel()
	res.complete = f.rcv.waitHealthy(waitCtx, res.expected)
	if fa := f.rcv.firstArrival.Load(); fa > 0 {
		res.firstArrival = time.Unix(0, fa)
	}
	if la := f.rcv.lastArrival.Load(); la > 0 {
		res.lastArrival = time.Unix(0, la)
	}
	res.received = f.rcv.healthyUnique.Load()
	// The receivers have everything (or the cap hit): now Postgres must
	// show a succeeded attempt for each, which the engine writes after the
	// answer arrives.
	healthy := f.healthyMerchants()
	for {
		n, err := recordedDeliveries(ctx, l.meter.db, healthy)
		if err != nil {
			return res, err
		}
		res.recorded, res.recordedAt = n, time.Now()
		if n >= res.expected || waitCtx.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	res.complete = res.complete && res.recorded >= res.expected
	if cpuErr == nil {
		if after, err := l.meter.sampleCPU(ctx); err == nil {
			res.cpu, res.cpuOK = after.sub(cpuBefore), true
		}
	}
	if requeuedErr == nil {
		if after, err := l.meter.sweeperRequeued(ctx); err == nil {
			// A counter: whole deliveries, carried as a float by the text format.
			res.requeued, res.requeuedOK = int64(math.Round(after-requeuedBefore)), true
		}
	}
	res.retryGaps = summarize(f.rcv.retryGaps())
	res.latency = summarize(f.rcv.latencies(false))
	res.hangLatency = summarize(f.rcv.latencies(true))
	res.counts = f.rcv.counts()
	res.peakInFlight = f.rcv.peakInFlight.Load()
	return res, nil
}

// reportDelivery turns a deliveryResult into the figures every delivery
// scenario shares.
func (l *lab) reportDelivery(r *report, res *deliveryResult) {
	pubSecs := res.pub.end.Sub(res.pub.start).Seconds()
	r.add("events_published", res.pub.published, "events")
	if res.pub.failed > 0 {
		r.add("events_failed_to_publish", res.pub.failed, "events")
		r.note("first publish error: %v", res.pub.firstErr)
	}
	r.add("publish_batched", res.pub.batched, "")
	if pubSecs > 0 {
		r.add("events_accepted_per_s", float64(res.pub.published)/pubSecs, "events/s")
	}
	r.add("deliveries_expected", res.expected, "deliveries")
	r.add("deliveries_received", res.received, "deliveries")
	r.add("deliveries_recorded", res.recorded, "deliveries")
	r.add("complete", res.complete, "")
	r.add("bad_signatures", res.counts.BadSignatures, "requests")
	r.add("duplicates", res.counts.Duplicates, "requests")
	if res.counts.HangRetries > 0 {
		r.add("hanging_retries", res.counts.HangRetries, "requests")
	}
	if res.counts.Unknown > 0 {
		r.add("unknown_events", res.counts.Unknown, "requests")
	}
	if res.requeuedOK {
		r.add("sweeper_requeued", res.requeued, "deliveries")
	} else {
		r.note("sweeper re-queues unknown: no %s in the /metrics of -metrics", sweeperRequeuedMetric)
	}
	e2e := res.recordedAt.Sub(res.pub.start)
	r.add("end_to_end_s", e2e.Seconds(), "s")
	if e2e > 0 {
		r.add("deliveries_per_s", float64(res.recorded)/e2e.Seconds(), "deliveries/s")
	}
	r.add("latency_p50_ms", ms(res.latency.P50), "ms")
	r.add("latency_p95_ms", ms(res.latency.P95), "ms")
	r.add("latency_p99_ms", ms(res.latency.P99), "ms")
	r.add("latency_max_ms", ms(res.latency.Max), "ms")
	if res.cpuOK {
		l.meter.reportCPU(r, res.cpu, res.recorded)
	}
	if res.counts.BadSignatures > 0 {
		r.note("%d deliveries failed signature verification", res.counts.BadSignatures)
	}
	if !res.complete {
		r.note("incomplete: %d of %d deliveries recorded within -duration %s", res.recorded, res.expected, l.cfg.duration)
	}
}
