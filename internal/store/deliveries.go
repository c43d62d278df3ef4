package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Deliveries owns the scheduled life of a delivery: the lease an attempt
// takes, the record of its outcome (and the subscription health it moves),
// the release or abandonment of a lease, the ordered lines (ordering.go),
// and the due list the sweeper pages through.
type Deliveries struct {
	db
}

// deliveryColumns is the column list scanDelivery reads, in its order.
const deliveryColumns = `id, merchant_id, event_id, event_created_at, event_type, subscription_id,
	status, test, attempt_count, next_attempt_at, created_at, updated_at`

func scanDelivery(row pgx.CollectableRow) (Delivery, error) {
	var d Delivery
	err := row.Scan(deliveryTargets(&d)...)
	return d, err
}

// deliveryTargets are the scan targets of deliveryColumns in d, for a
// query that reads more columns after them.
func deliveryTargets(d *Delivery) []any {
	return []any{&d.ID, &d.MerchantID, &d.EventID, &d.EventCreatedAt, &d.EventType, &d.SubscriptionID,
		&d.Status, &d.Test, &d.AttemptCount, &d.NextAttemptAt, &d.CreatedAt, &d.UpdatedAt}
}

// LeasedDelivery is a delivery whose row a worker holds for one attempt,
// with everything the attempt needs.
type LeasedDelivery struct {
	Delivery
	// URL is the subscription's target.
	URL string
	// SubscriptionStatus is enabled or disabled.
	SubscriptionStatus SubscriptionStatus
	// SubscriptionDeleted is true once the merchant deleted the
	// subscription.
	SubscriptionDeleted bool
	// Body is the event's envelope, exactly as stored.
	Body []byte
	// LeaseUntil is when the lease lapses if the attempt is never recorded.
	LeaseUntil time.Time
	// SubscriptionVersion changes whenever the subscription does (its
	// secrets rotated, say), so that a cache of its secrets knows when it
	// is stale.
	SubscriptionVersion time.Time
	// Kind says how the delivery travels: dialled (endpoint) or relayed to
	// a `webhookd listen` connection (listener).
	Kind SubscriptionKind
	// SealedHeaders are the subscription's extra request headers, sealed;
	// nil when it has none.
	SealedHeaders []byte
	// SealedAuthentication is the subscription's endpoint authentication,
	// sealed (Authentication.Sealed); nil when it has none.
	SealedAuthentication []byte
	// AuthenticationType is its type (AuthenticationSummary.Type), so that
	// an attempt knows what to open without opening it; "" for none.
	AuthenticationType string
	// EncryptionKey is the subscription's public JWK the body is
	// encrypted to; nil: sent in clear.
	EncryptionKey []byte
	// TraceParent is the event's (Event.TraceParent): each attempt's span
	// is its child. "" when the event was published untraced.
	TraceParent string
	// TraceContext is the subscription's switch of the traceparent header
	// its deliveries carry.
	TraceContext bool
	// PayloadStyle is the subscription's (PayloadFull or PayloadThin) at
	// the attempt: what of Body the attempt sends.
	PayloadStyle string
	// SealedDestination is the subscription's broker destination, sealed
	// (Destination.Sealed); nil for an HTTP endpoint.
	SealedDestination []byte
	// TransformationVersion is the version of the subscription's
	// transformation the attempt runs; nil when it has none turned on.
	// The lease carries the version, not the code: the worker keeps the
	// compiled program per version and reads the code on a miss
	// (Subscriptions.TransformationOf).
	TransformationVersion *int
}

// LeaseDelivery takes the delivery's row for attempt number, until
// now+leaseFor. It succeeds only if the delivery is pending, number is the
// next attempt (attempt_count = number-1), no live lease exists and, for an
// ordered delivery, it is the head of its key's line, so that
// one attempt number never runs twice at once and a stale or duplicate task
// finds nothing: then it returns ErrNotFound.
func (s *Deliveries) LeaseDelivery(ctx context.Context, id uuid.UUID, createdAt time.Time, number int, now time.Time, leaseFor time.Duration) (LeasedDelivery, error) {
	ls, errs, err := s.LeaseDeliveries(ctx, []LeaseRequest{{ID: id, CreatedAt: createdAt, Number: number}}, now, leaseFor)
	if err != nil {
		return LeasedDelivery{}, err
	}
	return ls[0], errs[0]
}

