package store

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Events owns the publishing writes: an event, its id guard and its
// fan-out into deliveries, one at a time or a commit group at once, and the
// read of the merchant and filters a publish needs first (filters.go).
type Events struct {
	db
}

// NewEvent is an event as a producer publishes it.
type NewEvent struct {
	// ID is the producer's event id; nil lets webhookd make a UUIDv7.
	ID         *uuid.UUID      `json:"id,omitempty"`
	MerchantID string          `json:"merchant_id"`
	Type       string          `json:"type"`
	Payload    json.RawMessage `json:"payload"`
	// APIVersion overrides the merchant's pinned version when set.
	APIVersion string `json:"api_version,omitempty"`
	// DeliverAt, when set, is when the deliveries make their first attempt
	// (a scheduled event).
	DeliverAt *time.Time `json:"deliver_at,omitempty"`
}

// Audience says which subscriptions an event is delivered to.
type Audience struct {
	// SubscriptionID, when set, delivers to that one subscription of the
	// merchant (send_test_event), whatever its event filter and status,
	// instead of fanning out to every matching enabled subscription.
	SubscriptionID *uuid.UUID
	// Test marks the deliveries as test deliveries: they never touch the
	// subscription's health and send no failure e-mail.
	Test bool
	// Matched are the subscriptions with a filter whose filter the event
	// passed (see MerchantWithFilters): a subscription with a filter
	// gets a delivery only when listed here, so one whose filter was set
	// meanwhile gets none rather than an unfiltered one.
	Matched []uuid.UUID
	// HeldUntil, when set, is when the deliveries come due instead of at
	// once: an endpoint check, which leases and sends its deliveries
	// itself right after this, keeps the sweeper from taking one for lost
	// meanwhile; if the check dies first, its deliveries are swept after
	// this instant and sent by a worker.
	HeldUntil time.Time
	// Except, when set, makes the fan-out an operational event's: the
	// subscription it is about (Except) never receives it (no loops), and
	// only subscriptions that name its type do ('*' does not, so that a
	// handler written for the merchant's resources never meets one
	// unasked).
	Except *uuid.UUID
}

// maxOrderingKeyValue bounds the key value of an ordered delivery, in
// characters: a longer one (a path that names a large object, say) leaves
// the delivery unordered.
const maxOrderingKeyValue = "256"

// CreateEvent stores e and, in the same transaction, one pending delivery
// per subscription of the audience, each due at e.CreatedAt. A fan-out
// (no SubscriptionID) also reaches the merchant's disabled endpoints: their
// deliveries are skipped, due never, so that recover can replay them. A
// delivery to an ordered subscription (not a test, not skipped) takes the
// next sequence of its key; while an earlier delivery of that key is pending
// it waits with no due time (NextAttemptAt nil) and its first attempt is not
// to be enqueued. A skipped delivery takes no sequence, so that it never
// becomes the head of its key and holds nothing back: recover replays it as
// a manual attempt outside the order, like a redelivery. e arrives
// complete: its ID, envelope Body and CreatedAt are fixed by the caller, and
// CreatedAt must be at millisecond precision because it is also the
// timestamp of the deliveries' UUIDv7 ids (so that a lookup by id prunes to
// one partition).
//
// Publishing is idempotent on the event id: when the id is already stored,
// CreateEvent writes nothing and returns the stored event with created
// false and no deliveries. The same id from another merchant is
// ErrConflict.
func (s *Events) CreateEvent(ctx context.Context, e Event, to Audience) (Event, []Delivery, bool, error) {
	w, err := s.createEvent(ctx, EventWrite{Event: e, To: to}, nil)
	return w.Event, w.Deliveries, w.Created, err
}

