package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The scale scenario (issue 30): how the engine's cost grows with the work
// it holds, where every other scenario runs 20,000 deliveries on a handful
// of merchants. Two curves, each a list of points:
//   - backlog: N deliveries queued while every receiver answers 503, then
//     released (the receivers answer 204): deliveries/s from release until
//     every one is recorded;
//   - merchants: M merchants with scaleSubsPerMerchant subscriptions each
//     and a steady publish load spread over them.
//
// Each point also measures a light merchant, one subscription publishing
// scaleLightRate events/s while the point runs (publish → arrival p99), the
// CPU per delivery of every party, Postgres's database size and Redis's
// used_memory. The third axis, worker processes, is the same scenario run
// against engines of different shapes (scripts/bench-scale.sh).
const (
	scaleBacklogDefault  = "10000,100000,1000000"
	scaleMerchantDefault = "100,1000,10000"
	// scaleBacklogMerchants × scaleSubsPerMerchant subscriptions hold the
	// backlog: enough merchants that per-merchant and per-subscription
	// shares do not cap the drain, which measures the engine, not a cap.
	scaleBacklogMerchants = 10
	scaleSubsPerMerchant  = 10
	// scaleLightRate is the light merchant's events/s.
	scaleLightRate = 5
	// scaleMerchantRate is the merchants curve's events/s (-rate), each
	// fanned out to its merchant's scaleSubsPerMerchant subscriptions.
	scaleMerchantRate = 100
	// scaleProbeAttempts is how many refused attempts the probe times:
	// three gaps, the first three delays of the engine's schedule.
	scaleProbeAttempts = 4
	// scaleReleaseLimit is the longest delay between attempts the probe
	// accepts: a released backlog then starts within it.
	scaleReleaseLimit = 3 * time.Second
	// scaleSchedule is the schedule the usage and the refusal advise: a
	// flat 1 s, long enough that no delivery runs out of attempts while
	// the receivers are down.
	scaleSchedule = "1s repeated 60 times (WEBHOOKD_RETRY_SCHEDULE=$(printf '1s,%.0s' {1..59})1s)"
)

// scalePoint is one measured point of a curve, what the table, the JSON
// and the plot are made of.
type scalePoint struct {
	curve string // "backlog" or "merchants"
	size  int    // deliveries queued, or merchants
	// deliveriesPerS is recorded deliveries over release (backlog) or
	// first publish (merchants) to the last one recorded.
	deliveriesPerS float64
	cpu            cpuShare
	cpuOK          bool
	lightP99       time.Duration
}

// parsePoints reads a -scale-* flag: comma-separated positive counts, each
// optionally ending in k (thousands) or M (millions), distinct, run in the
// order given. An empty value is no point (that curve is skipped).
func parsePoints(flagName, s string) ([]int, error) {
	var out []int
	for _, item := range splitList(s) {
		mult, digits := 1, item
		switch {
		case strings.HasSuffix(item, "k"):
			mult, digits = 1000, strings.TrimSuffix(item, "k")
		case strings.HasSuffix(item, "M"):
			mult, digits = 1000000, strings.TrimSuffix(item, "M")
		}
		n, err := strconv.Atoi(digits)
		if err != nil || n < 1 || n > 100000000/mult {
			return nil, fmt.Errorf("%s: %q is not a count between 1 and 100M", flagName, item)
		}
		n *= mult
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("%s: %d listed twice", flagName, n)
		}
		out = append(out, n)
	}
	return out, nil
}

// checkReleaseGaps is the refusal rule: the engine's first delays between
// attempts (gaps, as the probe measured them) must all be within limit, or
// a backlog released at the receivers would wait that long for its next
// attempt and the drain would measure the schedule, not the engine.
func checkReleaseGaps(gaps []time.Duration, want int, limit time.Duration) error {
	if len(gaps) < want {
		return fmt.Errorf("the probe saw %d delays between refused attempts, want %d: the schedule is shorter, or slower than the probe's wait", len(gaps), want)
	}
	for i, g := range gaps {
		if g > limit {
			return fmt.Errorf("delay %d between attempts was %s, over %s", i+1, g.Round(time.Millisecond), limit)
		}
	}
	return nil
}

