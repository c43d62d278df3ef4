package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// createFanOutsSQL is createEventSQL for a whole commit group of fan-outs
// (no Audience.SubscriptionID, not a test): one statement for the group
// instead of one per event. Postgres spends most of a publish on running a
// statement, not on the rows it writes: in single (fan-out 1, groups of
// about 12 events) the publish's executor time fell from 0.24–0.32 ms per
// event to 0.15–0.18, and the one statement saves the bind, execute and
// result messages of the others. Small groups go one statement per event
// (minFanOutGroup).
//
// It writes exactly what createEventSQL would write for the events one
// after another in the group's order (TestCreateFanOutsAsOneByOne):
//
//   - the first write of an id takes it; a later write of the same id in
//     the group, like one of an id already stored, writes nothing;
//   - an ordered subscription's key takes one sequence per event, in the
//     group's order: the key's row is upserted once with the number of
//     its events (last grows by it), and the event that is n-th of the key
//     in the group takes last - count + n. The first of them is due at
//     once exactly when the key was idle (its sequence is the head);
//   - a poll subscription's line gives positions the same way.
//
// $1 … $10 are the writes, one element each (i is the index in the
// group, 1-based; ms the event's Unix milliseconds for the delivery ids);
// $11 and $12 pair each write's index with a subscription whose filter
// it passed (Audience.Matched); $13 the commit group's bytes. Each row of
// the result is one write's index, whether it wrote its event, and one of
// its deliveries (all NULL when it has none).
const createFanOutsSQL = `
		WITH r AS (
			SELECT * FROM unnest($1::int[], $2::uuid[], $3::timestamptz[], $4::text[], $5::text[], $6::text[],
				$7::bytea[], $8::text[], $9::timestamptz[], $10::int8[], $14::timestamptz[])
				AS r(i, id, created_at, type, merchant_id, api_version, body, traceparent, held_until, ms, lease_until)
		), m AS (
			SELECT * FROM unnest($11::int[], $12::uuid[]) AS m(i, subscription_id)
		), g AS (
			INSERT INTO event_ids (id, created_at)
			SELECT DISTINCT ON (id) id, created_at FROM r ORDER BY id, i
			ON CONFLICT DO NOTHING RETURNING id
		), w AS (
			-- The writes that write their event: the first of each new id.
			SELECT DISTINCT ON (r.id) r.* FROM r JOIN g ON g.id = r.id ORDER BY r.id, r.i
		), e AS (
			INSERT INTO events (id, merchant_id, type, api_version, body, created_at, traceparent)
			SELECT id, merchant_id, type, api_version, body, created_at, nullif(traceparent, '') FROM w ORDER BY i
			RETURNING id
		), t0 AS (
			SELECT w.i, w.id AS event_id, w.created_at, w.type, w.held_until, w.ms, w.lease_until,
				s.id, s.merchant_id, s.rate_limit, s.batch_max_size, s.batch_max_wait_ms, s.status = 'disabled' AS skip,
				s.retry_policy,
				CASE WHEN length(o.v) <= ` + maxOrderingKeyValue + ` AND o.v !~ '[[:cntrl:]]' THEN o.v END AS okey,
				coalesce(s.destination->>'type' = '` + pollDestination + `', false) AS poll
			FROM w JOIN subscriptions s ON s.merchant_id = w.merchant_id
			-- As in createEventSQL: the payload parsed only for a
			-- subscription that orders, v computed once.
			CROSS JOIN LATERAL (
				SELECT CASE WHEN s.ordering_key IS NOT NULL AND s.status <> 'disabled'
				                 AND coalesce(s.destination->>'type' <> '` + pollDestination + `', true)
				            THEN convert_from(w.body, 'UTF8')::jsonb #>> string_to_array(s.ordering_key, '.') END AS v
				OFFSET 0
			) o
			WHERE s.deleted_at IS NULL
			  AND (s.status = 'enabled' OR (s.status = 'disabled' AND s.kind = 'endpoint'))
			  AND s.events && ARRAY[w.type, '*']
			  AND (s.filter IS NULL OR EXISTS (SELECT 1 FROM m WHERE m.i = w.i AND m.subscription_id = s.id))
		), t AS (
			-- Each delivery's place among the group's deliveries of its key
			-- and of its poll line, in the group's order.
			SELECT t0.*,
				row_number() OVER (PARTITION BY t0.id, t0.okey ORDER BY t0.i) AS key_n,
				count(*) OVER (PARTITION BY t0.id, t0.okey) AS key_count,
				row_number() OVER (PARTITION BY t0.id ORDER BY t0.i) AS line_n,
				count(*) OVER (PARTITION BY t0.id) AS line_count
			FROM t0
		), k AS (
			INSERT INTO ordering_keys AS k (subscription_id, key, last, head)
			SELECT id, okey, count(*), 1 FROM t WHERE okey IS NOT NULL GROUP BY id, okey ORDER BY id, okey
			ON CONFLICT (subscription_id, key) DO UPDATE SET last = k.last + excluded.last
			RETURNING subscription_id, key, last, head
		), p AS (
			INSERT INTO poll_lines AS p (subscription_id, last)
			SELECT id, count(*) FROM t WHERE t.poll AND NOT t.skip GROUP BY id ORDER BY id
			ON CONFLICT (subscription_id) DO UPDATE SET last = p.last + excluded.last
			RETURNING subscription_id, last
		), d AS (
			INSERT INTO deliveries (id, merchant_id, event_id, event_created_at, event_type, subscription_id,
				status, test, attempt_count, next_attempt_at, created_at, updated_at, ordering_key, sequence, poll_position,
				lease_until, retry_policy)
			SELECT encode(set_bit(set_bit(overlay(overlay(uuid_send(gen_random_uuid())
					PLACING substring(int8send(t.ms) FROM 3) FROM 1 FOR 6)
					PLACING coalesce($13::bytea, substring(uuid_send(gen_random_uuid()) FROM 12 FOR 5)) FROM 12 FOR 5),
					52, 1), 53, 1), 'hex')::uuid,
				t.merchant_id, t.event_id, t.created_at, t.type, t.id,
				CASE WHEN t.skip THEN 'skipped' ELSE 'pending' END, false, 0,
				CASE WHEN NOT t.skip AND NOT t.poll AND (k.key IS NULL OR k.last - t.key_count + t.key_n = k.head)
					THEN coalesce(t.held_until, t.created_at) END,
				t.created_at, t.created_at, k.key, k.last - t.key_count + t.key_n, p.last - t.line_count + t.line_n,
				CASE WHEN ` + fanOutStartsAtOnce + ` THEN t.lease_until END,
				CASE WHEN ` + fanOutStartsAtOnce + ` THEN coalesce(t.retry_policy, '{}'::jsonb) END
			FROM t LEFT JOIN k ON k.subscription_id = t.id AND k.key = t.okey
			LEFT JOIN p ON p.subscription_id = t.id AND t.poll AND NOT t.skip
			ORDER BY t.i, t.id
			RETURNING lease_until, nullif(retry_policy, '{}'::jsonb), ` + deliveryColumns + `, ordering_key, sequence, poll_position
		)
		SELECT r.i, w.i IS NOT NULL, d.*, t.rate_limit, t.batch_max_size, t.batch_max_wait_ms, ` + leasedSubscriptionColumns + `
		FROM r LEFT JOIN w ON w.i = r.i
		LEFT JOIN d ON w.i IS NOT NULL AND d.event_id = w.id
		LEFT JOIN t ON t.i = w.i AND t.id = d.subscription_id
		LEFT JOIN subscriptions s ON s.id = d.subscription_id AND d.lease_until IS NOT NULL
		ORDER BY r.i`

