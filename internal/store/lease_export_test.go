package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// ExplainedLease is what Postgres did to lease attempts.
type ExplainedLease struct {
	// RowsRead counts the rows the plan's scans read, table rows and the
	// entries of bitmap index scans alike, whether they matched or not.
	RowsRead int
	// Plan is the EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) output, for
	// messages.
	Plan string
}

// ExplainLeaseDeliveries runs LeaseDeliveries' statement under EXPLAIN
// ANALYZE, sent as the method sends it, in a transaction rolled back: the
// leases are not kept.
func (s *Store) ExplainLeaseDeliveries(ctx context.Context, reqs []LeaseRequest, now time.Time, leaseFor time.Duration) (ExplainedLease, error) {
	ids, created, numbers := attemptColumns(reqs)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return ExplainedLease{}, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // nothing to keep
	var plan string
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+leaseSQL,
		ids, created, numbers, now.Add(leaseFor), now).Scan(&plan); err != nil {
		return ExplainedLease{}, fmt.Errorf("explain lease: %w", err)
	}
	var doc []struct{ Plan planNode }
	if err := json.Unmarshal([]byte(plan), &doc); err != nil || len(doc) != 1 {
		return ExplainedLease{}, fmt.Errorf("read plan: %v\n%s", err, plan)
	}
	return ExplainedLease{RowsRead: doc[0].Plan.rowsRead(), Plan: plan}, nil
}

// rowsRead is rowsExamined counting the entries a bitmap index scan reads
// too: ANDed with another index, a bitmap scan can read a whole index and
// still return one row.
func (n planNode) rowsRead() int {
	return n.rowsOf("Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Heap Scan", "Bitmap Index Scan")
}