// LeaseRequest names the attempt a worker wants to run.
type LeaseRequest struct {
	ID        uuid.UUID
	CreatedAt time.Time
	Number    int
	// Handover is a lease the attempt may take over although it has not
	// lapsed (zero: none): the one a publish took for its own pool
	// (EventWrite.LeaseUntil), when the pool then refused the attempt and
	// it went to the schedule instead.
	Handover time.Time
}

// leaseSQL leases attempts named by (id, created_at, number): $1, $2 and $3
// in step, $4 the lease's end, $5 now, $6 in step the lease each may take
// over (LeaseRequest.Handover; NULL: none). Each delivery is read by its primary
// key.
//
// Its pending test is written IS NOT DISTINCT FROM, which means the same
// as = on a NOT NULL column but serves no index: written status =
// 'pending', it matched the predicate of deliveries_due_idx and a column of
// the list indexes, and with statistics older than a fast-growing backlog
// (a partition analyzed while it held few pending deliveries: a minute of
// publishing between two autovacuum runs) the planner read the whole
// backlog through one of them to lease each delivery — 4.4 ms per delivery
// under 100,000 pending, which collapsed throughput to about 200
// deliveries/s.
const leaseSQL = `
		UPDATE deliveries d SET lease_until = $4, ` + pinRetryPolicy + `
		FROM unnest($1::uuid[], $2::timestamptz[], $3::int[], $6::timestamptz[]) WITH ORDINALITY AS r(id, created_at, number, handover, i),
			subscriptions s, events e
		WHERE d.id = r.id AND d.created_at = r.created_at AND d.status IS NOT DISTINCT FROM 'pending' AND d.attempt_count = r.number - 1
		  AND (d.lease_until IS NULL OR d.lease_until < $5 OR d.lease_until = r.handover)
		  AND (d.sequence IS NULL OR ` + isLineHead + `)
		  AND s.id = d.subscription_id
		  AND e.id = d.event_id AND e.created_at = d.event_created_at
		RETURNING r.i, d.id, d.merchant_id, d.event_id, d.event_created_at, d.event_type, d.subscription_id,
			d.status, d.test, d.attempt_count, d.next_attempt_at, d.created_at, d.updated_at,
			e.body, d.lease_until, coalesce(e.traceparent, ''), d.ordering_key, d.sequence, ` + leasedRetryPolicy + `, d.deliver_at,
			` + leasedSubscriptionColumns

