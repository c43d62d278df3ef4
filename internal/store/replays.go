package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrReplayRunning refuses a replay while another of the merchant's runs:
// one at a time per merchant. It wraps ErrConflict.
var ErrReplayRunning = fmt.Errorf("a replay of this merchant is running: %w", ErrConflict)

// Replays owns bulk replays (POST /v1/webhook_deliveries/replay): the
// replay rows, the deliveries each has requested, the page after its
// cursor, and the settling of its counts from the attempts made.
type Replays struct {
	db
}

// The values a replay's status filter takes.
const (
	// HTTPClass4xx selects deliveries whose last attempt was answered 4xx.
	HTTPClass4xx = "4xx"
	// HTTPClass5xx selects deliveries whose last attempt was answered 5xx.
	HTTPClass5xx = "5xx"
	// HTTPClassNone selects deliveries whose last attempt had no HTTP
	// answer (a network error, a timeout).
	HTTPClassNone = "none"
)

// ReplayFilter selects the deliveries of a replay. Every field has been
// checked against its allow-list by the caller; the store refuses any
// other value of Status and HTTPStatusClass rather than build SQL from it.
type ReplayFilter struct {
	// Since and Until bound created_at: since <= created_at < until.
	Since, Until time.Time
	// SubscriptionID, when set, is the one subscription.
	SubscriptionID *uuid.UUID
	// EventType, when set, is the one event type.
	EventType string
	// Status, when set, is failed, skipped or succeeded.
	Status DeliveryStatus
	// HTTPStatusClass, when set, is 4xx, 5xx or none, of the last attempt.
	HTTPStatusClass string
}

// Replay is one bulk replay and its progress.
type Replay struct {
	ID         uuid.UUID
	MerchantID string
	Filter     ReplayFilter
	// Matched is how many deliveries the filters selected when the replay
	// was asked for.
	Matched int
	// Requested is how many manual attempts the replay has asked for so
	// far; Attempted how many of them were made, Succeeded and Failed
	// their outcomes.
	Requested, Attempted, Succeeded, Failed int
	// Cursor is the last delivery the replay passed (nil before the first
	// page); Paged is whether it reached Until.
	Cursor *Cursor
	Paged  bool
	// CreatedAt, UpdatedAt and CompletedAt (nil while it runs).
	CreatedAt, UpdatedAt time.Time
	CompletedAt          *time.Time
}

const replayColumns = `id, merchant_id, since, until, subscription_id, coalesce(event_type, ''), coalesce(status, ''),
	coalesce(http_status_class, ''), matched, requested, attempted, succeeded, failed, cursor_created_at, cursor_id,
	paged, created_at, updated_at, completed_at`

func scanReplay(row pgx.CollectableRow) (Replay, error) {
	var r Replay
	var status string
	var cursorAt *time.Time
	var cursorID *uuid.UUID
	err := row.Scan(&r.ID, &r.MerchantID, &r.Filter.Since, &r.Filter.Until, &r.Filter.SubscriptionID, &r.Filter.EventType,
		&status, &r.Filter.HTTPStatusClass, &r.Matched, &r.Requested, &r.Attempted, &r.Succeeded, &r.Failed,
		&cursorAt, &cursorID, &r.Paged, &r.CreatedAt, &r.UpdatedAt, &r.CompletedAt)
	r.Filter.Status = DeliveryStatus(status)
	if cursorAt != nil && cursorID != nil {
		r.Cursor = &Cursor{CreatedAt: *cursorAt, ID: cursorID.String()}
	}
	return r, err
}

