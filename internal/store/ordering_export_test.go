package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// ExplainAdvanceLines runs advanceLines' statement for the ended heads
// under EXPLAIN ANALYZE, after the lock it takes, as advanceLines sends
// it, in a transaction rolled back: no line moves.
func (s *Store) ExplainAdvanceLines(ctx context.Context, ended []Delivery, now time.Time) (ExplainedLease, error) {
	subs := make([]uuid.UUID, len(ended))
	keys := make([]string, len(ended))
	seqs := make([]int64, len(ended))
	for i, d := range ended {
		subs[i], keys[i], seqs[i] = d.SubscriptionID, *d.OrderingKey, *d.Sequence
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return ExplainedLease{}, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // nothing to keep
	var plan string
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+advanceLinesSQL, subs, keys, seqs, now).Scan(&plan); err != nil {
		return ExplainedLease{}, fmt.Errorf("explain advance: %w", err)
	}
	var doc []struct{ Plan planNode }
	if err := json.Unmarshal([]byte(plan), &doc); err != nil || len(doc) != 1 {
		return ExplainedLease{}, fmt.Errorf("read plan: %v\n%s", err, plan)
	}
	return ExplainedLease{RowsRead: doc[0].Plan.rowsRead(), Plan: plan}, nil
}
