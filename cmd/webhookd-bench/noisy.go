package main

import (
	"context"
	"fmt"
)

// The noisy scenarios: latency's load over merchants of which a tenth hang,
// measuring how the healthy ones fare. Their defaults:
const (
	noisySubs     = 10 // one merchant each; the first 10 % hang
	noisy5Hanging = 5  // noisy5: hanging subscriptions of each hostile merchant
)

// noisyLayout is the merchants and subscriptions of the noisy scenarios:
// the first tenth of the merchants (at least one) are hostile, each with
// hangingPer subscriptions whose receivers accept and never answer; every
// other merchant has one healthy subscription.
type noisyLayout struct {
	merchants []string // events go to these round-robin
	owners    []string // merchant of each subscription, the hanging ones first
	hostile   int      // hostile merchants: merchants[:hostile]
	hanging   int      // hanging subscriptions: owners[:hanging]
}

// newNoisyLayout lays out n merchants named prefix-0 … prefix-(n-1).
//
// Events go to the merchants round-robin whatever hangingPer is, so the
// hostile merchants get the same 10 % of events in noisy5 as in noisy. Each
// of those events fans out to every subscription of its merchant: the bench
// subscribes to "*", and the engine delivers an event to each matching
// subscription, as to a merchant whose endpoints all take the same events.
// So each of noisy5's 5 hanging receivers gets exactly what noisy's one
// does (50 attempts/s at 500 events/s); the only change from noisy is the
// number of hanging endpoints. The merchant's attempts grow with them
// (250/s): without a per-merchant share it could hold five subscriptions'
// caps (5 × 64 at the defaults BENCHMARKS.md reports, more than the 256
// workers). Sending each hostile event to one of the five in turn instead
// would take a different event type per endpoint and would model a milder
// merchant: noisy's 50 attempts/s divided among five endpoints.
func newNoisyLayout(prefix string, n, hangingPer int) noisyLayout {
	l := noisyLayout{hostile: max(n/10, 1)}
	l.hanging = l.hostile * hangingPer
	for i := range n {
		m := fmt.Sprintf("%s-%d", prefix, i)
		l.merchants = append(l.merchants, m)
		per := 1
		if i < l.hostile {
			per = hangingPer
		}
		for range per {
			l.owners = append(l.owners, m)
		}
	}
	return l
}

// noisy runs latency's load over merchants of which the first tenth hang
// with hangingPer subscriptions each (noisy: 1, noisy5: noisy5Hanging), and
// reports how the healthy merchants fared.
func noisy(ctx context.Context, l *lab, name string, hangingPer int) (*report, error) {
	rate := orDefault(l.cfg.rate, defaultRate)
	events := orDefault(l.cfg.events, latencyEvents)
	n := orDefault(l.cfg.subscriptions, noisySubs)
	payload := orDefault(l.cfg.payload, defaultPayload)
	nl := newNoisyLayout(l.cfg.merchant+"-"+name, n, hangingPer)
	spreadOver := fmt.Sprintf("%d merchants of one subscription each, %d hanging", n, nl.hanging)
	if hangingPer > 1 {
		spreadOver = fmt.Sprintf("%d merchants, %d of them with %d hanging subscriptions each (%d hanging), the others with one",
			n, nl.hostile, hangingPer, nl.hanging)
	}
	r := &report{scenario: name, params: fmt.Sprintf("%d events at %g events/s spread over %s, %d B payload",
		events, rate, spreadOver, payload)}
	res, err := l.deliver(ctx, deliveryRun{name: name, merchants: nl.merchants, owners: nl.owners, subs: len(nl.owners),
		hanging: nl.hanging, events: events, rate: rate, batch: 1, payload: payload})
	if err != nil {
		return r, err
	}
	l.reportDelivery(r, res)
	r.add("hanging_requests_received", res.hangLatency.N, "requests")
	p99 := ms(res.latency.P99)
	r.addTarget("healthy_p99_ms", p99, "ms", "<= 500", p99 <= 500 && res.complete)
	// The same figures of the scenarios this one is read against, when
	// they ran before it in this invocation.
	for _, ref := range []struct{ scenario, key, as, unit string }{
		{"latency", "latency_p99_ms", "latency_scenario_p99_ms", "ms"},
		{"latency", "deliveries_per_s", "latency_scenario_deliveries_per_s", "deliveries/s"},
		{"noisy", "latency_p99_ms", "noisy_scenario_p99_ms", "ms"},
		{"noisy", "deliveries_per_s", "noisy_scenario_deliveries_per_s", "deliveries/s"},
	} {
		if prev := l.earlier(ref.scenario); prev != nil && ref.scenario != name {
			if v, ok := prev.get(ref.key); ok {
				r.add(ref.as, v, ref.unit)
			}
		}
	}
	return r, nil
}
