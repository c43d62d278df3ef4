package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/procs"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// BenchmarkPublishAlone writes one event at a time, each in its own
// transaction, to a merchant with one endpoint for every type, leasing
// its first attempt as a publishing process with a pool does: the
// statement and commit of every publish at light load. On one connection,
// it reports what the Postgres backend serving it spent (pg-cpu-µs/op,
// read from /proc: Postgres must run on this machine), the figure a
// change to the publish statement moves, free of the engine's and the
// other Postgres processes' noise.
func BenchmarkPublishAlone(b *testing.B) {
	ctx := context.Background()
	s, err := store.Open(ctx, storetest.NewDatabase(b)+"&pool_max_conns=1")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Merchants.EnsureMerchant(ctx, "m1", "2026-05-01"); err != nil {
		b.Fatal(err)
	}
	if _, err := s.Subscriptions.CreateSubscription(ctx, store.NewSubscription{MerchantID: "m1", URL: "https://example.com/h", Events: []string{"*"}}, []byte("sealed")); err != nil {
		b.Fatal(err)
	}
	var pid int
	if err := s.Pool().QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"type":"payout.paid","data":{"object":{"id":"po_` + strings.Repeat("x", 400) + `"}}}`)
	publish := func() {
		ev := store.Event{ID: uuid.New(), MerchantID: "m1", Type: "payout.paid", APIVersion: "2026-05-01", Body: body,
			CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
		w := store.EventWrite{Event: ev, LeaseUntil: time.Now().Add(time.Minute).Truncate(time.Microsecond)}
		out, errs, err := s.Events.CreateEvents(ctx, []store.EventWrite{w}, nil)
		if err == nil {
			err = errs[0]
		}
		if err != nil || len(out[0].Leased) != 1 {
			b.Fatalf("publish: %d leased, %v", len(out[0].Leased), err)
		}
	}
	for range 100 { // the statement prepared, the caches warm
		publish()
	}
	before, err := procs.ReadStat(pid)
	if err != nil {
		b.Skipf("the backend's CPU: %v", err)
	}
	b.ResetTimer()
	for b.Loop() {
		publish()
	}
	b.StopTimer()
	after, err := procs.ReadStat(pid)
	if err != nil {
		b.Fatal(err)
	}
	// /proc counts in clock ticks of 10 ms: run enough publishes (a few
	// thousand) for the figure to hold more than a few ticks.
	b.ReportMetric((after.CPU-before.CPU)*1e6/float64(b.N), "pg-cpu-µs/op")
}