// LeaseDeliveries is LeaseDelivery for many attempts in one statement (the
// workers' group commit). It returns one LeasedDelivery and one error per
// request: nil, or ErrNotFound when that attempt is stale or running.
func (s *Deliveries) LeaseDeliveries(ctx context.Context, reqs []LeaseRequest, now time.Time, leaseFor time.Duration) ([]LeasedDelivery, []error, error) {
	ids, created, numbers, handovers := attemptColumns(reqs)
	rows, err := s.pool.Query(ctx, leaseSQL,
		ids, created, numbers, now.Add(leaseFor).Truncate(time.Microsecond), now, handovers)
	if err != nil {
		return nil, nil, fmt.Errorf("lease %d deliveries: %w", len(reqs), err)
	}
	out := make([]LeasedDelivery, len(reqs))
	found := make([]bool, len(reqs))
	var l LeasedDelivery
	d := &l.Delivery
	var i int
	var sub leasedSubscription
	_, err = pgx.ForEachRow(rows, append([]any{&i, &d.ID, &d.MerchantID, &d.EventID, &d.EventCreatedAt, &d.EventType, &d.SubscriptionID,
		&d.Status, &d.Test, &d.AttemptCount, &d.NextAttemptAt, &d.CreatedAt, &d.UpdatedAt,
		&l.Body, &l.LeaseUntil, &l.TraceParent, &d.OrderingKey, &d.Sequence, &d.RetryPolicy, &d.DeliverAt}, sub.targets()...), func() error {
		sub.fill(&l)
		out[i-1], found[i-1] = l, true
		// The next row's policy is decoded into a value of its own, not
		// into this one's, and its subscription's columns are scanned
		// afresh.
		d.RetryPolicy, sub = nil, leasedSubscription{}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("lease %d deliveries: %w", len(reqs), err)
	}
	errs := make([]error, len(reqs))
	for i, r := range reqs {
		if !found[i] {
			errs[i] = fmt.Errorf("lease delivery %s attempt %d: %w", r.ID, r.Number, ErrNotFound)
		}
	}
	return out, errs, nil
}

// attemptColumns are the columns of reqs, as the arrays a statement
// unnests.
func attemptColumns(reqs []LeaseRequest) (ids []uuid.UUID, created []time.Time, numbers []int32, handovers []*time.Time) {
	ids = make([]uuid.UUID, len(reqs))
	created = make([]time.Time, len(reqs))
	numbers = make([]int32, len(reqs))
	handovers = make([]*time.Time, len(reqs))
	for i, r := range reqs {
		ids[i], created[i], numbers[i] = r.ID, r.CreatedAt, int32(r.Number)
		if !r.Handover.IsZero() {
			handovers[i] = &r.Handover
		}
	}
	return ids, created, numbers, handovers
}

// AttemptRecord is the outcome of one attempt and the state it leaves the
// delivery in. The dispatcher decides the state (retry policy); the store
// only writes it.
type AttemptRecord struct {
	// Delivery is the leased delivery (ID, CreatedAt, SubscriptionID and
	// Test are used).
	Delivery Delivery
	// Attempt is the row to append; its Number is the attempt's.
	Attempt Attempt
	// Status is the delivery's status after the attempt.
	Status DeliveryStatus
	// NextAttemptAt is when the next attempt is due; nil when none is.
	NextAttemptAt *time.Time
	// DisableSubscription disables the subscription (the receiver answered
	// 410 Gone). Ignored for test deliveries.
	DisableSubscription bool
}

// RecordAttempt writes one attempt: the attempt row, the delivery's new
// state with its lease released and, unless the delivery is a test, the
// subscription's health. If that attempt number is already recorded (a
// worker whose lease lapsed finished late), nothing is written and
// ErrConflict is returned.
func (s *Deliveries) RecordAttempt(ctx context.Context, r AttemptRecord) error {
	errs, err := s.RecordAttempts(ctx, []AttemptRecord{r})
	if err != nil {
		return err
	}
	return errs[0]
}

// AbandonDelivery ends a delivery that can no longer be attempted (its
// subscription was deleted or disabled) without adding an attempt: it
// becomes failed with nothing due, and its lease is released.
func (s *Deliveries) AbandonDelivery(ctx context.Context, d Delivery, now time.Time) error {
	abandon := func(ctx context.Context, q querier) error {
		_, err := q.Exec(ctx, `
			UPDATE deliveries SET status = 'failed', next_attempt_at = NULL, lease_until = NULL, updated_at = $3
			WHERE id = $1 AND created_at = $2 AND status = 'pending'`, d.ID, d.CreatedAt, now)
		return err
	}
	var err error
	if d.Sequence == nil {
		err = abandon(ctx, s.pool)
	} else {
		// The end of an ordered delivery and the release of its key commit
		// together.
		err = s.tx(ctx, func(tx pgx.Tx) error {
			if err := abandon(ctx, tx); err != nil {
				return err
			}
			_, err := advanceLines(ctx, tx, []Delivery{d}, now)
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("abandon delivery %s: %w", d.ID, err)
	}
	return nil
}

// DueDeliveries lists pending deliveries whose next attempt was due before
// dueBefore and that no live lease holds at now, oldest due first, at most
// limit of them after the position after (nil for the start), each with
// its subscription's rate limit and batch. The sweeper pages through them
// with the last row's (NextAttemptAt, ID).
func (s *Deliveries) DueDeliveries(ctx context.Context, dueBefore, now time.Time, after *DuePosition, limit int) ([]Delivery, error) {
	rows, err := s.pool.Query(ctx, dueSQL, dueArgs(dueBefore, now, after, limit)...)
	if err != nil {
		return nil, fmt.Errorf("list due deliveries: %w", err)
	}
	ds, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Delivery, error) {
		var d Delivery
		var batch batchColumns
		err := row.Scan(append(deliveryTargets(&d), &d.RateLimit, &batch.maxSize, &batch.maxWaitMS)...)
		d.Batch = batch.value()
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("list due deliveries: %w", err)
	}
	return ds, nil
}

// dueSQL is DueDeliveries' statement: $1 and $2 as isDue's, the page
// after the position ($3, $4), $5 rows.
//
// It reads the subscription's rate limit and batch because the sweeper
// parks each attempt again in its subscription's lane, and a push sets
// the lane's rate and batch from the attempt: without them one swept
// attempt lifted the subscription's rate limit and unbatched its lane
// (its deliveries went one request each) until the next fan-out.
//
// The position is always compared, the first page's being (-infinity, nil
// UUID), never skipped with "$3 IS NULL OR …": the engine runs generic
// plans (store.go), and in a generic plan that OR serves no index, so
// each page read the due index from its start and filtered out the pages
// before it. A sweep of a backlog of N overdue deliveries read N²/1,000
// rows: 42,000 read to return the 500 in the middle of an 85,000 backlog,
// 32 ms a page, and a whole sweep of 100,000 overdue deliveries read 10.4
// million index entries in 32 s, longer than the sweep interval. The bare
// row comparison bounds the index scan (next_attempt_at >= $3) on every
// page: the same sweep takes 0.7 s.
const dueSQL = `
		SELECT due.*, coalesce(s.rate_limit, 0), s.batch_max_size, s.batch_max_wait_ms
		FROM (SELECT ` + deliveryColumns + ` FROM deliveries d
		  WHERE ` + isDue + `
		    AND (next_attempt_at, id) > ($3, $4::uuid)
		  ORDER BY next_attempt_at, id LIMIT $5) due
		LEFT JOIN subscriptions s ON s.id = due.subscription_id
		ORDER BY due.next_attempt_at, due.id`

// dueArgs are dueSQL's arguments.
func dueArgs(dueBefore, now time.Time, after *DuePosition, limit int) []any {
	afterAt := pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	afterID := uuid.Nil
	if after != nil {
		afterAt, afterID = pgtype.Timestamptz{Time: after.NextAttemptAt, Valid: true}, after.ID
	}
	return []any{dueBefore, now, afterAt, afterID, limit}
}

// isDue is the condition, on a delivery row d, that DueDeliveries lists it:
// pending, its next attempt due before $1, no lease live at $2, and the
// head of its line if it is ordered.
const isDue = `d.status = 'pending' AND d.next_attempt_at < $1 AND (d.lease_until IS NULL OR d.lease_until < $2)
		  AND (d.sequence IS NULL OR ` + isLineHead + `)`

// StillDue returns, in their order, those of ds that DueDeliveries would
// still list at the same attempt count. The sweeper asks it after it found
// no task for them in Redis: an attempt made between its page's read and
// that look took its finished task with it, and is no loss.
func (s *Deliveries) StillDue(ctx context.Context, ds []Delivery, dueBefore, now time.Time) ([]Delivery, error) {
	if len(ds) == 0 {
		return nil, nil
	}
	reqs := make([]LeaseRequest, len(ds))
	for i, d := range ds {
		reqs[i] = LeaseRequest{ID: d.ID, CreatedAt: d.CreatedAt, Number: d.AttemptCount + 1}
	}
	ids, created, numbers, _ := attemptColumns(reqs)
	rows, err := s.pool.Query(ctx, `
		SELECT r.i FROM deliveries d
		JOIN unnest($3::uuid[], $4::timestamptz[], $5::int[]) WITH ORDINALITY AS r(id, created_at, number, i)
			ON d.id = r.id AND d.created_at = r.created_at AND d.attempt_count = r.number - 1
		WHERE `+isDue+`
		ORDER BY r.i`, dueBefore, now, ids, created, numbers)
	if err != nil {
		return nil, fmt.Errorf("check %d due deliveries: %w", len(ds), err)
	}
	idx, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("check %d due deliveries: %w", len(ds), err)
	}
	out := make([]Delivery, len(idx))
	for i, j := range idx {
		out[i] = ds[j-1]
	}
	return out, nil
}

// DuePosition is a place in the DueDeliveries order.
type DuePosition struct {
	NextAttemptAt time.Time
	ID            uuid.UUID
}

// DeliveryByID returns one delivery with its attempts, oldest first,
// whatever its merchant; callers that serve a merchant compare MerchantID.
func (s *Deliveries) DeliveryByID(ctx context.Context, id uuid.UUID) (Delivery, error) {
	return readDelivery(ctx, s.pool, id)
}

// readDelivery is DeliveryByID, for the parts that read a delivery.
func readDelivery(ctx context.Context, pool *pgxpool.Pool, id uuid.UUID) (Delivery, error) {
	return readDeliveryFrom(ctx, pool, id, "deliveries", deliveryColumns)
}

// readDeliveryFrom is readDelivery from table, reading columns (which
// scanDelivery reads): Views reads the status it shows (shownDeliveries).
func readDeliveryFrom(ctx context.Context, pool *pgxpool.Pool, id uuid.UUID, table, columns string) (Delivery, error) {
	// The id is a UUIDv7 whose timestamp is created_at: bounding created_at
	// by it prunes the lookup to one partition.
	createdAt := uuidTime(id)
	var d Delivery
	// One snapshot for both reads, so that attempt_count and the attempts
	// agree even while an attempt is being recorded.
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+columns+` FROM `+table+`
			WHERE id = $1 AND created_at >= $2 AND created_at < $3`, id, createdAt, createdAt.Add(time.Millisecond))
		if err != nil {
			return err
		}
		if d, err = pgx.CollectExactlyOneRow(rows, scanDelivery); err != nil {
			return notFound(err)
		}
		rows, err = tx.Query(ctx, `SELECT `+attemptRowColumns+`
			FROM attempts WHERE delivery_id = $1 AND delivery_created_at = $2 ORDER BY number`, d.ID, d.CreatedAt)
		if err != nil {
			return err
		}
		d.Attempts, err = pgx.CollectRows(rows, scanAttempt)
		return err
	})
	if err != nil {
		return Delivery{}, fmt.Errorf("delivery %s: %w", id, err)
	}
	return d, nil
}