// scale runs the backlog points, then the merchants points, adds each
// point's figures to one report and plots the curves to -scale-plot.
func scale(ctx context.Context, l *lab) (*report, error) {
	r := &report{scenario: "scale", params: fmt.Sprintf("backlog %v deliveries over %d merchants × %d subscriptions, queued while the receivers answer 503, then released; merchants %v × %d subscriptions, %g events/s spread over them; a light merchant at %d events/s during each point",
		l.cfg.scaleBacklog, l.cfg.scaleBacklogMerchants, scaleSubsPerMerchant, l.cfg.scaleMerchants, scaleSubsPerMerchant,
		orDefault(l.cfg.rate, scaleMerchantRate), scaleLightRate)}
	if on, err := autovacuumOn(ctx, l.meter.db); err == nil && !on {
		// Every attempt updates its delivery's row and its subscription's
		// (health): without vacuum the dead versions grow with the length
		// of the point, and the figures with them.
		r.note("autovacuum is off on this Postgres: dead row versions accumulate over the run, so later and longer points pay for the earlier ones")
	}
	var points []scalePoint
	if len(l.cfg.scaleBacklog) > 0 {
		gaps, err := probeReleaseGaps(ctx, l)
		for i, g := range gaps {
			r.add(fmt.Sprintf("probe_delay_%d_s", i+1), g.Seconds(), "s")
		}
		if err == nil {
			err = checkReleaseGaps(gaps, scaleProbeAttempts-1, scaleReleaseLimit)
		}
		if err != nil {
			return r, fmt.Errorf("retry probe: %w; start the engine with %s", err, scaleSchedule)
		}
	}
	for _, n := range l.cfg.scaleBacklog {
		p, err := scaleBacklogPoint(ctx, l, r, n)
		if err != nil {
			return r, fmt.Errorf("backlog %d: %w", n, err)
		}
		points = append(points, p)
	}
	for _, m := range l.cfg.scaleMerchants {
		p, err := scaleMerchantsPoint(ctx, l, r, m)
		if err != nil {
			return r, fmt.Errorf("merchants %d: %w", m, err)
		}
		points = append(points, p)
	}
	if l.cfg.scalePlot != "" && len(points) > 0 {
		if err := writeScalePlot(l.cfg.scalePlot, points); err != nil {
			return r, err
		}
		r.note("plot written to %s", l.cfg.scalePlot)
	}
	return r, ctx.Err()
}

