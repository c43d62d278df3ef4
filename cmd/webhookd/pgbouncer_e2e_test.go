package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/internal/store/storetest"
)

// TestServeThroughPgBouncer runs a real `webhookd serve` whose only way to
// Postgres is a PgBouncer in transaction mode, on an empty database: it
// migrates, issues a key and delivers through the pooler. Then PgBouncer
// dies with attempts in flight and comes back: the engine reports itself
// unready, becomes ready again without a restart, and every accepted event
// is delivered and recorded as succeeded.
func TestServeThroughPgBouncer(t *testing.T) {
	storetest.FullLane(t, "PgBouncer, on the real binary")
	direct := storetest.NewEmptyDatabase(t)
	bouncer := storetest.NewPgBouncer(t, direct)
	e := newEngineOn(t, bouncer.URL(), "WEBHOOKD_SWEEP_INTERVAL=1s")
	e.start()
	internal := &process{cmd: e.cmd, logs: e.logs, internal: e.internal}
	key := e.keysCreate("m_pgb")
	r := newReceiver(t)
	e.subscribe(key, r)

	// Before the outage: deliveries through the pooler.
	var ids []string
	for range 5 {
		ids = append(ids, e.publish("m_pgb"))
	}
	for _, id := range ids {
		r.wait(t, id, 20*time.Second)
	}

	// Attempts in flight when the pooler dies: the receiver holds them
	// until it is down, so that their records meet the outage.
	release := make(chan struct{})
	var held atomic.Int32
	inFlight := make(chan struct{}, 64)
	r.mu.Lock()
	first := r.requests
	r.handle = func(n int) {
		if n > first && n <= first+3 {
			held.Add(1)
			inFlight <- struct{}{}
			<-release
		}
	}
	r.mu.Unlock()
	for range 3 {
		ids = append(ids, e.publish("m_pgb"))
	}
	for range 3 {
		select {
		case <-inFlight:
		case <-time.After(20 * time.Second):
			t.Fatalf("attempts never arrived (%d held); logs:\n%s", held.Load(), e.logs)
		}
	}
	bouncer.Stop()
	if !eventually(15*time.Second, func() bool { return !internal.ready() }) {
		t.Fatalf("webhookd stayed ready with PgBouncer down; logs:\n%s", e.logs)
	}
	close(release)
	bouncer.Start()
	internal.waitReady(t, 30*time.Second)

	// After the outage: new events, and every event accepted before it.
	for range 3 {
		ids = append(ids, e.publish("m_pgb"))
	}
	for _, id := range ids {
		r.wait(t, id, 90*time.Second)
	}

	// Every delivery ends succeeded in the database (read directly).
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, direct)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var total, succeeded int
	if !eventually(30*time.Second, func() bool {
		err := conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'succeeded') FROM deliveries`).Scan(&total, &succeeded)
		if err != nil {
			t.Fatal(err)
		}
		return total == len(ids) && succeeded == total
	}) {
		t.Fatalf("%d deliveries, %d succeeded; want %d, all succeeded; logs:\n%s", total, succeeded, len(ids), e.logs)
	}
}
