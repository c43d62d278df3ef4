package store_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

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
	before, err := cpuTicks(pid)
	if err != nil {
		b.Skipf("the backend's CPU: %v", err)
	}
	b.ResetTimer()
	for b.Loop() {
		publish()
	}
	b.StopTimer()
	after, err := cpuTicks(pid)
	if err != nil {
		b.Fatal(err)
	}
	// /proc counts in clock ticks of 10 ms (USER_HZ is 100 on Linux).
	b.ReportMetric(float64(after-before)*1e4/float64(b.N), "pg-cpu-µs/op")
}

// cpuTicks is a process's user and system time in clock ticks.
func cpuTicks(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command's closing parenthesis; utime and stime
	// are the 14th and 15th of the line, the 12th and 13th of these.
	i := strings.LastIndexByte(string(raw), ')')
	fields := strings.Fields(string(raw[i+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	user, err1 := strconv.ParseInt(fields[11], 10, 64)
	system, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %v %v", pid, err1, err2)
	}
	return user + system, nil
}
