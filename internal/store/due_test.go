package store_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// TestDuePagesReadOnlyTheirPage: each page of the sweeper's walk through
// overdue deliveries reads about its own rows, wherever it is in the
// backlog, under the generic plans the engine runs. Skipping the position
// on the first page with "$3 IS NULL OR …" made every page read the due
// index from its start (see dueSQL): the middle page here read the 15,000
// rows before it. The walk itself lists every overdue delivery once, in
// order.
func TestDuePagesReadOnlyTheirPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.NewStore(t)
	sub, _ := newDelivery(t, s, store.Audience{})
	const backlog, page = 30000, 500
	for _, stmt := range []string{
		`INSERT INTO events (id, merchant_id, type, api_version, body, created_at)
		 SELECT gen_random_uuid(), 'm1', 'payout.created', '2026-05-01', '{}', now() - i * interval '1 ms'
		 FROM generate_series(1, ` + strconv.Itoa(backlog) + `) i`,
		// Overdue by an hour and more, each at its own millisecond.
		`INSERT INTO deliveries (id, merchant_id, event_id, event_created_at, event_type, subscription_id,
		                         status, attempt_count, next_attempt_at, created_at, updated_at)
		 SELECT gen_random_uuid(), 'm1', e.id, e.created_at, e.type, '` + sub.ID.String() + `', 'pending', 1,
		        e.created_at - interval '1 hour', e.created_at, now()
		 FROM events e WHERE e.type = 'payout.created'`,
		`ANALYZE events, deliveries`,
	} {
		if _, err := s.Pool().Exec(ctx, stmt); err != nil {
			t.Fatalf("%v\n%s", err, stmt)
		}
	}
	now := time.Now()
	dueBefore := now.Add(-10 * time.Second)
	var overdue int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE status = 'pending' AND next_attempt_at < $1`,
		dueBefore).Scan(&overdue); err != nil || overdue < backlog {
		t.Fatalf("%d overdue deliveries, %v", overdue, err)
	}

	var after *store.DuePosition
	var positions []store.DuePosition
	seen := map[uuid.UUID]bool{}
	for {
		ds, err := s.Deliveries.DueDeliveries(ctx, dueBefore, now, after, page)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			at := store.DuePosition{NextAttemptAt: *d.NextAttemptAt, ID: d.ID}
			if seen[d.ID] || (after != nil && !after.NextAttemptAt.Before(at.NextAttemptAt) &&
				(!after.NextAttemptAt.Equal(at.NextAttemptAt) || after.ID.String() >= at.ID.String())) {
				t.Fatalf("delivery %s listed twice or out of order after %+v", d.ID, after)
			}
			seen[d.ID] = true
			after = &at
		}
		positions = append(positions, *after)
		if len(ds) < page {
			break
		}
	}
	if len(seen) != overdue {
		t.Errorf("the walk listed %d overdue deliveries, want %d", len(seen), overdue)
	}

	for _, tc := range []struct {
		name  string
		after *store.DuePosition
	}{
		{"first page", nil},
		{"middle page", &positions[len(positions)/2]},
		{"last page", &positions[len(positions)-2]},
	} {
		got, err := s.ExplainDueDeliveries(ctx, dueBefore, now, tc.after, page)
		if err != nil {
			t.Fatal(err)
		}
		if max := 3 * page; got.RowsRead > max {
			t.Errorf("%s of %d overdue deliveries read %d rows, want at most %d\n%s", tc.name, backlog, got.RowsRead, max, got.Plan)
		}
	}
}