// createEvent is CreateEvent of one write, with the deliveries' ids
// marked with group (nil: not).
func (s *Events) createEvent(ctx context.Context, w EventWrite, group []byte) (EventWritten, error) {
	rows, err := s.pool.Query(ctx, createEventSQL, createEventArgs(w, group)...)
	if err != nil {
		return EventWritten{}, fmt.Errorf("create event %s: %w", w.Event.ID, err)
	}
	written, err := scanCreatedEvent(rows, w.Event)
	if err != nil {
		return EventWritten{}, fmt.Errorf("create event %s: %w", w.Event.ID, err)
	}
	if !written.Created {
		stored, err := s.storedEvent(ctx, w.Event)
		return EventWritten{Event: stored}, err
	}
	return written, nil
}

// storedEvent is the event already stored under e's id, which a publish of
// e leaves as it is; the same id from another merchant is ErrConflict.
func (s *Events) storedEvent(ctx context.Context, e Event) (Event, error) {
	stored, err := s.EventByID(ctx, e.ID)
	if err != nil {
		return Event{}, err
	}
	if stored.MerchantID != e.MerchantID {
		return Event{}, fmt.Errorf("create event %s: id taken by another merchant: %w", e.ID, ErrConflict)
	}
	return stored, nil
}

// EventWrite is one event of a CreateEvents group, as CreateEvent takes it.
type EventWrite struct {
	Event Event
	To    Audience
	// LeaseUntil, when set, is the end of a lease the write takes on each
	// delivery whose first attempt may start at once (due now, neither
	// paced nor batched, not behind another of its ordering key, not
	// skipped, not polled), for the publishing process's own pool: the
	// attempt then needs no lease statement of its own (EventWritten.Leased).
	LeaseUntil time.Time
}

// EventWritten is what CreateEvent returns, for one event of a group.
type EventWritten struct {
	// Event is the event as stored: the one written, or the one already
	// stored under its id (Created false).
	Event Event
	// Deliveries are the deliveries created with it.
	Deliveries []Delivery
	// Created is false when the id was already stored.
	Created bool
	// Leased are the deliveries the write leased (EventWrite.LeaseUntil),
	// by id, each with everything its attempt needs; nil when none.
	Leased map[uuid.UUID]LeasedDelivery
}

// GroupSize is how many bytes end the id of every delivery CreateEvents
// writes for one group: the group's own, so that the delivery's id tells
// which group it was written with (DeliveryGroup) and the first attempts of
// a group can share one task that the sweeper can name.
const GroupSize = 5

// NewGroup makes a commit group's bytes for CreateEvents.
func NewGroup() ([]byte, error) {
	g := make([]byte, GroupSize)
	if _, err := rand.Read(g); err != nil {
		return nil, fmt.Errorf("new commit group: %w", err)
	}
	return g, nil
}

// DeliveryGroup is the commit group a delivery id carries: its last
// GroupSize bytes. A delivery written alone carries random bytes there,
// the group of no other delivery.
func DeliveryGroup(id uuid.UUID) []byte { return id[len(id)-GroupSize:] }

// CreateEvents is CreateEvent for a group of events that commit together
// (group commit): one transaction, one round trip and one commit for the
// group, and one statement for a group of fan-outs (createFanOutsSQL), so that a burst of single-event publishes costs
// Postgres one WAL flush rather than one each. It returns one result and
// one error per write. Nothing is durable before it returns; then every
// write without an error is. Every delivery id ends with group (NewGroup);
// the rest of its random bits (34) keep the ids of one group's deliveries
// of one millisecond apart.
//
// A statement that fails aborts the group's transaction, so then each
// write is tried again in a transaction of its own: one bad event fails
// alone. An error of the connection or the commit fails the whole group
// (err), as it would each write alone.
func (s *Events) CreateEvents(ctx context.Context, writes []EventWrite, group []byte) ([]EventWritten, []error, error) {
	if len(writes) == 1 {
		// No transaction to share: one implicit transaction, one round trip.
		out, errs := make([]EventWritten, 1), make([]error, 1)
		w := writes[0]
		out[0], errs[0] = s.createEvent(ctx, w, group)
		return out, errs, nil
	}
	var out []EventWritten
	var err error
	if len(writes) < minFanOutGroup || slices.ContainsFunc(writes, func(w EventWrite) bool { return !isFanOut(w) }) {
		out, err = s.createEventsPipelined(ctx, writes, group)
	} else {
		out, err = s.createFanOuts(ctx, writes, group)
	}
	if _, refused := errors.AsType[*pgconn.PgError](err); refused {
		return s.createEventsOneByOne(ctx, writes, group)
	}
	if err != nil {
		return nil, nil, err
	}
	errs := make([]error, len(writes))
	for i, w := range writes {
		if !out[i].Created {
			out[i].Event, errs[i] = s.storedEvent(ctx, w.Event)
		}
	}
	return out, errs, nil
}

