package store

import (
	"context"
	"time"
)

// ExplainAdvanceLines runs advanceLines' statement for the ended heads
// under EXPLAIN ANALYZE, planned as the engine plans it (explainGeneric):
// no line moves.
func (s *Store) ExplainAdvanceLines(ctx context.Context, ended []Delivery, now time.Time) (ExplainedPlan, error) {
	subs, keys, seqs := lineColumns(ended)
	return s.explainGeneric(ctx, "uuid[], text[], bigint[], timestamptz", advanceLinesSQL, subs, keys, seqs, now)
}