// probeReleaseGaps publishes one event to a receiver that answers 503 and
// returns the delays between its first scaleProbeAttempts attempts.
func probeReleaseGaps(ctx context.Context, l *lab) ([]time.Duration, error) {
	var mu sync.Mutex
	var at []time.Time
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if len(at) >= scaleProbeAttempts {
			w.WriteHeader(http.StatusNoContent) // enough: let it succeed
			return
		}
		at = append(at, time.Now())
		w.WriteHeader(http.StatusServiceUnavailable)
	})}
	go srv.Serve(ln) //nolint:errcheck // ErrServerClosed on close
	defer srv.Close()
	merchant := l.cfg.merchant + "-scale-probe"
	key, err := l.eng.issueKey(ctx, merchant)
	if err != nil {
		return nil, err
	}
	sub, err := l.eng.createSubscription(ctx, key, "http://"+ln.Addr().String()+"/probe")
	if err != nil {
		return nil, err
	}
	defer func() { _ = l.eng.deleteSubscription(context.WithoutCancel(ctx), key, sub.ID) }()
	log := newPublishLog(1)
	pub := l.load.publish(ctx, publishPlan{events: 1, merchant: func(int) string { return merchant }, payload: defaultPayload,
		batch: 1, run: merchant, deadline: time.Now().Add(retryProbeWait), log: log, publisher: 1})
	if pub.published != 1 {
		return nil, fmt.Errorf("publish: %w", pub.firstErr)
	}
	wait, cancel := context.WithTimeout(ctx, retryProbeWait)
	defer cancel()
	for {
		mu.Lock()
		n := len(at)
		mu.Unlock()
		if n >= scaleProbeAttempts || wait.Err() != nil {
			break
		}
		sleepCtx(wait, 50*time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	var gaps []time.Duration
	for i := 1; i < len(at); i++ {
		gaps = append(gaps, at[i].Sub(at[i-1]))
	}
	l.logf("scale: probe: delays between refused attempts %v", gaps)
	return gaps, nil
}

// lightMerchant is a point's light merchant: one fast subscription,
// publishing scaleLightRate events/s from start until stop.
type lightMerchant struct {
	f    *fleet
	stop func() publishStats
}

// startLight sets up and starts a point's light merchant.
func startLight(ctx context.Context, l *lab, name string) (*lightMerchant, error) {
	merchant := l.cfg.merchant + "-" + name
	capacity := int(scaleLightRate * 4 * l.cfg.duration.Seconds())
	f, err := l.fleets.setUp(ctx, []string{merchant}, 1, 0, "", capacity)
	if err != nil {
		return nil, err
	}
	return &lightMerchant{f: f, stop: background(ctx, l, f, name, merchant, capacity, scaleLightRate)}, nil
}

// finish stops the light merchant's publishing, waits for its events and
// returns their publish → arrival summary and whether all arrived.
func (lm *lightMerchant) finish(ctx context.Context, l *lab) (latencySummary, bool) {
	pub := lm.stop()
	sent := sentOf(lm.f, pub)
	lat, complete := waitArrivals(ctx, lm.f, sent, len(sent), l.cfg.duration)
	l.fleets.tearDown(lm.f)
	return summarize(lat), complete
}

// pointSample is the engine's state read at one instant of a point.
type pointSample struct {
	at      time.Time
	cpu     cpuSample
	cpuOK   bool
	dbBytes int64
	redis   int64
}

// samplePoint reads CPU, database size and Redis memory now.
func samplePoint(ctx context.Context, l *lab) pointSample {
	s := pointSample{at: time.Now(), dbBytes: -1, redis: -1}
	if c, err := l.meter.sampleCPU(ctx); err == nil {
		s.cpu, s.cpuOK = c, true
	}
	if n, err := databaseSize(ctx, l.meter.db); err == nil {
		s.dbBytes = n
	}
	if n, err := redisUsedMemory(ctx, l.meter.rdb); err == nil {
		s.redis = n
	}
	return s
}

// waitRecorded waits until the receivers hold want deliveries and
// Postgres a succeeded attempt for each of the merchants' (polling once a
// second: at a million deliveries the count is itself a scan), or until
// the time runs out; it returns the count and when it was read.
func waitRecorded(ctx context.Context, l *lab, f *fleet, merchants []string, want int64, wait time.Duration) (int64, time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	f.rcv.waitHealthy(ctx, want)
	for {
		n, err := recordedDeliveries(ctx, l.meter.db, merchants)
		if err != nil && ctx.Err() == nil {
			return 0, time.Time{}, err
		}
		if n >= want || ctx.Err() != nil {
			return n, time.Now(), nil
		}
		sleepCtx(ctx, time.Second)
	}
}

// reportPoint adds one point's figures, each prefixed with the curve and
// size, and returns the point.
func reportPoint(l *lab, r *report, curve string, size int, recorded, want int64, from, to pointSample,
	light latencySummary, lightComplete bool) scalePoint {
	prefix := fmt.Sprintf("%s_%d_", curve, size)
	p := scalePoint{curve: curve, size: size, lightP99: light.P99}
	r.add(prefix+"deliveries_recorded", recorded, "deliveries")
	if recorded < want {
		r.note("%s %d: %d of %d deliveries recorded within -duration", curve, size, recorded, want)
	}
	if secs := to.at.Sub(from.at).Seconds(); secs > 0 {
		p.deliveriesPerS = float64(recorded) / secs
		r.add(prefix+"deliveries_per_s", p.deliveriesPerS, "deliveries/s")
	}
	if from.cpuOK && to.cpuOK && recorded > 0 {
		p.cpu, p.cpuOK = to.cpu.sub(from.cpu).perDelivery(recorded), true
		if p.cpu.EngineOK {
			r.add(prefix+"cpu_engine_ms_per_delivery", p.cpu.Engine, "CPU ms")
		}
		if p.cpu.PostgresOK {
			r.add(prefix+"cpu_postgres_ms_per_delivery", p.cpu.Postgres, "CPU ms")
		}
		if p.cpu.RedisOK {
			r.add(prefix+"cpu_redis_ms_per_delivery", p.cpu.Redis, "CPU ms")
		}
	}
	r.add(prefix+"light_p99_ms", ms(light.P99), "ms")
	if !lightComplete {
		r.note("%s %d: the light merchant's events did not all arrive within -duration", curve, size)
	}
	if to.dbBytes >= 0 {
		r.add(prefix+"pg_database_mib", float64(to.dbBytes)/(1<<20), "MiB")
	}
	if to.redis >= 0 {
		r.add(prefix+"redis_used_memory_mib", float64(to.redis)/(1<<20), "MiB")
	}
	l.logf("scale: %s %d: %.0f deliveries/s, light p99 %s", curve, size, p.deliveriesPerS, light.P99.Round(time.Millisecond))
	return p
}

// scaleBacklogPoint queues n deliveries while the receivers answer 503,
// reads Postgres and Redis at the peak, then releases the receivers and
// measures until every delivery is recorded.
func scaleBacklogPoint(ctx context.Context, l *lab, r *report, n int) (scalePoint, error) {
	name := fmt.Sprintf("scale-b%d", n)
	merchants := merchantNames(l.cfg.merchant+"-"+name, l.cfg.scaleBacklogMerchants)
	subs := l.cfg.scaleBacklogMerchants * scaleSubsPerMerchant
	events := (n + scaleSubsPerMerchant - 1) / scaleSubsPerMerchant
	f, err := l.fleets.setUp(ctx, merchants, subs, 0, "", events)
	if err != nil {
		return scalePoint{}, err
	}
	defer l.fleets.tearDown(f)
	f.rcv.down.Store(true)
	before := samplePoint(ctx, l)
	l.logf("scale: backlog %d: publishing %d events to receivers that answer 503", n, events)
	pub := l.load.publish(ctx, publishPlan{events: events, merchant: func(i int) string { return merchants[i%len(merchants)] },
		payload: orDefault(l.cfg.payload, defaultPayload), batch: l.cfg.batch, run: l.cfg.merchant + "-" + name,
		deadline: time.Now().Add(l.cfg.duration), log: f.log, publisher: l.load.publishersFor(0)})
	if pub.failed > 0 {
		r.note("backlog %d: %d events failed to publish: %v", n, pub.failed, pub.firstErr)
	}
	want := int64(pub.published) * scaleSubsPerMerchant
	// Built when (about) every delivery has been refused once: its retry
	// is then scheduled, the steady state of an outage.
	buildEnd := time.Now().Add(l.cfg.duration)
	for f.rcv.refused.Load() < want && time.Now().Before(buildEnd) && ctx.Err() == nil {
		sleepCtx(ctx, 250*time.Millisecond)
	}
	built := samplePoint(ctx, l)
	prefix := fmt.Sprintf("backlog_%d_", n)
	r.add(prefix+"build_s", built.at.Sub(before.at).Seconds(), "s")
	r.add(prefix+"publish_events_per_s", float64(pub.published)/pub.end.Sub(pub.start).Seconds(), "events/s")
	r.add(prefix+"refused_while_down", f.rcv.refused.Load(), "requests")
	if built.redis >= 0 && before.redis >= 0 && want > 0 {
		r.add(prefix+"redis_bytes_per_pending", float64(built.redis-before.redis)/float64(want), "B")
		r.add(prefix+"redis_used_memory_at_release_mib", float64(built.redis)/(1<<20), "MiB")
	}
	if built.dbBytes >= 0 {
		r.add(prefix+"pg_database_at_release_mib", float64(built.dbBytes)/(1<<20), "MiB")
	}
	light, err := startLight(ctx, l, name+"-light")
	if err != nil {
		return scalePoint{}, err
	}
	l.logf("scale: backlog %d: releasing %d deliveries", n, want)
	released := samplePoint(ctx, l)
	f.rcv.down.Store(false)
	recorded, at, err := waitRecorded(ctx, l, f, merchants, want, l.cfg.duration)
	drained := samplePoint(ctx, l)
	drained.at = at
	lat, complete := light.finish(ctx, l)
	if err != nil {
		return scalePoint{}, err
	}
	if failed, err := failedDeliveries(ctx, l.meter.db, merchants); err == nil && failed > 0 {
		r.note("backlog %d: %d deliveries ran out of attempts while the receivers were down: the schedule is too short for this backlog", n, failed)
	}
	return reportPoint(l, r, "backlog", n, recorded, want, released, drained, lat, complete), nil
}

// scaleMerchantsPoint sets up m merchants × scaleSubsPerMerchant
// subscriptions (timed: the API's fleet set-up is a figure of its own),
// publishes -rate events/s over them round-robin, at least one each, and
// measures until every delivery is recorded.
func scaleMerchantsPoint(ctx context.Context, l *lab, r *report, m int) (scalePoint, error) {
	name := fmt.Sprintf("scale-m%d", m)
	merchants := merchantNames(l.cfg.merchant+"-"+name, m)
	subs := m * scaleSubsPerMerchant
	rate := orDefault(l.cfg.rate, scaleMerchantRate)
	events := max(int(rate*l.cfg.phase.Seconds()), m)
	prefix := fmt.Sprintf("merchants_%d_", m)
	l.logf("scale: merchants %d: creating %d merchants' keys and %d subscriptions", m, m, subs)
	setupStart := time.Now()
	f, err := l.fleets.setUp(ctx, merchants, subs, 0, "", events)
	if err != nil {
		return scalePoint{}, err
	}
	setup := time.Since(setupStart)
	// The subscriptions stay: deleting 100,000 of them would take as long
	// as creating them, and with every delivery done none of them retries.
	defer f.rcv.close()
	r.add(prefix+"setup_s", setup.Seconds(), "s")
	r.add(prefix+"subscriptions_created_per_s", float64(subs)/setup.Seconds(), "subscriptions/s")
	light, err := startLight(ctx, l, name+"-light")
	if err != nil {
		return scalePoint{}, err
	}
	start := samplePoint(ctx, l)
	l.logf("scale: merchants %d: %d events at %g/s", m, events, rate)
	pub := l.load.publish(ctx, publishPlan{events: events, merchant: func(i int) string { return merchants[i%len(merchants)] },
		payload: orDefault(l.cfg.payload, defaultPayload), rate: rate, batch: 1, run: l.cfg.merchant + "-" + name,
		deadline: time.Now().Add(l.cfg.duration), log: f.log, publisher: l.load.publishersFor(0)})
	if pub.failed > 0 {
		r.note("merchants %d: %d events failed to publish: %v", m, pub.failed, pub.firstErr)
	}
	want := int64(pub.published) * scaleSubsPerMerchant
	recorded, at, err := waitRecorded(ctx, l, f, merchants, want, l.cfg.duration)
	end := samplePoint(ctx, l)
	end.at = at
	lat, complete := light.finish(ctx, l)
	if err != nil {
		return scalePoint{}, err
	}
	return reportPoint(l, r, "merchants", m, recorded, want, start, end, lat, complete), nil
}

// errNoPoints is parseFlags' complaint when -scenario scale has nothing to run.
var errNoPoints = errors.New("-scenario scale: -scale-backlog and -scale-merchants are both empty")