// replayScan is the part of a replay's query that an index serves: the
// merchant's deliveries of the window (and of the status and
// subscription, when asked), after the cursor, in (created_at, id) order.
// The status is written into the statement from a fixed list, never from
// the caller's value: with generic plans, only a literal lets Postgres
// use the partial index of unsucceeded deliveries.
func replayScan(f ReplayFilter) (string, error) {
	where := `d.merchant_id = $1 AND d.created_at >= $2 AND d.created_at < $3
		AND (d.created_at, d.id) > ($4::timestamptz, $5::uuid)`
	switch f.Status {
	case "":
	case DeliveryFailed:
		where += ` AND d.status = 'failed'`
	case DeliverySkipped:
		where += ` AND d.status = 'skipped'`
	case DeliverySucceeded:
		where += ` AND d.status = 'succeeded'`
	default:
		return "", fmt.Errorf("replay status filter %q: not failed, skipped or succeeded", f.Status)
	}
	if f.SubscriptionID != nil {
		where += ` AND d.subscription_id = $6`
	}
	return where, nil
}

// replayMatch is the rest of the filters, judged on each scanned
// delivery: a real (non-test) delivery of the event type, to an enabled
// HTTP endpoint (nothing could be sent to a disabled, deleted, listening
// or poll subscription), whose last attempt's answer is of the class.
func replayMatch(f ReplayFilter) (string, error) {
	match := `NOT d.test AND ($7::text = '' OR d.event_type = $7)
		AND EXISTS (SELECT 1 FROM subscriptions s WHERE s.id = d.subscription_id AND s.merchant_id = d.merchant_id
			AND s.status = 'enabled' AND s.deleted_at IS NULL AND s.kind = 'endpoint'
			AND coalesce(s.destination->>'type', '') <> 'poll')`
	last := `(SELECT a.http_status FROM attempts a WHERE a.delivery_id = d.id AND a.delivery_created_at = d.created_at
		AND a.number = d.attempt_count)`
	switch f.HTTPStatusClass {
	case "":
	case HTTPClass4xx:
		match += ` AND ` + last + ` BETWEEN 400 AND 499`
	case HTTPClass5xx:
		match += ` AND ` + last + ` BETWEEN 500 AND 599`
	case HTTPClassNone:
		match += ` AND d.attempt_count > 0 AND EXISTS (SELECT 1 FROM attempts a WHERE a.delivery_id = d.id
			AND a.delivery_created_at = d.created_at AND a.number = d.attempt_count AND a.http_status IS NULL)`
	default:
		return "", fmt.Errorf("replay http_status_class filter %q: not 4xx, 5xx or none", f.HTTPStatusClass)
	}
	return match, nil
}

// replayArgs are the parameters of replayScan and replayMatch, the
// cursor (nil: from the window's start) included.
func replayArgs(merchantID string, f ReplayFilter, c *Cursor) ([]any, error) {
	after, afterID := f.Since.Add(-time.Microsecond), uuid.Max
	if c != nil {
		id, err := uuid.Parse(c.ID)
		if err != nil {
			return nil, fmt.Errorf("replay cursor: %w", err)
		}
		after, afterID = c.CreatedAt, id
	}
	var sub *uuid.UUID
	if f.SubscriptionID != nil {
		sub = f.SubscriptionID
	}
	return []any{merchantID, f.Since, f.Until, after, afterID, sub, f.EventType}, nil
}