// createEventsPipelined writes a group with one createEventSQL statement
// per event, for a group that holds a test event (createFanOutsSQL writes
// fan-outs only). The statements go in one pipelined batch, which Postgres
// runs as one implicit transaction (no BEGIN, no COMMIT: one round trip),
// committed once its last statement ran. The events go in the order given,
// so that ordered subscriptions' keys take their sequences in that order,
// as they would one publish after another.
func (s *Events) createEventsPipelined(ctx context.Context, writes []EventWrite, group []byte) ([]EventWritten, error) {
	out := make([]EventWritten, len(writes))
	var b pgx.Batch
	for i, w := range writes {
		b.Queue(createEventSQL, createEventArgs(w, group)...).Query(func(rows pgx.Rows) error {
			var err error
			out[i], err = scanCreatedEvent(rows, w.Event)
			return err
		})
	}
	if err := s.pool.SendBatch(ctx, &b).Close(); err != nil {
		return nil, fmt.Errorf("create %d events: %w", len(writes), err)
	}
	return out, nil
}

// createEventsOneByOne writes each event in its own transaction, after a
// group's transaction was refused.
func (s *Events) createEventsOneByOne(ctx context.Context, writes []EventWrite, group []byte) ([]EventWritten, []error, error) {
	out, errs := make([]EventWritten, len(writes)), make([]error, len(writes))
	for i, w := range writes {
		out[i], errs[i] = s.createEvent(ctx, w, group)
	}
	return out, errs, nil
}

