package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// The record that ends a head returns the next one, with its
// subscription's rate limit, and leaves it due in Postgres: a worker that
// dies before it makes that attempt leaves it to the sweeper, which lists
// it. A record that ends no line, or a line with nothing behind, returns
// none.
func TestRecordAttemptsNextReturnsTheNewHead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.NewStore(t)
	orderedSubscription(t, s)
	a1, a2 := publishFor(t, s, "acct_a"), publishFor(t, s, "acct_a")
	b1 := publishFor(t, s, "acct_b")
	none := publishFor(t, s, "")

	now := time.Now()
	var recs []store.AttemptRecord
	for _, d := range []store.Delivery{a1, b1, none} {
		l, err := s.Deliveries.LeaseDelivery(ctx, d.ID, d.CreatedAt, 1, now, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, store.AttemptRecord{Delivery: l.Delivery, Status: store.DeliverySucceeded,
			Attempt: store.Attempt{Number: 1, Status: store.AttemptSucceeded, Trigger: store.TriggerScheduled, AttemptedAt: now}})
	}
	errs, heads, err := s.Deliveries.RecordAttemptsNext(ctx, recs)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("record %d: %v", i, e)
		}
	}
	if heads[0] == nil || heads[0].ID != a2.ID || heads[0].RateLimit != 5 || heads[0].NextAttemptAt == nil {
		t.Fatalf("next head of acct_a = %+v, want a2, due, rate limit 5", heads[0])
	}
	if heads[1] != nil || heads[2] != nil {
		t.Fatalf("heads of an idle key and an unordered delivery = %v, %v; want none", heads[1], heads[2])
	}
	due, err := s.Deliveries.DueDeliveries(ctx, time.Now().Add(time.Hour), time.Now(), nil, 100)
	if err != nil || len(due) != 1 || due[0].ID != a2.ID {
		t.Fatalf("due = %v, %v; want a2 alone, for the sweeper", due, err)
	}
}

// statsTaken is when a test takes the statistics of deliveries.
type statsTaken int

const (
	never statsTaken = iota
	whileEmpty
	afterHeads
)

// Ending heads reads each ended line's next delivery and nothing of the
// deliveries waiting in other lines, however many wait and whatever the
// statistics say: taken while only the heads existed (the planner then
// thinks almost no delivery waits), they once led it to scan every
// waiting delivery once per ended line.
func TestEndingHeadsReadsOnlyTheirLines(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// analyze: when the statistics are taken, if ever.
		analyze statsTaken
	}{
		{"statistics taken with only the heads written", afterHeads},
		{"statistics taken while the partition was empty", whileEmpty},
		// A day's partition, made ahead of its day, until autovacuum
		// first reaches it: its indexes, created empty, look empty
		// however much they hold.
		{"no statistics taken", never},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := storetest.NewStore(t)
			orderedSubscription(t, s)
			analyze := func() {
				if _, err := s.Pool().Exec(ctx, "ANALYZE deliveries"); err != nil {
					t.Fatal(err)
				}
			}
			const lines, waiting = 126, 20
			if tc.analyze == whileEmpty {
				analyze()
			}
			heads := make([]store.Delivery, lines)
			for i := range heads {
				heads[i] = publishFor(t, s, fmt.Sprintf("acct_%d", i))
			}
			if tc.analyze == afterHeads {
				analyze()
			}
			for range waiting {
				for i := range lines {
					publishFor(t, s, fmt.Sprintf("acct_%d", i))
				}
			}
			// Deliveries that ended long ago, as a busy day holds: the
			// primary key grows past the index of pending deliveries.
			if _, err := s.Pool().Exec(ctx, `
				INSERT INTO deliveries (id, merchant_id, event_id, event_created_at, event_type, subscription_id,
					status, test, attempt_count, created_at, updated_at)
				SELECT gen_random_uuid(), merchant_id, event_id, event_created_at, event_type, subscription_id,
					'succeeded', test, 1, created_at, updated_at
				FROM deliveries, generate_series(1, 8)`); err != nil {
				t.Fatal(err)
			}
			got, err := s.ExplainAdvanceLines(ctx, heads, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			// The plan may not read the day's partition through an index
			// with no condition (for its predicate alone): what that reads
			// is whatever the index holds, and whether the planner picks it
			// hangs on statistics a day's partition lacks until autovacuum
			// reaches it (the ordered bench's wake did, in 3 runs of 13).
			var today string
			if err := s.Pool().QueryRow(ctx, `SELECT tableoid::regclass::text FROM deliveries WHERE id = $1`, heads[0].ID).Scan(&today); err != nil {
				t.Fatal(err)
			}
			for _, idx := range got.WholeIndexes {
				if strings.HasPrefix(idx, today+"_") {
					t.Fatalf("the plan may read index %s whole:\n%s", idx, got.Plan)
				}
			}
			// Each line's lookup reads at most one entry per partition of
			// deliveries, and its wake one row; a scan of the waiting
			// deliveries reads lines × waiting of them.
			if limit := lines * 12; got.RowsRead > limit {
				t.Fatalf("ending %d heads read %d rows (at most %d) with %d deliveries waiting:\n%s",
					lines, got.RowsRead, limit, lines*waiting, got.Plan)
			}
		})
	}
}