// CountReplayable counts the merchant's deliveries that f selects, up to
// limit+1 (more than limit is all the caller needs to know): the count a
// merchant is shown before confirming a replay, and the replay's matched.
func (s *Replays) CountReplayable(ctx context.Context, merchantID string, f ReplayFilter, limit int) (int, error) {
	scan, err := replayScan(f)
	if err != nil {
		return 0, err
	}
	match, err := replayMatch(f)
	if err != nil {
		return 0, err
	}
	args, err := replayArgs(merchantID, f, nil)
	if err != nil {
		return 0, err
	}
	if f.SubscriptionID == nil {
		scan += ` AND $6::uuid IS NULL`
	}
	var n int
	err = s.pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM deliveries d WHERE `+scan+` AND `+match+` LIMIT $8) m`,
		append(args, limit+1)...).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count replayable deliveries: %w", err)
	}
	return n, nil
}

// CreateReplay records a replay of the merchant's deliveries that f
// selects, matched of them by CountReplayable, made at now. A replay that
// matches none is complete at once. ErrReplayRunning: one of the
// merchant's replays is not complete.
func (s *Replays) CreateReplay(ctx context.Context, merchantID string, f ReplayFilter, matched int, now time.Time) (Replay, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return Replay{}, err
	}
	var completed *time.Time
	if matched == 0 {
		completed = &now
	}
	rows, err := s.pool.Query(ctx, `
		INSERT INTO replays (id, merchant_id, since, until, subscription_id, event_type, status, http_status_class,
			matched, paged, created_at, updated_at, completed_at)
		VALUES ($1, $2, $3, $4, $5, nullif($6, ''), nullif($7, ''), nullif($8, ''), $9, $10::timestamptz IS NOT NULL, $11, $11, $10)
		RETURNING `+replayColumns,
		id, merchantID, f.Since, f.Until, f.SubscriptionID, f.EventType, string(f.Status), f.HTTPStatusClass,
		matched, completed, now)
	var r Replay
	if err == nil {
		// The refusal comes here, or already from Query under the
		// simple protocol (through PgBouncer).
		r, err = pgx.CollectExactlyOneRow(rows, scanReplay)
	}
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "23505" {
		return Replay{}, fmt.Errorf("create replay: %w", ErrReplayRunning)
	}
	if err != nil {
		return Replay{}, fmt.Errorf("create replay: %w", err)
	}
	return r, nil
}

// GetReplay reads one of the merchant's replays.
func (s *Replays) GetReplay(ctx context.Context, merchantID string, id uuid.UUID) (Replay, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+replayColumns+` FROM replays WHERE id = $1 AND merchant_id = $2`, id, merchantID)
	if err != nil {
		return Replay{}, fmt.Errorf("read replay %s: %w", id, err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, scanReplay)
	if err != nil {
		return Replay{}, fmt.Errorf("read replay %s: %w", id, notFound(err))
	}
	return r, nil
}

// RunningReplays lists the replays not yet complete, the one moved on
// least recently first, at most limit: the work of the replay job, which
// thus comes to every replay in turn even when a round cannot finish.
func (s *Replays) RunningReplays(ctx context.Context, limit int) ([]Replay, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+replayColumns+` FROM replays WHERE completed_at IS NULL
		ORDER BY updated_at LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("list running replays: %w", err)
	}
	rs, err := pgx.CollectRows(rows, scanReplay)
	if err != nil {
		return nil, fmt.Errorf("list running replays: %w", err)
	}
	return rs, nil
}

// ReplayPage is the next step of a replay's walk through its window.
type ReplayPage struct {
	// Deliveries are the ones to request, in (created_at, id) order.
	Deliveries []Delivery
	// Cursor is the last delivery passed (requested or not); nil when
	// the page passed none.
	Cursor *Cursor
	// Paged is true when the walk reached the window's end.
	Paged bool
}

// NextReplayPage reads the deliveries after r's cursor: at most scan of
// the window's deliveries are looked at (a bounded read, however few
// match), and at most room of the matching ones are taken; the cursor
// stops at the last one taken when room runs out.
func (s *Replays) NextReplayPage(ctx context.Context, r Replay, room, scan int) (ReplayPage, error) {
	where, err := replayScan(r.Filter)
	if err != nil {
		return ReplayPage{}, err
	}
	match, err := replayMatch(r.Filter)
	if err != nil {
		return ReplayPage{}, err
	}
	args, err := replayArgs(r.MerchantID, r.Filter, r.Cursor)
	if err != nil {
		return ReplayPage{}, err
	}
	if r.Filter.SubscriptionID == nil {
		where += ` AND $6::uuid IS NULL`
	}
	rows, err := s.pool.Query(ctx, `SELECT `+deliveryColumns+`, coalesce(`+match+`, false) FROM deliveries d WHERE `+where+`
		ORDER BY d.created_at, d.id LIMIT $8`, append(args, scan)...)
	if err != nil {
		return ReplayPage{}, fmt.Errorf("page replay %s: %w", r.ID, err)
	}
	type candidate struct {
		Delivery
		match bool
	}
	cs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (candidate, error) {
		var c candidate
		err := row.Scan(append(deliveryTargets(&c.Delivery), &c.match)...)
		return c, err
	})
	if err != nil {
		return ReplayPage{}, fmt.Errorf("page replay %s: %w", r.ID, err)
	}
	var p ReplayPage
	for _, c := range cs {
		if len(p.Deliveries) == room {
			return p, nil // full: the cursor stays on the last one taken
		}
		if c.match {
			p.Deliveries = append(p.Deliveries, c.Delivery)
		}
		p.Cursor = &Cursor{CreatedAt: c.CreatedAt, ID: c.ID.String()}
	}
	p.Paged = len(cs) < scan
	return p, nil
}

