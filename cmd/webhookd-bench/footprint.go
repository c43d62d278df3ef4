package main

import (
	"context"
	"fmt"
	"net"
	"time"
)

// The footprint scenario's defaults.
const (
	footprintEvents  = 10000
	footprintPayload = 1024
)

// footprint measures what a delivery costs at rest:
//   - Postgres bytes per event delivered once (event + delivery + one
//     succeeded attempt, indexes included), from the growth of
//     pg_total_relation_size over the partitions while events are delivered
//     to one healthy receiver;
//   - Redis bytes per pending delivery, from the growth of used_memory while
//     deliveries to a closed port wait for their retries;
//   - the engine's RSS while those deliveries are pending.
func footprint(ctx context.Context, l *lab) (*report, error) {
	events := orDefault(l.cfg.events, footprintEvents)
	payload := orDefault(l.cfg.payload, footprintPayload)
	pending := l.cfg.pending
	r := &report{scenario: "footprint", params: fmt.Sprintf("%d delivered events of %d B payload; %d pending deliveries to a closed port",
		events, payload, pending)}

	before, err := tableSizes(ctx, l.meter.db)
	if err != nil {
		return r, err
	}
	merchant := l.cfg.merchant + "-fp"
	res, err := l.deliver(ctx, deliveryRun{name: "footprint", merchants: []string{merchant}, subs: 1,
		events: events, batch: l.cfg.batch, payload: payload, payloadOf: payoutPayload})
	if err != nil {
		return r, err
	}
	after, err := tableSizes(ctx, l.meter.db)
	if err != nil {
		return r, err
	}
	delivered, attempts, err := attemptedDeliveries(ctx, l.meter.db, []string{merchant})
	if err != nil {
		return r, err
	}
	stored, _, err := storedCounts(ctx, l.meter.db, []string{merchant})
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
	return r, pendingFootprint(ctx, l, r, pending, payload)
}

// pendingFootprint publishes pending events to a subscription whose URL is
// a closed port on 127.0.0.1: every first attempt fails at once with
// connection refused and the delivery waits, with its retry scheduled, for
// its second attempt 5 s later (and so on).
func pendingFootprint(ctx context.Context, l *lab, r *report, pending, payload int) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("closed port: %w", err)
	}
	closed := "http://" + ln.Addr().String() + "/closed"
	_ = ln.Close() // the port is now closed: connection refused

	merchant := l.cfg.merchant + "-pend"
	f, err := l.fleets.setUp(ctx, []string{merchant}, 1, 0, closed, pending)
	if err != nil {
		return err
	}
	defer l.fleets.tearDown(f)
	memBefore, err := redisUsedMemory(ctx, l.meter.rdb)
	if err != nil {
		return err
	}
	rssBefore, rssOK := l.meter.engineRSS(ctx)
	deadline := time.Now().Add(l.cfg.duration)
	pub := l.load.publish(ctx, publishPlan{events: pending, merchant: func(int) string { return merchant }, payload: payload,
		batch: l.cfg.batch, run: l.cfg.merchant + "-pend", deadline: deadline, log: f.log, publisher: l.load.publishersFor(0)})
	if pub.firstErr != nil {
		r.note("pending: %d events failed to publish: %v", pub.failed, pub.firstErr)
	}
	l.logf("footprint: published %d pending events in %s; waiting for their first attempts", pub.published,
		pub.end.Sub(pub.start).Round(time.Millisecond))
	// Wait until every delivery has had its first (failed) attempt, so each
	// one is in its steady pending state: a scheduled retry in Redis.
	var attempted int64
wait:
	for {
		attempted, _, err = attemptedDeliveries(ctx, l.meter.db, []string{merchant})
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
	memAfter, err := redisUsedMemory(ctx, l.meter.rdb)
	if err != nil {
		return err
	}
	rssAfter, rssAfterOK := l.meter.engineRSS(ctx)
	pendingNow, err := pendingDeliveries(ctx, l.meter.db, merchant)
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
	n, _ := l.meter.engineProcesses()
	r.add("engine_processes", n, "processes")
	return nil
}