// One statement per event, so one round trip: the id guard, the event,
// and the fan-out, each step running only if the one before wrote. The
// delivery id is a UUIDv7 built from the event's millisecond timestamp and
// gen_random_uuid's random bits (the version nibble turned from 4 into 7),
// so id and created_at agree without a round trip per subscription; its
// last GroupSize bytes are the commit group's ($11) when it has one; $12
// delays their first attempt (Audience.HeldUntil); $13 is the event's
// traceparent; $15 the subscription a fan-out leaves out (Audience.Except);
// $14 its deliver_at (a scheduled event: the deliveries' first
// attempts are due then, outside any ordering line, and poll subscriptions,
// whose readers would see it in their line at once, get none). $16 is
// the end of the lease the write takes on the deliveries whose first
// attempt may start at once (EventWrite.LeaseUntil; NULL: none), which
// then pin their retry policy as a lease does; the subscription's columns
// an attempt needs are returned for those. The outer join returns one row
// even when no subscription matches, to carry the created flag.
const createEventSQL = `
		WITH g AS (
			INSERT INTO event_ids (id, created_at) VALUES ($2, $3) ON CONFLICT DO NOTHING RETURNING id
		), e AS (
			INSERT INTO events (id, merchant_id, type, api_version, body, created_at, traceparent, deliver_at)
			SELECT $2, $6, $4, $8, $9, $3, nullif($13, ''), $14 FROM g RETURNING id
		), t AS (
			-- A fan-out reaches disabled endpoints too, to record their
			-- deliveries as skipped. The key value orders the delivery only if
			-- it is not skipped and can be sent as a header: at most
			-- ` + maxOrderingKeyValue + ` characters, no control character.
			SELECT s.id, s.merchant_id, s.rate_limit, s.batch_max_size, s.batch_max_wait_ms, sk.skip, s.retry_policy,
				CASE WHEN length(o.v) <= ` + maxOrderingKeyValue + ` AND o.v !~ '[[:cntrl:]]' THEN o.v END AS okey,
				coalesce(s.destination->>'type' = '` + pollDestination + `', false) AS poll
			FROM subscriptions s CROSS JOIN e
			CROSS JOIN LATERAL (SELECT $7::uuid IS NULL AND s.status = 'disabled' AS skip) sk
			-- The payload is parsed only for a subscription that orders
			-- (a WHERE here would be planned as a join filter, applied
			-- after parsing it for every subscription row); OFFSET 0 keeps
			-- v computed once, not once per use above.
			CROSS JOIN LATERAL (
				SELECT CASE WHEN s.ordering_key IS NOT NULL AND NOT $5 AND NOT sk.skip AND $14::timestamptz IS NULL
				                 AND coalesce(s.destination->>'type' <> '` + pollDestination + `', true)
				            THEN convert_from($9, 'UTF8')::jsonb #>> string_to_array(s.ordering_key, '.') END AS v
				OFFSET 0
			) o
			WHERE s.merchant_id = $6 AND s.deleted_at IS NULL
			  AND ($14::timestamptz IS NULL OR coalesce(s.destination->>'type' <> '` + pollDestination + `', true))
			  AND CASE WHEN $7::uuid IS NULL
			           THEN (s.status = 'enabled' OR (s.status = 'disabled' AND s.kind = 'endpoint'))
			                -- An operational event (Except set) reaches only the
			                -- subscriptions that name its type: '*' does not.
			                AND s.events && CASE WHEN $15::uuid IS NULL THEN ARRAY[$4::text, '*'] ELSE ARRAY[$4::text] END
			                AND (s.filter IS NULL OR s.id = ANY($10::uuid[]))
			           ELSE s.id = $7::uuid END
			  AND ($15::uuid IS NULL OR s.id <> $15::uuid)
		), k AS (
			-- Each ordered subscription's key takes its next sequence under
			-- the key's row lock (taken in subscription order, as the end of
			-- a head takes it): publish order is the order of these locks.
			INSERT INTO ordering_keys AS k (subscription_id, key, last, head)
			SELECT id, okey, 1, 1 FROM t WHERE okey IS NOT NULL ORDER BY id
			ON CONFLICT (subscription_id, key) DO UPDATE SET last = k.last + 1
			RETURNING subscription_id, key, last, head
		), p AS (
			-- A poll subscription's delivery takes the next position of its
			-- line under the line's row lock (poll.go): positions commit in
			-- the order they are given. Poll subscriptions take no ordering
			-- line: their one line already keeps every key in publish order.
			INSERT INTO poll_lines AS p (subscription_id, last)
			SELECT id, 1 FROM t WHERE t.poll AND NOT t.skip ORDER BY id
			ON CONFLICT (subscription_id) DO UPDATE SET last = p.last + 1
			RETURNING subscription_id, last
		), d AS (
			INSERT INTO deliveries (id, merchant_id, event_id, event_created_at, event_type, subscription_id,
				status, test, attempt_count, next_attempt_at, created_at, updated_at, ordering_key, sequence, poll_position, deliver_at,
				lease_until, retry_policy)
			SELECT encode(set_bit(set_bit(overlay(overlay(uuid_send(gen_random_uuid())
					PLACING substring(int8send($1::bigint) FROM 3) FROM 1 FOR 6)
					PLACING coalesce($11::bytea, substring(uuid_send(gen_random_uuid()) FROM 12 FOR 5)) FROM 12 FOR 5),
					52, 1), 53, 1), 'hex')::uuid,
				t.merchant_id, e.id, $3, $4, t.id,
				CASE WHEN t.skip THEN 'skipped' ELSE 'pending' END, $5, 0,
				-- A skipped delivery is due never; an ordered delivery behind
				-- a pending one of its key waits, due at no time, until that
				-- one ends; a poll delivery is never due: it is read.
				CASE WHEN NOT t.skip AND NOT t.poll AND (k.last IS NULL OR k.last = k.head) THEN coalesce($12::timestamptz, $14::timestamptz, $3::timestamptz) END,
				$3, $3, k.key, k.last, p.last, $14,
				CASE WHEN ` + startsAtOnce + ` THEN $16::timestamptz END,
				CASE WHEN ` + startsAtOnce + ` THEN coalesce(t.retry_policy, '{}'::jsonb) END
			FROM t CROSS JOIN e LEFT JOIN k ON k.subscription_id = t.id LEFT JOIN p ON p.subscription_id = t.id
			RETURNING lease_until, nullif(retry_policy, '{}'::jsonb), ` + deliveryColumns + `, ordering_key, sequence, poll_position
		)
		SELECT EXISTS (SELECT 1 FROM g), d.*, t.rate_limit, t.batch_max_size, t.batch_max_wait_ms, ` + leasedSubscriptionColumns + `
		FROM (SELECT 1) one LEFT JOIN d ON true LEFT JOIN t ON t.id = d.subscription_id
		LEFT JOIN subscriptions s ON s.id = d.subscription_id AND d.lease_until IS NOT NULL`