// RequestReplayPage asks for one manual attempt of each of p's deliveries
// on behalf of replay r, and moves r's cursor to p's, in one transaction:
// a page is requested wholly or not at all, and each delivery at most
// once per replay, whatever restarts. The caller enqueues the attempts
// after (the sweeper enqueues again any it loses). ErrConflict: r's
// cursor moved since it was read (another instance took the page).
func (s *Replays) RequestReplayPage(ctx context.Context, r Replay, p ReplayPage, now time.Time) error {
	var oldAt *time.Time
	var oldID *uuid.UUID
	if r.Cursor != nil {
		id, err := uuid.Parse(r.Cursor.ID)
		if err != nil {
			return fmt.Errorf("replay cursor: %w", err)
		}
		oldAt, oldID = &r.Cursor.CreatedAt, &id
	}
	newAt, newID := oldAt, oldID
	if p.Cursor != nil {
		id, err := uuid.Parse(p.Cursor.ID)
		if err != nil {
			return fmt.Errorf("replay cursor: %w", err)
		}
		newAt, newID = &p.Cursor.CreatedAt, &id
	}
	ids := make([]uuid.UUID, len(p.Deliveries))
	created := make([]time.Time, len(p.Deliveries))
	after := make([]int32, len(p.Deliveries))
	for i, d := range p.Deliveries {
		ids[i], created[i], after[i] = d.ID, d.CreatedAt, int32(d.AttemptCount)
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE replays SET cursor_created_at = $2, cursor_id = $3, paged = $4,
				requested = requested + $5, updated_at = $6
			WHERE id = $1 AND completed_at IS NULL AND NOT paged
			  AND cursor_created_at IS NOT DISTINCT FROM $7 AND cursor_id IS NOT DISTINCT FROM $8`,
			r.ID, newAt, newID, p.Paged, len(ids), now, oldAt, oldID)
		if err != nil {
			return fmt.Errorf("move replay %s: %w", r.ID, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("move replay %s: its cursor moved: %w", r.ID, ErrConflict)
		}
		if len(ids) == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, `INSERT INTO replay_items (replay_id, delivery_id, delivery_created_at, after_number, requested_at)
			SELECT $1, id, created_at, after, $5 FROM unnest($2::uuid[], $3::timestamptz[], $4::int[]) AS t(id, created_at, after)`,
			r.ID, ids, created, after, now); err != nil {
			return fmt.Errorf("record replay %s's deliveries: %w", r.ID, err)
		}
		if _, err := tx.Exec(ctx, `
			UPDATE deliveries d SET manual_requested = manual_requested + 1, manual_requested_at = $4
			FROM unnest($2::uuid[], $3::timestamptz[]) AS t(id, created_at)
			WHERE d.id = t.id AND d.created_at = t.created_at AND d.merchant_id = $1`,
			r.MerchantID, ids, created, now); err != nil {
			return fmt.Errorf("request replay %s's attempts: %w", r.ID, err)
		}
		return nil
	})
}

// OpenReplayItems is how many of r's requested attempts are not settled
// yet (settled: made, or dropped).
func (s *Replays) OpenReplayItems(ctx context.Context, id uuid.UUID) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM replay_items WHERE replay_id = $1 AND outcome IS NULL`,
		id).Scan(&n); err != nil {
		return 0, fmt.Errorf("count replay %s's open attempts: %w", id, err)
	}
	return n, nil
}

