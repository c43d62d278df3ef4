package store

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// ExplainAdvanceLines runs advanceLines' statement for the ended heads
// under EXPLAIN ANALYZE, planned as the engine plans it (explainGeneric):
// no line moves.
func (s *Store) ExplainAdvanceLines(ctx context.Context, ended []Delivery, now time.Time) (ExplainedPlan, error) {
	subs := make([]uuid.UUID, len(ended))
	keys := make([]string, len(ended))
	seqs := make([]int64, len(ended))
	for i, d := range ended {
		subs[i], keys[i], seqs[i] = d.SubscriptionID, *d.OrderingKey, *d.Sequence
	}
	return s.explainGeneric(ctx, "uuid[], text[], bigint[], timestamptz", advanceLinesSQL, subs, keys, seqs, now)
}