// fanOutStartsAtOnce is startsAtOnce in createFanOutsSQL: the write asked
// for a lease (t.lease_until), and the delivery is due now (not skipped,
// not polled, the head of its key's line, not held), neither paced nor
// batched. A group of fan-outs holds no scheduled event (isFanOut).
const fanOutStartsAtOnce = `(t.lease_until IS NOT NULL AND NOT t.skip AND NOT t.poll
	AND (k.key IS NULL OR k.last - t.key_count + t.key_n = k.head) AND t.held_until IS NULL
	AND coalesce(t.rate_limit, 0) = 0 AND (t.batch_max_size IS NULL OR t.batch_max_wait_ms IS NULL))`

// minFanOutGroup is the smallest group createFanOutsSQL writes; a
// smaller one goes one statement per event. Its arrays, window functions
// and CTEs cost more than they save on a few events: measured at 300
// events/s, groups of 2 or 3 cost Postgres 0.48 ms of executor time per
// event in one statement against 0.37 ms one statement each, while at full
// speed (single, groups of about 12) the one statement cost 0.15–0.18 ms
// per event against 0.24–0.32.
const minFanOutGroup = 6

// isFanOut reports whether a write can go in createFanOutsSQL: a fan-out
// to every matching subscription, not a test event to one, nor a scheduled
// event, nor an operational event that leaves one out (createEventSQL
// alone has their rules; operational events are rare).
func isFanOut(w EventWrite) bool {
	return w.To.SubscriptionID == nil && !w.To.Test && w.Event.DeliverAt == nil && w.To.Except == nil
}