// SettleReplay finds the attempts made for the replay's open requests and
// adds them to its counts, at now. The replay's attempt of a delivery is
// its first manual attempt numbered above the delivery's count when it
// was requested; a request no attempt will answer (the delivery's manual
// requests all served, its subscription disabled or deleted since, the
// delivery past retention) is dropped, counted nowhere. A paged replay
// with nothing left open is complete. It returns the replay as it is
// after.
func (s *Replays) SettleReplay(ctx context.Context, id uuid.UUID, now time.Time) (Replay, error) {
	rows, err := s.pool.Query(ctx, `
		WITH open AS (
			SELECT delivery_id, delivery_created_at, after_number FROM replay_items
			WHERE replay_id = $1 AND outcome IS NULL
		), made AS (
			SELECT o.delivery_id, a.number, CASE WHEN a.status = 'succeeded' THEN 'succeeded' ELSE 'failed' END AS outcome
			FROM open o CROSS JOIN LATERAL (
				SELECT number, status FROM attempts a
				WHERE a.delivery_id = o.delivery_id AND a.delivery_created_at = o.delivery_created_at
				  AND a.number > o.after_number AND a.trigger = 'manual'
				ORDER BY a.number LIMIT 1) a
		), gone AS (
			SELECT o.delivery_id FROM open o
			LEFT JOIN deliveries d ON d.id = o.delivery_id AND d.created_at = o.delivery_created_at
			LEFT JOIN subscriptions s ON s.id = d.subscription_id
			WHERE (d.id IS NULL OR d.manual_requested = 0 OR s.status <> 'enabled' OR s.deleted_at IS NOT NULL)
			  AND o.delivery_id NOT IN (SELECT delivery_id FROM made)
		), settled AS (
			UPDATE replay_items ri SET attempt_number = x.number, outcome = x.outcome
			FROM (SELECT delivery_id, number, outcome FROM made
			      UNION ALL SELECT delivery_id, NULL::int, 'dropped' FROM gone) x
			WHERE ri.replay_id = $1 AND ri.delivery_id = x.delivery_id AND ri.outcome IS NULL
			RETURNING ri.outcome
		)
		UPDATE replays r SET
			attempted = attempted + (SELECT count(*) FROM settled WHERE outcome <> 'dropped'),
			succeeded = succeeded + (SELECT count(*) FROM settled WHERE outcome = 'succeeded'),
			failed = failed + (SELECT count(*) FROM settled WHERE outcome = 'failed'),
			updated_at = $2,
			completed_at = CASE WHEN r.paged AND (SELECT count(*) FROM open) = (SELECT count(*) FROM settled)
				THEN $2::timestamptz END
		WHERE r.id = $1 AND r.completed_at IS NULL
		RETURNING `+replayColumns, id, now)
	if err != nil {
		return Replay{}, fmt.Errorf("settle replay %s: %w", id, err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, scanReplay)
	if err != nil {
		return Replay{}, fmt.Errorf("settle replay %s: %w", id, notFound(err))
	}
	return r, nil
}

// DeleteReplaysBefore deletes at most limit complete replays made before
// before, with their requests (their deliveries are gone by then), and
// says how many.
func (s *Replays) DeleteReplaysBefore(ctx context.Context, before time.Time, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM replays WHERE id IN (
		SELECT id FROM replays WHERE created_at < $1 AND completed_at IS NOT NULL ORDER BY created_at LIMIT $2)`, before, limit)
	if err != nil {
		return 0, fmt.Errorf("delete old replays: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
