package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// RetentionBudget bounds one run of ExpireMerchantRetention: each
// statement deletes at most Batch rows (a short transaction, a few
// locks), and a run makes at most Statements of them; what is left waits
// for the next run.
type RetentionBudget struct {
	Batch      int
	Statements int
}

// RetentionExpiry counts what one run of ExpireMerchantRetention deleted.
type RetentionExpiry struct {
	Merchants  int
	Deliveries int64
	Attempts   int64
	Events     int64
	Stats      int64
	// Exhausted is true when the run stopped on its budget with rows left.
	Exhausted bool
}

// retentionStep is one kind of row a run deletes: its statement ($1 the
// merchant, $2 the cutoff, $3 the batch; it answers the rows deleted, and
// a second count for the attempts deleted with deliveries).
type retentionStep struct {
	name string
	sql  string
	add  func(*RetentionExpiry, int64, int64)
}

// retentionSteps delete, for a merchant, in dependency order: ended
// deliveries older than the cutoff with their attempts (a pending one
// waits until it ends, so that no ordering line loses its head and no
// running attempt its row), then its events older than the cutoff that no
// delivery names any more, with their id guards, then the attempt stats
// of its subscriptions for hours that ended before the cutoff. Each
// statement picks its batch through the merchant's list index.
var retentionSteps = []retentionStep{
	{"deliveries", `
		WITH d AS (
			DELETE FROM deliveries WHERE (id, created_at) IN (
				SELECT id, created_at FROM deliveries
				WHERE merchant_id = $1 AND created_at < $2 AND status <> 'pending'
				ORDER BY created_at LIMIT $3)
			RETURNING id, created_at
		), a AS (
			DELETE FROM attempts a USING d WHERE a.delivery_id = d.id AND a.delivery_created_at = d.created_at
			RETURNING 1
		)
		SELECT (SELECT count(*) FROM d), (SELECT count(*) FROM a)`,
		func(r *RetentionExpiry, n, m int64) { r.Deliveries += n; r.Attempts += m }},
	{"events", `
		WITH e AS (
			DELETE FROM events WHERE (id, created_at) IN (
				SELECT e.id, e.created_at FROM events e
				WHERE e.merchant_id = $1 AND e.created_at < $2
				  AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id AND d.created_at >= e.created_at)
				ORDER BY e.created_at LIMIT $3)
			RETURNING id
		), g AS (
			DELETE FROM event_ids i USING e WHERE i.id = e.id RETURNING 1
		)
		SELECT (SELECT count(*) FROM e), (SELECT count(*) FROM g)`,
		func(r *RetentionExpiry, n, _ int64) { r.Events += n }},
	{"attempt stats", `
		WITH s AS (
			DELETE FROM attempt_stats WHERE (subscription_id, hour, slot) IN (
				SELECT a.subscription_id, a.hour, a.slot FROM attempt_stats a
				JOIN subscriptions s ON s.id = a.subscription_id
				WHERE s.merchant_id = $1 AND a.hour <= $2::timestamptz - interval '1 hour'
				LIMIT $3)
			RETURNING 1
		)
		SELECT count(*), 0::int8 FROM s`,
		func(r *RetentionExpiry, n, _ int64) { r.Stats += n }},
}

// ExpireMerchantRetention deletes, for every merchant whose retention is
// shorter than the engine's, its rows older than its retention at now,
// within budget: batches of budget.Batch rows, at most budget.Statements
// statements in the run, each its own short transaction. The partition
// drop (DropExpiredPartitions) still removes everyone's rows at the
// engine's retention.
func (s *Maintenance) ExpireMerchantRetention(ctx context.Context, now time.Time, budget RetentionBudget) (RetentionExpiry, error) {
	var out RetentionExpiry
	rows, err := s.pool.Query(ctx, `
		SELECT id, retention_days FROM merchants WHERE retention_days < `+strconv.Itoa(RetentionDays)+` ORDER BY id`)
	if err != nil {
		return out, fmt.Errorf("expire merchant retention: %w", err)
	}
	type short struct {
		id   string
		days int
	}
	merchants, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (short, error) {
		var m short
		return m, r.Scan(&m.id, &m.days)
	})
	if err != nil {
		return out, fmt.Errorf("expire merchant retention: %w", err)
	}
	left := budget.Statements
	for _, m := range merchants {
		out.Merchants++
		cutoff := now.Add(-time.Duration(m.days) * 24 * time.Hour)
		for _, step := range retentionSteps {
			for {
				if left == 0 {
					out.Exhausted = true
					return out, nil
				}
				left--
				var n, more int64
				if err := s.pool.QueryRow(ctx, step.sql, m.id, cutoff, budget.Batch).Scan(&n, &more); err != nil {
					return out, fmt.Errorf("expire %s of merchant %s: %w", step.name, m.id, err)
				}
				step.add(&out, n, more)
				if n < int64(budget.Batch) {
					break
				}
			}
		}
	}
	return out, nil
}
