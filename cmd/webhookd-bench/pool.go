package main

import (
	"context"
	"fmt"
	"time"
)

// Whether one merchant's fan-out, alone or beside others, uses the whole
// pool of workers (issue 24's shapes 2 and 4, isolation scenarios run only
// when named): each is one deliveryRun to receivers that answer in -delay,
// judged on the connections open at once and the time to the last
// delivery against -workers. Their defaults are in isolation.go.

// reportPool adds how much of the pool a fan-out used: the most
// connections open at once and the time to the last arrival and the last
// recorded attempt, against workers (-workers, 0: not judged) and the
// ideal time, waves of workers deliveries each taking delay.
func reportPool(r *report, res *deliveryResult, delay time.Duration, workers int) {
	r.add("peak_connections", res.peakInFlight, "connections")
	if !res.lastArrival.IsZero() {
		r.add("all_arrived_s", res.lastArrival.Sub(res.pub.start).Seconds(), "s")
	}
	if workers == 0 || res.expected == 0 {
		r.note("-workers not given: connections and time are not judged against the pool")
		return
	}
	want := min(int64(workers), res.expected)
	r.addTarget("peak_connections_pct", float64(res.peakInFlight)*100/float64(want), "%",
		fmt.Sprintf(">= 75 (of %d: -workers, or the deliveries if fewer)", want), res.peakInFlight*4 >= want*3)
	waves := (res.expected + int64(workers) - 1) / int64(workers)
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
func spread(ctx context.Context, l *lab) (*report, error) {
	n := orDefault(l.cfg.merchants, spreadMerchants)
	per := orDefault(l.cfg.subscriptions, spreadSubs)
	payload := orDefault(l.cfg.payload, defaultPayload)
	// One port unless -listeners says otherwise: a receiving platform
	// every merchant uses, the layout the issue measured.
	listeners := 1
	if l.cfg.listenersSet {
		listeners = l.cfg.listeners
	}
	r := &report{scenario: "spread", params: fmt.Sprintf("%d merchants × %d subscriptions answering in %s on %d receiver port(s), one event per merchant (%d deliveries) published together in batches of %d, %d B payload",
		n, per, l.cfg.delay, min(listeners, n*per), n*per, l.cfg.batch, payload)}
	merchants := merchantNames(l.cfg.merchant+"-spread", n)
	var owners []string
	for _, m := range merchants {
		owners = append(owners, repeat(m, per)...)
	}
	res, err := l.deliver(ctx, deliveryRun{name: "spread", merchants: merchants, owners: owners, subs: len(owners),
		events: n, batch: l.cfg.batch, payload: payload, delay: l.cfg.delay, listeners: listeners})
	if err != nil {
		return r, err
	}
	l.reportDelivery(r, res)
	reportPool(r, res, l.cfg.delay, l.cfg.workers)
	return r, nil
}

// solofanout (issue 24, shape 4): one merchant alone, one event to
// -subscriptions receivers answering in -delay: alone, the merchant should
// have the whole pool.
func solofanout(ctx context.Context, l *lab) (*report, error) {
	subs := orDefault(l.cfg.subscriptions, solofanoutSubs)
	payload := orDefault(l.cfg.payload, defaultPayload)
	r := &report{scenario: "solofanout", params: fmt.Sprintf("1 merchant alone, 1 event × %d subscriptions answering in %s, %d B payload",
		subs, l.cfg.delay, payload)}
	res, err := l.deliver(ctx, deliveryRun{name: "solofanout", merchants: []string{l.cfg.merchant + "-solofan"},
		subs: subs, events: 1, batch: 1, payload: payload, delay: l.cfg.delay})
	if err != nil {
		return r, err
	}
	l.reportDelivery(r, res)
	reportPool(r, res, l.cfg.delay, l.cfg.workers)
	return r, nil
}
