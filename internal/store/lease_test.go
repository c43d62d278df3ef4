package store_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// TestLeaseReadsOnlyItsDeliveriesUnderABacklog: leasing attempts reads each
// delivery by its primary key, however many deliveries are pending and
// however stale the statistics. The backlog here grew after the last
// ANALYZE (which saw it delivered), as a partition fills between two
// autovacuum runs; an index that serves pending deliveries then looked
// cheap to the planner, and a lease read the whole backlog (see leaseSQL).
func TestLeaseReadsOnlyItsDeliveriesUnderABacklog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.NewStore(t)
	sub, _ := newDelivery(t, s, store.Audience{})
	const backlog, leased = 30000, 50
	for _, stmt := range []string{
		`INSERT INTO events (id, merchant_id, type, api_version, body, created_at)
		 SELECT gen_random_uuid(), 'm1', 'payout.created', '2026-05-01', '{}', now() - i * interval '1 ms'
		 FROM generate_series(1, ` + strconv.Itoa(backlog) + `) i`,
		`INSERT INTO deliveries (id, merchant_id, event_id, event_created_at, event_type, subscription_id,
		                         status, attempt_count, created_at, updated_at)
		 SELECT gen_random_uuid(), 'm1', e.id, e.created_at, e.type, '` + sub.ID.String() + `', 'succeeded', 1, e.created_at, now()
		 FROM events e WHERE e.type = 'payout.created'`,
		`ANALYZE events, deliveries`,
		// The backlog the statistics do not know of.
		`UPDATE deliveries SET status = 'pending', attempt_count = 0, next_attempt_at = now()`,
	} {
		if _, err := s.Pool().Exec(ctx, stmt); err != nil {
			t.Fatalf("%v\n%s", err, stmt)
		}
	}
	rows, err := s.Pool().Query(ctx, `SELECT id, created_at FROM deliveries ORDER BY random() LIMIT `+strconv.Itoa(leased))
	if err != nil {
		t.Fatal(err)
	}
	var reqs []store.LeaseRequest
	for rows.Next() {
		r := store.LeaseRequest{Number: 1}
		if err := rows.Scan(&r.ID, &r.CreatedAt); err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	got, err := s.ExplainLeaseDeliveries(ctx, reqs, time.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// By primary key a lease reads its delivery, its subscription and its
	// event, and for an ordered delivery its key's line: a few rows each.
	if max := 5 * leased; got.RowsRead > max {
		t.Errorf("leasing %d of %d pending deliveries read %d rows, want at most %d\n%s", leased, backlog, got.RowsRead, max, got.Plan)
	}
}
