package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// ExplainLeaseDeliveries runs LeaseDeliveries' statement under EXPLAIN
// ANALYZE, sent as the method sends it, in a transaction rolled back: the
// leases are not kept.
func (s *Store) ExplainLeaseDeliveries(ctx context.Context, reqs []LeaseRequest, now time.Time, leaseFor time.Duration) (ExplainedPlan, error) {
	ids, created, numbers := attemptColumns(reqs)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return ExplainedPlan{}, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // nothing to keep
	var plan string
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+leaseSQL,
		ids, created, numbers, now.Add(leaseFor), now).Scan(&plan); err != nil {
		return ExplainedPlan{}, fmt.Errorf("explain lease: %w", err)
	}
	var doc []struct{ Plan planNode }
	if err := json.Unmarshal([]byte(plan), &doc); err != nil || len(doc) != 1 {
		return ExplainedPlan{}, fmt.Errorf("read plan: %v\n%s", err, plan)
	}
	return ExplainedPlan{RowsRead: doc[0].Plan.rowsRead(), Plan: plan}, nil
}