// uuidTime is the millisecond timestamp of a UUIDv7 (zero time for other
// versions).
func uuidTime(id uuid.UUID) time.Time {
	if id.Version() != 7 {
		return time.Time{}
	}
	sec, nsec := id.Time().UnixTime()
	return time.Unix(sec, nsec).UTC()
}

// ReleaseLease ends the lease a worker took with LeaseDelivery (identified
// by its leaseUntil, so that a lease taken since by another worker stays)
// without recording anything, so that the attempt can run again at once.
func (s *Deliveries) ReleaseLease(ctx context.Context, d Delivery, leaseUntil time.Time) error {
	_, err := s.pool.Exec(ctx, `UPDATE deliveries SET lease_until = NULL
		WHERE id = $1 AND created_at = $2 AND lease_until = $3`, d.ID, d.CreatedAt, leaseUntil)
	if err != nil {
		return fmt.Errorf("release lease of delivery %s: %w", d.ID, err)
	}
	return nil
}

// RecordAttempts writes many attempts in one statement and one commit:
// the group commit that lets a worker record hundreds of attempts per
// transaction. It has RecordAttempt's semantics per record, and returns one
// error per record: nil, or ErrConflict when that attempt number was
// already recorded. The records must be of distinct deliveries.
func (s *Deliveries) RecordAttempts(ctx context.Context, rs []AttemptRecord) ([]error, error) {
	errs, _, err := s.RecordAttemptsNext(ctx, rs)
	return errs, err
}