// createFanOuts writes a group of fan-outs with createFanOutsSQL, as
// createEventSQL would one after another, in one implicit transaction.
// out[i].Created is false for a write whose id was already stored or
// taken by an earlier write of the group; the caller reads the stored
// event for those.
func (s *Events) createFanOuts(ctx context.Context, writes []EventWrite, group []byte) ([]EventWritten, error) {
	n := len(writes)
	var (
		index      = make([]int32, n)
		ids        = make([]uuid.UUID, n)
		created    = make([]time.Time, n)
		types      = make([]string, n)
		merchants  = make([]string, n)
		versions   = make([]string, n)
		bodies     = make([][]byte, n)
		parents    = make([]string, n)
		held       = make([]*time.Time, n)
		millis     = make([]int64, n)
		leases     = make([]*time.Time, n)
		matchIndex []int32
		matchSubs  []uuid.UUID
	)
	for i, w := range writes {
		e := w.Event
		index[i], ids[i], created[i], types[i], merchants[i] = int32(i+1), e.ID, e.CreatedAt, e.Type, e.MerchantID
		versions[i], bodies[i], parents[i], millis[i] = e.APIVersion, e.Body, e.TraceParent, e.CreatedAt.UnixMilli()
		if !w.To.HeldUntil.IsZero() {
			held[i] = &w.To.HeldUntil
		}
		if !w.LeaseUntil.IsZero() {
			leases[i] = &w.LeaseUntil
		}
		for _, sub := range w.To.Matched {
			matchIndex, matchSubs = append(matchIndex, int32(i+1)), append(matchSubs, sub)
		}
	}
	rows, err := s.pool.Query(ctx, createFanOutsSQL, index, ids, created, types, merchants, versions, bodies, parents, held, millis,
		matchIndex, matchSubs, group, leases)
	if err != nil {
		return nil, fmt.Errorf("create %d events: %w", n, err)
	}
	out := make([]EventWritten, n)
	for i, w := range writes {
		out[i].Event = w.Event
	}
	var (
		i          int32
		wrote      bool
		leaseUntil *time.Time
		policy     *RetryPolicy
		c          createdDeliveryColumns
		sub        leasedSubscription
	)
	targets := append(append([]any{&i, &wrote, &leaseUntil, &policy}, c.targets()...), sub.targets()...)
	_, err = pgx.ForEachRow(rows, targets, func() error {
		if i < 1 || int(i) > n {
			return fmt.Errorf("write index %d out of the group's %d", i, n)
		}
		w := &out[i-1]
		w.Created = wrote
		if d, ok := c.delivery(); ok {
			w.Deliveries = append(w.Deliveries, d)
			if leaseUntil != nil {
				w.lease(d, policy, *leaseUntil, &sub)
			}
		}
		// The next row's values in pointers of their own.
		c, leaseUntil, policy, sub = createdDeliveryColumns{}, nil, nil, leasedSubscription{}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("create %d events: %w", n, err)
	}
	return out, nil
}
