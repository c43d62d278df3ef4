package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// attemptStatsRollUp is the part of RecordAttempts' statement that adds
// the recorded attempts to attempt_stats (migration 00016): per
// subscription, UTC hour and response-time slot, test deliveries left out
// as the health leaves them out. It reads the statement's i (the records)
// and d (the deliveries updated, so only attempts actually written count).
// Rows are upserted in key order, so that two batches touching the same
// rows lock them in the same order.
const attemptStatsRollUp = `
	INSERT INTO attempt_stats AS s (subscription_id, hour, slot, succeeded, retrying, failed)
	SELECT d.subscription_id, date_trunc('hour', i.attempted_at, 'UTC'), attempt_duration_slot(i.http_status, i.duration_ms),
		count(*) FILTER (WHERE i.status = 'succeeded'),
		count(*) FILTER (WHERE i.status <> 'succeeded' AND i.dstatus = 'pending'),
		count(*) FILTER (WHERE i.status <> 'succeeded' AND i.dstatus <> 'pending')
	FROM d JOIN i ON i.id = d.id
	WHERE NOT d.test AND i.status <> 'skipped'
	GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
	ON CONFLICT (subscription_id, hour, slot) DO UPDATE SET succeeded = s.succeeded + excluded.succeeded,
		retrying = s.retrying + excluded.retrying, failed = s.failed + excluded.failed
	RETURNING 1`

// StatsWindow is a period of a subscription's stats cut into equal buckets.
type StatsWindow struct {
	// From is the start of the first bucket; Step each bucket's length, a
	// whole number of hours; Buckets how many there are.
	From    time.Time
	Step    time.Duration
	Buckets int
}

// StatsBucket is a subscription's attempts over one bucket of a window.
type StatsBucket struct {
	// Start is the bucket's start (nil for the whole window's totals).
	Start *time.Time
	// Succeeded, Retrying and Failed count the attempts by outcome:
	// Retrying failed with the delivery still pending, Failed ended it.
	Succeeded, Retrying, Failed int
	// P50MS and P95MS are the response-time percentiles of the attempts
	// that got a response, in milliseconds, interpolated within the
	// rollup's slots; nil when none did.
	P50MS, P95MS *float64
}

// SubscriptionStats is a subscription's attempts over w, one bucket per
// step, oldest first, and the window's totals. It reads attempt_stats by
// its primary key, at most one row per hour and slot of the window,
// whatever the number of attempts. The caller checks the subscription is
// the merchant's.
func (s *Views) SubscriptionStats(ctx context.Context, subscriptionID uuid.UUID, w StatsWindow) ([]StatsBucket, StatsBucket, error) {
	rows, err := s.pool.Query(ctx, subscriptionStatsSQL, w.args(subscriptionID, s.Now())...)
	if err != nil {
		return nil, StatsBucket{}, fmt.Errorf("stats of subscription %s: %w", subscriptionID, err)
	}
	all, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (StatsBucket, error) {
		var b StatsBucket
		err := row.Scan(&b.Start, &b.Succeeded, &b.Retrying, &b.Failed, &b.P50MS, &b.P95MS)
		return b, err
	})
	if err != nil {
		return nil, StatsBucket{}, fmt.Errorf("stats of subscription %s: %w", subscriptionID, err)
	}
	// The statement answers the buckets in order, then the totals.
	if len(all) != w.Buckets+1 {
		return nil, StatsBucket{}, fmt.Errorf("stats of subscription %s: %d rows for %d buckets", subscriptionID, len(all), w.Buckets)
	}
	return all[:w.Buckets], all[w.Buckets], nil
}

// args are subscriptionStatsSQL's arguments for the subscription over w,
// read at now (the merchant's retention counts back from it).
func (w StatsWindow) args(subscriptionID uuid.UUID, now time.Time) []any {
	return []any{subscriptionID, w.From, w.From.Add(time.Duration(w.Buckets-1) * w.Step), int64(w.Step / time.Second), now}
}

// subscriptionStatsSQL is SubscriptionStats' statement: $1 the
// subscription, $2 the first bucket's start, $3 the last one's, $4 the
// step in seconds, $5 now: hours that began before the subscription's
// merchant's retention at $5 are left out (an hour that straddles it too),
// so that a merchant with a shorter retention is never shown older
// attempts, even before the maintenance job deleted them. Each bucket sums its hours; the percentiles come from
// the slots' counts summed per bucket (and over the window, the GROUPING
// SETS row with no start): the first slot whose running count reaches the
// percentile, interpolated linearly between its bounds.
const subscriptionStatsSQL = `
	WITH buckets AS (
		SELECT g AS start FROM generate_series($2::timestamptz, $3::timestamptz, $4::int8 * interval '1 second') g
	), hours AS (
		SELECT b.start, s.slot, s.succeeded, s.retrying, s.failed
		FROM attempt_stats s JOIN buckets b ON s.hour >= b.start AND s.hour < b.start + $4::int8 * interval '1 second'
		WHERE s.subscription_id = $1 AND s.hour >= $2::timestamptz AND s.hour < $3::timestamptz + $4::int8 * interval '1 second'
		  AND s.hour >= $5::timestamptz - (SELECT m.retention_days FROM subscriptions sub JOIN merchants m ON m.id = sub.merchant_id
		                                    WHERE sub.id = $1) * interval '1 day'
	), slots AS (
		SELECT start, slot, sum(succeeded + retrying + failed)::float8 AS n
		FROM hours WHERE slot > 0
		GROUP BY GROUPING SETS ((start, slot), (slot))
	), running AS (
		SELECT start, slot, n, sum(n) OVER (PARTITION BY start ORDER BY slot) AS upto, sum(n) OVER (PARTITION BY start) AS total
		FROM slots
	), percentiles AS (
		SELECT DISTINCT ON (r.start, q.q) r.start, q.q,
			k.bounds[r.slot] + (coalesce(k.bounds[r.slot + 1], k.bounds[r.slot]) - k.bounds[r.slot]) * (q.q * r.total - (r.upto - r.n)) / r.n AS ms
		FROM running r, (VALUES (0.5::float8), (0.95::float8)) q(q), (SELECT attempt_duration_bounds() AS bounds) k
		WHERE r.upto >= q.q * r.total
		ORDER BY r.start, q.q, r.slot
	), counts AS (
		SELECT b.start, coalesce(sum(h.succeeded), 0)::int8 AS succeeded, coalesce(sum(h.retrying), 0)::int8 AS retrying,
			coalesce(sum(h.failed), 0)::int8 AS failed
		FROM buckets b LEFT JOIN hours h ON h.start = b.start
		GROUP BY ROLLUP (b.start)
	)
	SELECT c.start, c.succeeded, c.retrying, c.failed,
		(SELECT ms FROM percentiles p WHERE p.start IS NOT DISTINCT FROM c.start AND p.q = 0.5),
		(SELECT ms FROM percentiles p WHERE p.start IS NOT DISTINCT FROM c.start AND p.q = 0.95)
	FROM counts c
	ORDER BY c.start NULLS LAST`