// recordAttempts is RecordAttempts' one statement, on the pool or in a
// transaction.
func recordAttempts(ctx context.Context, q querier, rs []AttemptRecord) ([]error, error) {
	n := len(rs)
	var (
		ids        = make([]uuid.UUID, n)
		created    = make([]time.Time, n)
		numbers    = make([]int32, n)
		statuses   = make([]string, n)
		triggers   = make([]string, n)
		httpStatus = make([]*int32, n)
		errs       = make([]*string, n)
		durations  = make([]int32, n)
		bodies     = make([]string, n)
		attempted  = make([]time.Time, n)
		dstatus    = make([]string, n)
		next       = make([]*time.Time, n)
		disable    = make([]bool, n)
		headers    = make([]*string, n)
		batches    = make([]*string, n)
		transforms = make([]*int32, n)
		sentBodies = make([]*string, n)
	)
	for i, r := range rs {
		a := r.Attempt
		ids[i], created[i], numbers[i] = r.Delivery.ID, r.Delivery.CreatedAt, int32(a.Number)
		statuses[i], triggers[i], errs[i] = string(a.Status), string(a.Trigger), a.Error
		if a.HTTPStatus != nil {
			v := int32(*a.HTTPStatus)
			httpStatus[i] = &v
		}
		durations[i], bodies[i], attempted[i] = int32(a.DurationMS), a.ResponseBody, a.AttemptedAt
		dstatus[i], next[i], disable[i] = string(r.Status), r.NextAttemptAt, r.DisableSubscription
		h, err := headersJSON(a.RequestHeaders)
		if err != nil {
			return nil, fmt.Errorf("record %d attempts: %w", n, err)
		}
		headers[i] = h
		batches[i] = a.BatchID
		if a.TransformationVersion != nil {
			v := int32(*a.TransformationVersion)
			transforms[i] = &v
		}
		sentBodies[i] = a.RequestBody
	}
	// One statement: the attempts that are new, the state of their
	// deliveries, and the health of their (non-test) subscriptions,
	// aggregated so that each subscription row is updated once: failures
	// after the batch's last success add to the count, a success resets it.
	// A healthy subscription's row is written only when its last success
	// or failure moves by a second or more: the row is every record's
	// common lock (records of one subscription queued on it, each holding
	// its ordered keys meanwhile) and a new row version each time
	// (98,307 updates for 98,334 attempts in the ordered bench). A change
	// of count, failing streak or status is always written.
	rows, err := q.Query(ctx, `
		WITH i AS (
			SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::int[], $4::text[], $5::text[], $6::int[],
				$7::text[], $8::int[], $9::text[], $10::timestamptz[], $11::text[], $12::timestamptz[], $13::bool[],
				$14::jsonb[], $15::text[], $16::int[], $17::text[])
				AS t(id, created_at, number, status, trigger, http_status, error, duration_ms, response_body,
				     attempted_at, dstatus, next_at, disable, request_headers, batch_id, transformation_version, request_body)
		), a AS (
			INSERT INTO attempts (delivery_id, delivery_created_at, number, status, trigger, http_status, error,
				duration_ms, response_body, attempted_at, request_headers, batch_id, transformation_version, request_body)
			SELECT id, created_at, number, status, trigger, http_status, error, duration_ms, response_body, attempted_at,
				request_headers, batch_id, transformation_version, request_body
			FROM i
			-- An attempt of a delivery erased meanwhile (erasure.go) is
			-- not kept: its bodies are the erased content. The status is
			-- read by primary key, one delivery at a time (a scalar
			-- subquery is never turned into a join): written NOT EXISTS,
			-- it was planned as an anti-join reading every erased row of
			-- every partition, a scan of the day's partition when its
			-- statistics predate its rows.
			WHERE (SELECT x.status FROM deliveries x WHERE x.id = i.id AND x.created_at = i.created_at) IS DISTINCT FROM 'erased'
			ORDER BY id
			ON CONFLICT DO NOTHING RETURNING delivery_id, number
		), d AS (
			UPDATE deliveries d SET attempt_count = GREATEST(d.attempt_count, i.number), status = i.dstatus,
				next_attempt_at = i.next_at, lease_until = NULL, updated_at = i.attempted_at,
				manual_requested = CASE WHEN i.trigger = 'manual' THEN GREATEST(d.manual_requested - 1, 0)
					ELSE d.manual_requested END
			FROM i JOIN a ON a.delivery_id = i.id AND a.number = i.number
			WHERE d.id = i.id AND d.created_at = i.created_at AND d.status <> 'erased'
			RETURNING d.id, d.subscription_id, d.test, i.status = 'succeeded' AS ok, i.status = 'skipped' AS skipped,
				i.attempted_at, i.disable
		), h AS (
			SELECT subscription_id,
				max(attempted_at) FILTER (WHERE ok) AS success_at,
				max(attempted_at) FILTER (WHERE NOT ok) AS failure_at,
				bool_or(disable) AS disable,
				count(*) FILTER (WHERE NOT ok AND attempted_at > coalesce(last_ok, '-infinity')) AS failures_after,
				min(attempted_at) FILTER (WHERE NOT ok AND attempted_at > coalesce(last_ok, '-infinity')) AS first_failure_after
			FROM (SELECT *, max(attempted_at) FILTER (WHERE ok) OVER (PARTITION BY subscription_id) AS last_ok
			      FROM d WHERE NOT test AND NOT skipped) x
			GROUP BY subscription_id
		), s AS (
			UPDATE subscriptions s SET
				consecutive_failures = CASE WHEN h.success_at IS NOT NULL THEN h.failures_after
					ELSE s.consecutive_failures + h.failures_after END,
				last_success_at = greatest(s.last_success_at, h.success_at),
				last_failure_at = greatest(s.last_failure_at, h.failure_at),
				failing_since = CASE WHEN h.success_at IS NOT NULL THEN h.first_failure_after
					ELSE coalesce(s.failing_since, h.first_failure_after) END,
				status = CASE WHEN h.disable THEN 'disabled' ELSE s.status END,
				updated_at = CASE WHEN h.disable AND s.status <> 'disabled' THEN greatest(h.success_at, h.failure_at) ELSE s.updated_at END
			FROM h WHERE s.id = h.subscription_id AND (
				(h.disable AND s.status <> 'disabled')
				OR h.failures_after > 0
				OR (h.success_at IS NOT NULL AND (s.consecutive_failures <> 0 OR s.failing_since IS NOT NULL))
				OR h.success_at >= coalesce(s.last_success_at, '-infinity') + interval '1 second'
				OR h.failure_at >= coalesce(s.last_failure_at, '-infinity') + interval '1 second')
			RETURNING 1
		), r AS (`+attemptStatsRollUp+`)
		SELECT id FROM d`,
		ids, created, numbers, statuses, triggers, httpStatus, errs, durations, bodies, attempted, dstatus, next, disable, headers, batches, transforms, sentBodies)
	if err != nil {
		return nil, fmt.Errorf("record %d attempts: %w", n, err)
	}
	written, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("record %d attempts: %w", n, err)
	}
	done := make(map[uuid.UUID]bool, len(written))
	for _, id := range written {
		done[id] = true
	}
	out := make([]error, n)
	for i, r := range rs {
		if !done[r.Delivery.ID] {
			out[i] = fmt.Errorf("record attempt %d of delivery %s: already recorded: %w", r.Attempt.Number, r.Delivery.ID, ErrConflict)
		}
	}
	return out, nil
}