// startsAtOnce says, in createEventSQL's fan-out, whether a delivery's
// first attempt may start in the publishing process's pool at once, so
// that the write leases it: a lease asked for ($16), and the attempt due
// now (not skipped, not polled, not behind another of its ordering key,
// neither held nor scheduled), neither paced by a rate limit nor batched
// (deliver.runsNow, which the pool asks, is the same rule).
const startsAtOnce = `($16::timestamptz IS NOT NULL AND NOT t.skip AND NOT t.poll AND (k.last IS NULL OR k.last = k.head)
	AND $12::timestamptz IS NULL AND $14::timestamptz IS NULL
	AND coalesce(t.rate_limit, 0) = 0 AND (t.batch_max_size IS NULL OR t.batch_max_wait_ms IS NULL))`

// createEventArgs are createEventSQL's parameters for w and its commit
// group (nil: none).
func createEventArgs(w EventWrite, group []byte) []any {
	e, to := w.Event, w.To
	var leaseUntil *time.Time
	if !w.LeaseUntil.IsZero() {
		leaseUntil = &w.LeaseUntil
	}
	var heldUntil *time.Time
	if !to.HeldUntil.IsZero() {
		heldUntil = &to.HeldUntil
	}
	return []any{e.CreatedAt.UnixMilli(), e.ID, e.CreatedAt, e.Type, to.Test, e.MerchantID, to.SubscriptionID, e.APIVersion, e.Body, to.Matched,
		group, heldUntil, e.TraceParent, e.DeliverAt, to.Except, leaseUntil}
}

// scanCreatedEvent reads createEventSQL's rows: the deliveries created, and
// whether the event was written (false: its id was already stored).
func scanCreatedEvent(rows pgx.Rows, e Event) (EventWritten, error) {
	w := EventWritten{Event: e}
	var (
		c          createdDeliveryColumns
		leaseUntil *time.Time
		policy     *RetryPolicy
		sub        leasedSubscription
	)
	for rows.Next() {
		// Each row's values in pointers of their own.
		c, leaseUntil, policy, sub = createdDeliveryColumns{}, nil, nil, leasedSubscription{}
		targets := append(append([]any{&w.Created, &leaseUntil, &policy}, c.targets()...), sub.targets()...)
		if err := rows.Scan(targets...); err != nil {
			rows.Close()
			return EventWritten{}, err
		}
		d, ok := c.delivery()
		if !ok {
			continue
		}
		w.Deliveries = append(w.Deliveries, d)
		if leaseUntil != nil {
			w.lease(d, policy, *leaseUntil, &sub)
		}
	}
	return w, rows.Err()
}

