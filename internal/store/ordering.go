package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Ordered delivery keeps, per (subscription, key value), one row of
// ordering_keys: last, the last sequence the fan-out gave, and head, the
// one sequence that may be attempted (the lowest pending one, or last+1
// when none is pending). Every ordered delivery row carries its key value
// and sequence. Three moments touch a line, each under the row's lock:
//
//   - the fan-out (CreateEvent) takes last+1 for the new delivery; it is
//     due at once if that is the head (the key was idle), else it waits
//     with no due time, so the sweeper never sees it;
//   - a lease (LeaseDeliveries) takes only the head of its line;
//   - the end of the head (succeeded, failed for good, abandoned) moves
//     head to the next pending sequence and makes that delivery due now,
//     in the transaction that records the end (advanceLines).
//
// The lock makes the fan-out and the end of a head take turns: a fan-out
// that commits first is seen by the head's end (which then wakes it); one
// that commits after sees the moved head (and is due at once). Nothing
// scans: each step reads one ordering_keys row and one index range of the
// key's pending deliveries.

// isLineHead is the condition, on a delivery row d, that it is the head of
// its key's line.
const isLineHead = `EXISTS (SELECT 1 FROM ordering_keys k
	WHERE k.subscription_id = d.subscription_id AND k.key = d.ordering_key AND k.head = d.sequence)`

// querier is the pool or a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// endsOrdered reports whether any record ends an ordered delivery.
func endsOrdered(rs []AttemptRecord) bool {
	return slices.ContainsFunc(rs, func(r AttemptRecord) bool {
		return r.Delivery.Sequence != nil && r.Status != DeliveryPending
	})
}

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// deref is *p, or zero for nil.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// lineOf names an ordered line: its subscription and key value.
type lineOf struct {
	subscription uuid.UUID
	key          string
}

