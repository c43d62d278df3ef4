package store

import (
	"context"
	"time"
)

// ExplainDueDeliveries runs DueDeliveries' statement under EXPLAIN
// ANALYZE, planned as the engine plans it (explainGeneric).
func (s *Store) ExplainDueDeliveries(ctx context.Context, dueBefore, now time.Time, after *DuePosition, limit int) (ExplainedPlan, error) {
	return s.explainGeneric(ctx, "timestamptz, timestamptz, timestamptz, uuid, int", dueSQL, dueArgs(dueBefore, now, after, limit)...)
}
