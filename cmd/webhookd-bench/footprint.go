package main

import (
	"context"
	"fmt"
	"net"
	"time"
)

// footprint measures what a delivery costs at rest:
//   - Postgres bytes per event delivered once (event + delivery + one
//     succeeded attempt, indexes included), from the growth of
//     pg_total_relation_size over the partitions while events are delivered
//     to one healthy receiver;
//   - Redis bytes per pending delivery, from the growth of used_memory while
//     deliveries to a closed port wait for their retries;
//   - the engine's RSS while those deliveries are pending.
func (b *bench) footprint(ctx context.Context) (*report, error) {
	events := orDefault(b.cfg.events, footprintEvents)
	payload := orDefault(b.cfg.payload, footprintPayload)
	pending := b.cfg.pending
	r := &report{scenario: "footprint", params: fmt.Sprintf("%d delivered events of %d B payload; %d pending deliveries to a closed port",
		events, payload, pending)}

	before, err := tableSizes(ctx, b.db)
	if err != nil {
		return r, err
	}
	merchant := b.cfg.merchant + "-fp"
	res, err := b.deliver(ctx, deliveryRun{name: "footprint", merchants: []string{merchant}, subs: 1,
		events: events, batch: b.cfg.batch, payload: payload, payloadOf: payoutPayload})
	if err != nil {
		return r, err
	}
	after, err := tableSizes(ctx, b.db)
	if err != nil {
		return r, err
	}
	delivered, attempts, err := attemptedDeliveries(ctx, b.db, []string{merchant})
	if err != nil {
		return r, err
	}
	stored, _, err := storedCounts(ctx, b.db, []string{merchant})
	if err != nil {
		return r, err
	}
	r.add("events_stored", stored, "events")
	r.add("deliveries_with_attempts", delivered, "deliveries")
	r.add("attempts_stored", attempts, "attempts")
	if !res.complete {
		r.note("incomplete: %d of %d deliveries recorded", res.recorded, res.expected)
	}
	if stored > 0 {
		var total int64
		for _, t := range storedTables {
			d := after[t] - before[t]
			total += d
			r.add("pg_"+t+"_bytes_per_event", float64(d)/float64(stored), "B")
		}
		per := float64(total) / float64(stored)
		r.addTarget("pg_bytes_per_delivered_event", per, "B", "<= 2048", per <= 2048 && payload >= 1024)
		r.note("Postgres sizes grow by whole 8 KiB pages and include dead row versions left by updates until vacuum")
	}

	if pending == 0 {
		return r, nil
	}
	return r, b.pendingFootprint(ctx, r, pending, payload)
}

// pendingFootprint publishes pending events to a subscription whose URL is
// a closed port on 127.0.0.1: every first attempt fails at once with
// connection refused and the delivery waits, with its retry scheduled, for
// its second attempt 5 s later (and so on).
func (b *bench) pendingFootprint(ctx context.Context, r *report, pending, payload int) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("closed port: %w", err)
	}
	closed := "http://" + ln.Addr().String() + "/closed"
	_ = ln.Close() // the port is now closed: connection refused

	merchant := b.cfg.merchant + "-pend"
	f, err := b.setUp(ctx, []string{merchant}, 1, 0, closed, pending)
	if err != nil {
		return err
	}
	defer b.tearDown(f)
	memBefore, err := redisUsedMemory(ctx, b.rdb)
	if err != nil {
		return err
	}
	rssBefore, rssOK := b.engineRSS(ctx)
	deadline := time.Now().Add(b.cfg.duration)
	pub := b.publish(ctx, publishPlan{events: pending, merchant: func(int) string { return merchant }, payload: payload,
		batch: b.cfg.batch, run: b.cfg.merchant + "-pend", deadline: deadline, log: f.log, publisher: b.publishers(0)})
	if pub.firstErr != nil {
		r.note("pending: %d events failed to publish: %v", pub.failed, pub.firstErr)
	}
	b.logf("footprint: published %d pending events in %s; waiting for their first attempts", pub.published,
		pub.end.Sub(pub.start).Round(time.Millisecond))
	// Wait until every delivery has had its first (failed) attempt, so each
	// one is in its steady pending state: a scheduled retry in Redis.
	var attempted int64
wait:
	for {
		attempted, _, err = attemptedDeliveries(ctx, b.db, []string{merchant})
		if err != nil || attempted >= int64(pub.published) || time.Now().After(deadline) {
			break
		}
		select {
		case <-time.After(250 * time.Millisecond):
		case <-ctx.Done():
			break wait
		}
	}
	// The figures are the point of the run: read them even if the
	// scenario's time is up.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	memAfter, err := redisUsedMemory(ctx, b.rdb)
	if err != nil {
		return err
	}
	rssAfter, rssAfterOK := b.engineRSS(ctx)
	pendingNow, err := pendingDeliveries(ctx, b.db, merchant)
	if err != nil {
		return err
	}
	if attempted < int64(pub.published) {
		r.note("measured before every pending delivery had its first attempt (%d of %d)", attempted, pub.published)
	}
	r.add("pending_published", pub.published, "events")
	r.add("pending_first_attempted", attempted, "deliveries")
	r.add("pending_now", pendingNow, "deliveries")
	if pub.published > 0 {
		per := float64(memAfter-memBefore) / float64(pub.published)
		r.addTarget("redis_bytes_per_pending_delivery", per, "B", "<= 1024", per <= 1024)
	}
	if rssOK && rssAfterOK {
		r.add("engine_rss_before_mib", float64(rssBefore)/(1<<20), "MiB")
		r.add("engine_rss_pending_mib", float64(rssAfter)/(1<<20), "MiB")
	} else {
		r.note("engine RSS unknown: no process_resident_memory_bytes in /metrics and no -pid")
	}
	n, _ := b.engineProcesses()
	r.add("engine_processes", n, "processes")
	return nil
}

// engineRSS reads the engine's resident memory, summed over its processes:
// from /proc with -pid, else from their process_resident_memory_bytes.
func (b *bench) engineRSS(ctx context.Context) (int64, bool) {
	if len(b.cfg.pids) > 0 {
		if v, err := pidsRSS(b.cfg.pids); err == nil {
			return v, true
		}
	}
	m, err := b.eng.metrics(ctx, b.cfg.metricsURLs)
	if err != nil {
		return 0, false
	}
	v, ok := m["process_resident_memory_bytes"]
	return int64(v), ok
}