// AbandonSubscriptionDeliveries ends at once every pending delivery of a
// subscription that was deleted or disabled and no live lease holds at
// now, as AbandonDelivery ends them one by one when an attempt finds the
// subscription gone: failed, next attempt cleared, and its ordering keys
// released. Test deliveries (they go to disabled subscriptions too) are
// left alone. gone reports whether the subscription is deleted or disabled
// (an ended listener is not: the relay records why its deliveries stop);
// when it is not, nothing is changed.
func (s *Deliveries) AbandonSubscriptionDeliveries(ctx context.Context, subscriptionID uuid.UUID, now time.Time) (ended int64, gone bool, err error) {
	err = s.txRetryingDeadlocks(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `
			SELECT kind <> 'listener' AND (deleted_at IS NOT NULL OR status <> 'enabled') FROM subscriptions WHERE id = $1`,
			subscriptionID).Scan(&gone); err != nil || !gone {
			return err
		}
		// SKIP LOCKED: rows another statement holds (DeleteSubscription's
		// own ending of them, an attempt's record) are being ended there;
		// waiting for them in another order could deadlock with it. A
		// disabled poll subscription's deliveries stay readable (poll.go):
		// nothing waits to be sent for them.
		tag, err := tx.Exec(ctx, `
			UPDATE deliveries d SET status = 'failed', next_attempt_at = NULL, lease_until = NULL, updated_at = $2
			FROM (SELECT id, created_at FROM deliveries
			      WHERE subscription_id = $1 AND status = 'pending' AND NOT test AND poll_position IS NULL
			        AND (lease_until IS NULL OR lease_until < $2)
			      FOR UPDATE SKIP LOCKED) x
			WHERE d.id = x.id AND d.created_at = x.created_at`, subscriptionID, now)
		if err != nil {
			return err
		}
		if ended = tag.RowsAffected(); ended == 0 {
			return nil
		}
		// The keys locked in the order advanceLines locks them.
		if _, err := tx.Exec(ctx, `SELECT 1 FROM ordering_keys WHERE subscription_id = $1 ORDER BY key FOR UPDATE`,
			subscriptionID); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `
			UPDATE ordering_keys k SET head = coalesce((
				SELECT min(d.sequence) FROM deliveries d
				WHERE d.subscription_id = k.subscription_id AND d.ordering_key = k.key
				  AND d.status = 'pending' AND d.sequence IS NOT NULL), k.last + 1)
			WHERE k.subscription_id = $1`, subscriptionID)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("abandon the deliveries of subscription %s: %w", subscriptionID, err)
	}
	return ended, gone, nil
}