// RecordAttemptsNext is RecordAttempts that also returns, per record, the
// delivery that now heads the line the record ended, with its
// subscription's rate limit and batch (nil when the record ends no line or
// the key is now idle), read by the statement that moved the line: the
// worker that ended the head makes the next attempt from it, without
// reading it back. An ordered delivery that ends releases its key in the
// same transaction: a crash never leaves a key with no head.
func (s *Deliveries) RecordAttemptsNext(ctx context.Context, rs []AttemptRecord) ([]error, []*Delivery, error) {
	heads := make([]*Delivery, len(rs))
	if !endsOrdered(rs) {
		errs, err := recordAttempts(ctx, s.pool, rs)
		return errs, heads, err
	}
	var out []error
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		if out, err = recordAttempts(ctx, tx, rs); err != nil {
			return err
		}
		var ended []Delivery
		var now time.Time
		for i, r := range rs {
			if out[i] == nil && r.Delivery.Sequence != nil && r.Status != DeliveryPending {
				ended = append(ended, r.Delivery)
				now = later(now, r.Attempt.AttemptedAt)
			}
		}
		next, err := advanceLines(ctx, tx, ended, now)
		if err != nil {
			return err
		}
		for i, r := range rs {
			if d := r.Delivery; out[i] == nil && d.Sequence != nil && d.OrderingKey != nil && r.Status != DeliveryPending {
				if h, ok := next[lineOf{d.SubscriptionID, *d.OrderingKey}]; ok && h.ended == *d.Sequence {
					heads[i] = &h.Delivery
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return out, heads, nil
}

// nextHead is the delivery that heads a line after the end of the one at
// sequence ended.
type nextHead struct {
	Delivery
	ended int64
}

// advanceLinesSQL moves the lines whose heads ended ($1 subscriptions,
// $2 keys, $3 the ended sequences) and wakes their next deliveries at $4.
//
// Each line's next pending delivery is found by its own lookup of
// deliveries_ordering_idx (n), and woken by primary key. It is almost
// always the one right behind the ended head (sequences are given one by
// one, and only a head ends), found by equality; the search for the
// lowest pending one above runs only when that one is not pending (the
// Append stops at the first row), since the planner, thinking a line
// short, may sort the whole line to find its lowest. The planner
// never sees a join of the ended lines against deliveries as a whole:
// it estimated one line per statement and, with statistics taken
// before the waiting deliveries were written, chose to scan every
// delivery waiting with no due time once per line (80 ms a call on
// average in the ordered bench, 160–600 ms for the slowest, each
// holding its keys' locks). The waiting test is written so that no
// index can answer it, for the same reason. The pending test is written
// IS NOT DISTINCT FROM, as the lease's is (leaseSQL): written status =
// 'pending', it implies the predicate of the partial index of pending
// deliveries, which the planner may then read whole; a day's partition
// whose indexes have not been vacuumed yet has that index look empty
// however much it holds, and in the ordered bench the wake read every
// waiting delivery of the day once per ended line that way (6,301 rows
// for each of 126 lines, 97 ms a call) in 3 runs of 13. The
// subscription's columns are read per returned row, so that they leave
// the plan as it is.
const advanceLinesSQL = `
		WITH r AS (
			SELECT DISTINCT * FROM unnest($1::uuid[], $2::text[], $3::bigint[]) AS r(subscription_id, key, sequence)
		), n AS (
			SELECT r.subscription_id, r.key, r.sequence AS ended, x.id, x.created_at, x.sequence
			FROM r LEFT JOIN LATERAL (
				(SELECT d.id, d.created_at, d.sequence FROM deliveries d
				 WHERE d.subscription_id = r.subscription_id AND d.ordering_key = r.key
				   AND d.status = 'pending' AND d.sequence IS NOT NULL AND d.sequence = r.sequence + 1)
				UNION ALL
				(SELECT d.id, d.created_at, d.sequence FROM deliveries d
				 WHERE d.subscription_id = r.subscription_id AND d.ordering_key = r.key
				   AND d.status = 'pending' AND d.sequence IS NOT NULL AND d.sequence > r.sequence
				 ORDER BY d.sequence LIMIT 1)
				LIMIT 1
			) x ON true
		), h AS (
			UPDATE ordering_keys k SET head = coalesce(n.sequence, k.last + 1)
			FROM n WHERE k.subscription_id = n.subscription_id AND k.key = n.key AND k.head = n.ended
			RETURNING n.id AS next_id, n.created_at AS next_created_at, n.ended
		)
		UPDATE deliveries d SET next_attempt_at = $4
		FROM h
		WHERE d.id = h.next_id AND d.created_at = h.next_created_at
		  AND d.status IS NOT DISTINCT FROM 'pending' AND coalesce(d.next_attempt_at, '-infinity') = '-infinity'
		RETURNING ` + deliveryColumns + `, ordering_key, sequence, ended,
			(SELECT coalesce(s.rate_limit, 0) FROM subscriptions s WHERE s.id = d.subscription_id),
			(SELECT s.batch_max_size FROM subscriptions s WHERE s.id = d.subscription_id),
			(SELECT s.batch_max_wait_ms FROM subscriptions s WHERE s.id = d.subscription_id)`

// lineColumns are the lines of ended ordered deliveries and their ended
// sequences, as the arrays advanceLinesSQL unnests.
func lineColumns(ended []Delivery) (subs []uuid.UUID, keys []string, seqs []int64) {
	subs = make([]uuid.UUID, len(ended))
	keys = make([]string, len(ended))
	seqs = make([]int64, len(ended))
	for i, d := range ended {
		subs[i], keys[i], seqs[i] = d.SubscriptionID, *d.OrderingKey, *d.Sequence
	}
	return subs, keys, seqs
}

// advanceLines releases the keys of ordered deliveries that ended, in tx:
// a line whose head one of them was moves to its next pending delivery,
// which becomes due at now. It returns the new heads that were waiting, by
// line. The rows are locked first, in one order (the fan-out's), by a
// statement of their own, so that the next statement's snapshot holds
// every fan-out that committed before the lock was had.
func advanceLines(ctx context.Context, tx querier, ended []Delivery, now time.Time) (map[lineOf]nextHead, error) {
	if len(ended) == 0 {
		return nil, nil
	}
	subs, keys, seqs := lineColumns(ended)
	if _, err := tx.Exec(ctx, `
		SELECT 1 FROM ordering_keys
		WHERE (subscription_id, key) IN (SELECT * FROM unnest($1::uuid[], $2::text[]))
		ORDER BY subscription_id, key FOR UPDATE`, subs, keys); err != nil {
		return nil, fmt.Errorf("lock %d ordering keys: %w", len(ended), err)
	}
	rows, err := tx.Query(ctx, advanceLinesSQL,
		subs, keys, seqs, now)
	if err != nil {
		return nil, fmt.Errorf("advance %d ordering keys: %w", len(ended), err)
	}
	heads, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (nextHead, error) {
		var h nextHead
		var batch batchColumns
		var rate *int
		err := row.Scan(&h.ID, &h.MerchantID, &h.EventID, &h.EventCreatedAt, &h.EventType, &h.SubscriptionID,
			&h.Status, &h.Test, &h.AttemptCount, &h.NextAttemptAt, &h.CreatedAt, &h.UpdatedAt,
			&h.OrderingKey, &h.Sequence, &h.ended, &rate, &batch.maxSize, &batch.maxWaitMS)
		h.RateLimit, h.Batch = deref(rate), batch.value()
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("advance %d ordering keys: %w", len(ended), err)
	}
	out := make(map[lineOf]nextHead, len(heads))
	for _, h := range heads {
		out[lineOf{h.SubscriptionID, *h.OrderingKey}] = h
	}
	return out, nil
}

// LineHead returns the pending delivery at the head of an ordered line,
// with its subscription's rate limit, so that the worker that ended the
// one before can enqueue it; ErrNotFound when the line is idle.
func (s *Deliveries) LineHead(ctx context.Context, subscriptionID uuid.UUID, key string) (Delivery, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT `+qualified("d", deliveryColumns)+`, d.ordering_key, d.sequence, coalesce(s.rate_limit, 0),
			s.batch_max_size, s.batch_max_wait_ms
		FROM ordering_keys k
		JOIN deliveries d ON d.subscription_id = k.subscription_id AND d.ordering_key = k.key
			AND d.sequence = k.head AND d.status = 'pending' AND d.sequence IS NOT NULL
		JOIN subscriptions s ON s.id = k.subscription_id
		WHERE k.subscription_id = $1 AND k.key = $2`, subscriptionID, key)
	if err != nil {
		return Delivery{}, fmt.Errorf("head of line %s/%q: %w", subscriptionID, key, err)
	}
	d, err := pgx.CollectExactlyOneRow(rows, func(row pgx.CollectableRow) (Delivery, error) {
		var d Delivery
		var batch batchColumns
		err := row.Scan(&d.ID, &d.MerchantID, &d.EventID, &d.EventCreatedAt, &d.EventType, &d.SubscriptionID,
			&d.Status, &d.Test, &d.AttemptCount, &d.NextAttemptAt, &d.CreatedAt, &d.UpdatedAt,
			&d.OrderingKey, &d.Sequence, &d.RateLimit, &batch.maxSize, &batch.maxWaitMS)
		d.Batch = batch.value()
		return d, err
	})
	if err != nil {
		return Delivery{}, fmt.Errorf("head of line %s/%q: %w", subscriptionID, key, notFound(err))
	}
	return d, nil
}

// qualified prefixes each column of a column list with a table alias.
func qualified(alias, columns string) string {
	cols := strings.Split(columns, ",")
	for i, c := range cols {
		cols[i] = alias + "." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}
