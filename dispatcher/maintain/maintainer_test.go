package maintain

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// TestMaintainerKeepsPartitionsAhead: each round leaves the partitions of
// the days ahead in place and drops those past the retention, as the clock
// moves.
func TestMaintainerKeepsPartitionsAhead(t *testing.T) {
	t.Parallel()
	st := storetest.NewStore(t)
	ctx := context.Background()
	now := time.Now().UTC()
	var clockAt time.Time
	clock := clock.Func(func() time.Time { return clockAt })
	m := &Maintainer{cfg: MaintainerConfig{Store: st.Maintenance, PartitionsAhead: store.PartitionsAhead}, clock: clock,
		logger: slog.New(slog.DiscardHandler)}
	if err := m.cfg.validate(); err != nil {
		t.Fatal(err)
	}
	partitions := func() []string {
		t.Helper()
		rows, err := st.Pool().Query(ctx, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
			JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = 'deliveries'`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var names []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			names = append(names, n)
		}
		return names
	}
	day := func(t time.Time) string { return "deliveries_p" + t.Format("20060102") }
	for _, tc := range []struct {
		name   string
		offset time.Duration
	}{
		{"today", 0},
		{"ten days on", 10 * 24 * time.Hour},
		{"past the retention of today's partition", store.Retention + 3*24*time.Hour},
	} {
		clockAt = now.Add(tc.offset)
		if err := m.Maintain(ctx); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := partitions()
		for d := range store.PartitionsAhead {
			if want := day(clockAt.AddDate(0, 0, d)); !slices.Contains(got, want) {
				t.Errorf("%s: no partition %s among %v", tc.name, want, got)
			}
		}
		if expired := day(clockAt.Add(-store.Retention - 2*24*time.Hour)); slices.Contains(got, expired) {
			t.Errorf("%s: partition %s is past the retention and still there", tc.name, expired)
		}
	}
}
