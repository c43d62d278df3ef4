package store

import (
	"context"

	"github.com/google/uuid"
)

// ExplainSubscriptionStats runs SubscriptionStats' statement under EXPLAIN
// (ANALYZE, BUFFERS), sent as the method sends it.
func (s *Store) ExplainSubscriptionStats(ctx context.Context, subscriptionID uuid.UUID, w StatsWindow) (ExplainedHealth, error) {
	return s.explainTimed(ctx, subscriptionStatsSQL, w.args(subscriptionID, s.Now())...)
}
