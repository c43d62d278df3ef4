package main

import (
	"context"
	"fmt"
)

// The plain delivery scenarios (issue 7): how many deliveries a second the
// engine sustains (throughput), how soon a steady load arrives (latency),
// and how fast one event reaches many subscriptions (fanout). Each is one
// deliveryRun; their defaults, every one overridable by its flag:
const (
	throughputEvents = 10000 // × throughputSubs = the 100,000 deliveries of the target
	throughputSubs   = 10
	latencyEvents    = 15000 // 30 s at 500 events/s
	fanoutSubs       = 1000
	// loadedRate is the publish rate from which latency's p99 target is
	// the loaded one (≤ 100 ms); below it, the light-load targets hold.
	loadedRate = 500
)

// batchedLoad is the load of throughput and retrystorm: events published
// in batches as fast as the engine accepts them, each delivered to every
// one of subs subscriptions of one merchant; and its description.
func batchedLoad(l *lab, name, merchantSuffix string, events, subs int) (deliveryRun, string) {
	events = orDefault(l.cfg.events, events)
	subs = orDefault(l.cfg.subscriptions, subs)
	payload := orDefault(l.cfg.payload, defaultPayload)
	return deliveryRun{name: name, merchants: []string{l.cfg.merchant + merchantSuffix},
			subs: subs, events: events, batch: l.cfg.batch, payload: payload},
		fmt.Sprintf("%d events × %d subscriptions, %d B payload, batches of %d, %d publishers",
			events, subs, payload, l.cfg.batch, l.load.publishersFor(0))
}

// throughput publishes throughputEvents to throughputSubs subscriptions of
// one merchant in batches as fast as accepted: the deliveries a second the
// engine sustains, and their share of raw's ceiling when raw ran first.
func throughput(ctx context.Context, l *lab) (*report, error) {
	load, params := batchedLoad(l, "throughput", "-tp", throughputEvents, throughputSubs)
	r := &report{scenario: "throughput", params: params}
	res, err := l.deliver(ctx, load)
	if err != nil {
		return r, err
	}
	l.reportDelivery(r, res)
	if v, ok := r.get("deliveries_per_s"); ok {
		dps := v.(float64)
		r.addTarget("sustained_deliveries_per_s", dps, "deliveries/s", ">= 3000", dps >= 3000 && res.expected >= 100000 && res.complete)
		if raw := l.earlier("raw"); raw != nil {
			if rv, ok := raw.get("deliveries_per_s"); ok && rv.(float64) > 0 {
				frac := dps / rv.(float64) * 100
				r.addTarget("fraction_of_raw_pct", frac, "%", ">= 40", frac >= 40)
			}
		}
		if res.expected < 100000 {
			r.note("the target is over 100,000 deliveries; this run had %d", res.expected)
		}
	}
	return r, nil
}

// latency publishes one event per request at a fixed rate: how soon after
// publishing a steady load arrives.
func latency(ctx context.Context, l *lab) (*report, error) {
	rate := orDefault(l.cfg.rate, defaultRate)
	events := orDefault(l.cfg.events, latencyEvents)
	subs := orDefault(l.cfg.subscriptions, 1)
	payload := orDefault(l.cfg.payload, defaultPayload)
	r := &report{scenario: "latency", params: fmt.Sprintf("%d events at %g events/s × %d subscriptions, %d B payload, one event per request",
		events, rate, subs, payload)}
	res, err := l.deliver(ctx, deliveryRun{name: "latency", merchants: []string{l.cfg.merchant + "-lat"},
		subs: subs, events: events, rate: rate, batch: 1, payload: payload})
	if err != nil {
		return r, err
	}
	l.reportDelivery(r, res)
	pubSecs := res.pub.end.Sub(res.pub.start).Seconds()
	if pubSecs > 0 {
		r.add("achieved_rate_events_per_s", float64(res.pub.published)/pubSecs, "events/s")
	}
	judgeLatency(r, rate, ms(res.latency.P99), res.complete)
	return r, nil
}

// judgeLatency adds latency's p99 to r judged against the targets of its
// rate: from loadedRate, p99 ≤ 100 ms; below it, the light-load targets,
// the latency a quiet engine owes (≤ 10 ms) and its whole cost per
// delivery, engine, Postgres and Redis (≤ 1.0 CPU ms).
func judgeLatency(r *report, rate, p99 float64, complete bool) {
	if rate >= loadedRate {
		r.addTarget("p99_ms", p99, "ms", "<= 100", p99 <= 100 && complete)
		return
	}
	r.addTarget("p99_ms", p99, "ms", "<= 10 (light load)", p99 <= 10 && complete)
	if v, ok := r.get("cpu_total_ms_per_delivery"); ok {
		if total, isFloat := v.(float64); isFloat {
			r.target("cpu_total_ms_per_delivery", "<= 1.0 (light load)", total <= 1.0)
		}
	}
}

// fanout publishes one event to fanoutSubs subscriptions of one merchant:
// how soon all of them have it.
func fanout(ctx context.Context, l *lab) (*report, error) {
	subs := orDefault(l.cfg.subscriptions, fanoutSubs)
	events := orDefault(l.cfg.events, 1)
	payload := orDefault(l.cfg.payload, defaultPayload)
	r := &report{scenario: "fanout", params: fmt.Sprintf("%d event(s) × %d subscriptions of one merchant, %d B payload", events, subs, payload)}
	res, err := l.deliver(ctx, deliveryRun{name: "fanout", merchants: []string{l.cfg.merchant + "-fan"},
		subs: subs, events: events, batch: 1, payload: payload})
	if err != nil {
		return r, err
	}
	l.reportDelivery(r, res)
	if !res.lastArrival.IsZero() {
		r.add("all_arrived_s", res.lastArrival.Sub(res.pub.start).Seconds(), "s")
	}
	e2e := res.recordedAt.Sub(res.pub.start).Seconds()
	r.addTarget("all_recorded_s", e2e, "s", "<= 2", e2e <= 2 && res.complete && subs >= 1000)
	return r, nil
}
