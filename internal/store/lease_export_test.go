package store

import (
	"context"
	"time"
)

// ExplainLeaseDeliveries runs LeaseDeliveries' statement under EXPLAIN
// ANALYZE, planned as the engine plans it (explainGeneric): the leases
// are not kept.
func (s *Store) ExplainLeaseDeliveries(ctx context.Context, reqs []LeaseRequest, now time.Time, leaseFor time.Duration) (ExplainedPlan, error) {
	ids, created, numbers, handovers := attemptColumns(reqs)
	return s.explainGeneric(ctx, "uuid[], timestamptz[], int[], timestamptz, timestamptz, timestamptz[]", leaseSQL,
		ids, created, numbers, now.Add(leaseFor), now, handovers)
}
