package main

import (
	"context"
	"fmt"
	"time"
)

// The retrystorm scenario's defaults.
const (
	retrystormEvents = 10000
	retrystormSubs   = 10
	// retrystormFirstDelay is the first retry delay the engine must be
	// started with (WEBHOOKD_RETRY_SCHEDULE=1s,...).
	retrystormFirstDelay = time.Second
	// retryProbeLimit bounds the probe's first retry: the 1 s delay, its
	// jitter (±10 %) and the engine's own latency fit; the default
	// schedule's 5 s does not.
	retryProbeLimit = 3 * time.Second
	// retryProbeWait bounds the whole probe, publish to retry.
	retryProbeWait = time.Minute
)

// retrystorm measures the engine's retries: every receiver answers 500 to
// the first attempt of each delivery and 204 to the second, so every one
// of events × subscriptions deliveries is retried once. The engine must run
// with a 1 s first retry delay; a probe checks that before the run.
func retrystorm(ctx context.Context, l *lab) (*report, error) {
	load, params := batchedLoad(l, "retrystorm", "-storm", retrystormEvents, retrystormSubs)
	load.failFirst = true
	r := &report{scenario: "retrystorm", params: params + ", every receiver failing the first attempt of each delivery (HTTP 500)"}
	gap, err := probeRetry(ctx, l)
	if gap > 0 {
		r.add("probe_first_retry_s", gap.Seconds(), "s")
	}
	if err != nil {
		return r, err
	}
	res, err := l.deliver(ctx, load)
	if err != nil {
		return r, err
	}
	l.reportDelivery(r, res)
	r.add("first_attempts_refused", res.counts.FirstFails, "requests")
	if !res.firstArrival.IsZero() {
		// Every accepted arrival is a retry: the window runs from the first
		// one to the last success.
		window := res.lastArrival.Sub(res.firstArrival)
		r.add("retry_window_s", window.Seconds(), "s")
		if window > 0 {
			r.add("retry_deliveries_per_s", float64(res.received)/window.Seconds(), "deliveries/s")
		}
	}
	r.add("retry_gap_p50_ms", ms(res.retryGaps.P50), "ms")
	r.add("retry_gap_p99_ms", ms(res.retryGaps.P99), "ms")
	if res.retryGaps.P50 > retryProbeLimit {
		r.note("the median retry came %s after its failed first attempt, against %s configured: the engine fell behind (or its schedule changed since the probe)",
			res.retryGaps.P50.Round(time.Millisecond), retrystormFirstDelay)
	}
	return r, nil
}

// probeRetry publishes one event to one refusing receiver and returns how
// long after the failed first attempt the retry arrived. It refuses to go
// on when the retry is much later than retrystormFirstDelay: the engine
// then runs the default schedule, and the storm would measure its 5 s wait.
func probeRetry(ctx context.Context, l *lab) (time.Duration, error) {
	merchant := l.cfg.merchant + "-storm-probe"
	f, err := l.fleets.setUp(ctx, []string{merchant}, 1, 0, "", 1)
	if err != nil {
		return 0, err
	}
	defer l.fleets.tearDown(f)
	f.rcv.refuseFirst(0)
	ctx, cancel := context.WithTimeout(ctx, retryProbeWait)
	defer cancel()
	pub := l.load.publish(ctx, publishPlan{events: 1, merchant: func(int) string { return merchant }, payload: defaultPayload,
		batch: 1, run: merchant, deadline: time.Now().Add(retryProbeWait), log: f.log, publisher: 1})
	if pub.published != 1 {
		return 0, fmt.Errorf("retry probe: publish: %w", pub.firstErr)
	}
	advice := fmt.Sprintf("start the engine with a %s first retry, e.g. WEBHOOKD_RETRY_SCHEDULE=1s,2s,4s,8s,16s", retrystormFirstDelay)
	if !f.rcv.waitHealthy(ctx, 1) {
		return 0, fmt.Errorf("retry probe: no retry within %s of publishing (%d first attempt(s) refused); %s",
			retryProbeWait, f.rcv.counts().FirstFails, advice)
	}
	gaps := f.rcv.retryGaps()
	if len(gaps) != 1 {
		return 0, fmt.Errorf("retry probe: %d retries measured, want 1", len(gaps))
	}
	l.logf("retrystorm: probe: the first retry came %s after the failed attempt", gaps[0].Round(time.Millisecond))
	if gaps[0] > retryProbeLimit {
		return gaps[0], fmt.Errorf("retry probe: the first retry came %s after the failed attempt, over %s; %s",
			gaps[0].Round(time.Millisecond), retryProbeLimit, advice)
	}
	return gaps[0], nil
}