// lease adds d, which the write leased until leaseUntil with its retry
// policy pinned, to w.Leased, with what its attempt needs of its event and
// of its subscription (sub, as scanned).
func (w *EventWritten) lease(d Delivery, policy *RetryPolicy, leaseUntil time.Time, sub *leasedSubscription) {
	d.RetryPolicy = policy
	l := LeasedDelivery{Delivery: d, Body: w.Event.Body, LeaseUntil: leaseUntil, TraceParent: w.Event.TraceParent}
	sub.fill(&l)
	if w.Leased == nil {
		w.Leased = make(map[uuid.UUID]LeasedDelivery)
	}
	w.Leased[d.ID] = l
}

// createdDeliveryColumns are the columns of one delivery a fan-out
// statement returns (createEventSQL, createFanOutsSQL): the delivery's and
// its subscription's rate limit and batch. Each may be NULL, on the empty
// side of the outer join that carries an event without deliveries.
type createdDeliveryColumns struct {
	id, eventID, subID              *uuid.UUID
	merchant, eventType, status     *string
	test                            *bool
	attempts                        *int
	eventAt, next, created, updated *time.Time
	orderingKey                     *string
	sequence, pollPosition          *int64
	rateLimit                       *int
	batch                           batchColumns
}

// targets are the scan targets of the columns, in the statements' order.
func (c *createdDeliveryColumns) targets() []any {
	return []any{&c.id, &c.merchant, &c.eventID, &c.eventAt, &c.eventType, &c.subID,
		&c.status, &c.test, &c.attempts, &c.next, &c.created, &c.updated, &c.orderingKey, &c.sequence, &c.pollPosition,
		&c.rateLimit, &c.batch.maxSize, &c.batch.maxWaitMS}
}

// delivery is the delivery scanned; false for the empty side of the join.
func (c *createdDeliveryColumns) delivery() (Delivery, bool) {
	if c.id == nil {
		return Delivery{}, false
	}
	return Delivery{ID: *c.id, MerchantID: *c.merchant, EventID: *c.eventID,
		EventCreatedAt: *c.eventAt, EventType: *c.eventType, SubscriptionID: *c.subID, Status: DeliveryStatus(*c.status), Test: *c.test,
		AttemptCount: *c.attempts, NextAttemptAt: c.next, CreatedAt: *c.created, UpdatedAt: *c.updated,
		OrderingKey: c.orderingKey, Sequence: c.sequence, RateLimit: deref(c.rateLimit), Batch: c.batch.value(),
		PollPosition: c.pollPosition}, true
}

// EventByID returns a stored event, whatever its merchant; callers that
// serve a merchant must compare MerchantID themselves.
func (s *Events) EventByID(ctx context.Context, id uuid.UUID) (Event, error) {
	var e Event
	// event_ids gives created_at, so that the events lookup prunes to one
	// partition.
	err := s.pool.QueryRow(ctx, `
		SELECT e.id, e.merchant_id, e.type, e.api_version, e.body, e.created_at, e.deliver_at
		FROM event_ids i JOIN events e ON e.id = i.id AND e.created_at = i.created_at
		WHERE i.id = $1`, id).
		Scan(&e.ID, &e.MerchantID, &e.Type, &e.APIVersion, &e.Body, &e.CreatedAt, &e.DeliverAt)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return Event{}, fmt.Errorf("event %s: %w", id, ErrNotFound)
		}
		return Event{}, fmt.Errorf("event %s: %w", id, err)
	}
	return e, nil
}
