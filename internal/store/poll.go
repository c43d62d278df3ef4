package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Poll subscriptions (destination {"type": "poll"}) are read, not dialled.
// Each has one line: the fan-out gives every delivery the next position of
// its subscription's poll_lines row under that row's lock, so positions
// commit in the order they are given, and a reader that sees position n
// sees every position below it. A read is the deliveries after a position;
// acknowledging up to a position ends every pending delivery at or below
// it as succeeded, with one attempt whose trigger is poll. poll_reads
// keeps what was acknowledged (acked: every position up to it) and when
// the line was last read, apart from poll_lines, so that readers and the
// fan-out never wait on each other's locks. Poll deliveries are pending
// with no due time: no attempt is ever parked for them and the sweeper,
// which looks only at due deliveries, never sees them.

// pollDestination is the destination type of poll subscriptions, as the
// subscription's destination summary names it (DestinationPoll).
const pollDestination = "poll"

// DestinationPoll is the destination type of a poll subscription.
const DestinationPoll = pollDestination

// TriggerPoll is the trigger of the attempt an acknowledged poll delivery
// records.
const TriggerPoll Trigger = "poll"

// Polls owns the lines of poll subscriptions: reading them, acknowledging
// what was read, and the state the subscription's reads show.
type Polls struct {
	db
}

// PolledDelivery is one delivery of a poll read, with its event's stored
// envelope.
type PolledDelivery struct {
	Delivery
	// Position is the delivery's place in its subscription's line.
	Position int64
	// Envelope is the event's stored envelope bytes.
	Envelope []byte
}

// PollFrom says where a read starts: after the position After, or, when
// Since is set, at the first delivery created at or after Since.
type PollFrom struct {
	After int64
	Since *time.Time
	// End is, for a read from Since, the line's end before it read
	// (PollLineEnd): an empty read's iterator.
	End int64
}

// PollState is what a poll subscription's read shows of its line.
type PollState struct {
	// Backlog counts the deliveries not acknowledged yet.
	Backlog int64
	// LastReadAt is the last read of the line; nil if never read.
	LastReadAt *time.Time
}

// ReadPoll returns up to limit deliveries of the poll subscription from
// from, in position order, with their envelopes. Deliveries older than the
// retention are not read.
func (p *Polls) ReadPoll(ctx context.Context, subscriptionID uuid.UUID, from PollFrom, limit int) ([]PolledDelivery, error) {
	oldest := p.retentionStart()
	if from.Since != nil {
		oldest = later(oldest, *from.Since)
	}
	rows, err := p.pool.Query(ctx, `
		SELECT `+qualified("d", deliveryColumns)+`, d.poll_position, e.body
		FROM deliveries d
		JOIN events e ON e.id = d.event_id AND e.created_at = d.event_created_at
		WHERE d.subscription_id = $1 AND d.poll_position IS NOT NULL AND d.poll_position > $2
		  AND d.created_at >= $3
		ORDER BY d.poll_position
		LIMIT $4`, subscriptionID, from.After, oldest, limit)
	if err != nil {
		return nil, fmt.Errorf("read poll line of %s: %w", subscriptionID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PolledDelivery, error) {
		var d PolledDelivery
		err := r.Scan(&d.ID, &d.MerchantID, &d.EventID, &d.EventCreatedAt, &d.EventType, &d.SubscriptionID,
			&d.Status, &d.Test, &d.AttemptCount, &d.NextAttemptAt, &d.CreatedAt, &d.UpdatedAt, &d.Position, &d.Envelope)
		d.PollPosition = &d.Position
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("read poll line of %s: %w", subscriptionID, err)
	}
	return out, nil
}

// PollAcknowledged is the position up to which the poll subscription's
// line is acknowledged: a read without an iterator starts after it.
func (p *Polls) PollAcknowledged(ctx context.Context, subscriptionID uuid.UUID) (int64, error) {
	var acked int64
	err := p.pool.QueryRow(ctx, `SELECT coalesce((SELECT acked FROM poll_reads WHERE subscription_id = $1), 0)`,
		subscriptionID).Scan(&acked)
	if err != nil {
		return 0, fmt.Errorf("acknowledged position of %s: %w", subscriptionID, err)
	}
	return acked, nil
}

// AcknowledgePoll ends every pending delivery of the poll subscription's
// line at or below upTo as succeeded, each with one attempt of trigger
// poll at now, and dates the line's last read now. It returns how many it
// ended. Acknowledging a position already acknowledged only dates the
// read: the same iterator read twice acknowledges nothing twice.
func (p *Polls) AcknowledgePoll(ctx context.Context, subscriptionID uuid.UUID, upTo int64, now time.Time) (int, error) {
	var ended int
	err := p.tx(ctx, func(tx pgx.Tx) error {
		// The read row's lock makes concurrent readers of one line take
		// turns, so that each range is acknowledged once.
		var acked int64
		if err := tx.QueryRow(ctx, `
			INSERT INTO poll_reads AS r (subscription_id, acked, read_at) VALUES ($1, 0, $2)
			ON CONFLICT (subscription_id) DO UPDATE SET read_at = $2
			RETURNING r.acked`, subscriptionID, now).Scan(&acked); err != nil {
			return err
		}
		if upTo <= acked {
			return nil
		}
		// Only the range (acked, upTo] is looked at: what is at or below
		// acked was ended by an earlier acknowledgement, so the statement
		// costs the page, never the line's history.
		err := tx.QueryRow(ctx, `
			WITH d AS (
				UPDATE deliveries d SET status = 'succeeded', attempt_count = d.attempt_count + 1,
					next_attempt_at = NULL, updated_at = $4
				WHERE d.subscription_id = $1 AND d.poll_position IS NOT NULL
				  AND d.poll_position > $2 AND d.poll_position <= $3 AND d.status = 'pending'
				RETURNING d.id, d.created_at, d.attempt_count, d.subscription_id, d.test
			), a AS (
				INSERT INTO attempts (delivery_id, delivery_created_at, number, status, trigger, duration_ms, response_body, attempted_at)
				SELECT id, created_at, attempt_count, 'succeeded', 'poll', 0, 'read by poll', $4 FROM d
				ON CONFLICT DO NOTHING RETURNING 1
			), s AS (
				INSERT INTO attempt_stats AS s (subscription_id, hour, slot, succeeded)
				SELECT $1, date_trunc('hour', $4::timestamptz, 'UTC'), attempt_duration_slot(NULL, 0), count(*)
				FROM d WHERE NOT d.test HAVING count(*) > 0
				ON CONFLICT (subscription_id, hour, slot) DO UPDATE SET succeeded = s.succeeded + excluded.succeeded
				RETURNING 1
			), r AS (
				UPDATE poll_reads SET acked = $3 WHERE subscription_id = $1 RETURNING 1
			)
			SELECT (SELECT count(*) FROM a)::int, (SELECT count(*) FROM s), (SELECT count(*) FROM r)`,
			subscriptionID, acked, upTo, now).Scan(&ended, new(int64), new(int64))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("acknowledge poll line of %s up to %d: %w", subscriptionID, upTo, err)
	}
	return ended, nil
}

// MarkPollRead dates the poll subscription's last read now, for a read
// that acknowledges nothing.
func (p *Polls) MarkPollRead(ctx context.Context, subscriptionID uuid.UUID, now time.Time) error {
	if _, err := p.pool.Exec(ctx, `
		INSERT INTO poll_reads (subscription_id, acked, read_at) VALUES ($1, 0, $2)
		ON CONFLICT (subscription_id) DO UPDATE SET read_at = $2`, subscriptionID, now); err != nil {
		return fmt.Errorf("date read of poll line %s: %w", subscriptionID, err)
	}
	return nil
}

// PollStates returns the line state of each of the given poll
// subscriptions: its backlog (deliveries after the acknowledged position,
// within the retention) and its last read.
func (p *Polls) PollStates(ctx context.Context, subscriptionIDs []uuid.UUID) (map[uuid.UUID]PollState, error) {
	out := make(map[uuid.UUID]PollState, len(subscriptionIDs))
	if len(subscriptionIDs) == 0 {
		return out, nil
	}
	rows, err := p.pool.Query(ctx, `
		SELECT s.id, r.read_at, (SELECT count(*) FROM deliveries d
			WHERE d.subscription_id = s.id AND d.poll_position IS NOT NULL
			  AND d.poll_position > coalesce(r.acked, 0) AND d.status = 'pending' AND d.created_at >= $2)
		FROM unnest($1::uuid[]) AS s(id) LEFT JOIN poll_reads r ON r.subscription_id = s.id`,
		subscriptionIDs, p.retentionStart())
	if err != nil {
		return nil, fmt.Errorf("poll states of %d subscriptions: %w", len(subscriptionIDs), err)
	}
	defer rows.Close()
	for rows.Next() {
		var id uuid.UUID
		var st PollState
		if err := rows.Scan(&id, &st.LastReadAt, &st.Backlog); err != nil {
			return nil, fmt.Errorf("poll states: %w", err)
		}
		out[id] = st
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("poll states: %w", err)
	}
	return out, nil
}

// PollLineEnd is the position the poll subscription's line has reached:
// the newest delivery's, 0 before the first.
func (p *Polls) PollLineEnd(ctx context.Context, subscriptionID uuid.UUID) (int64, error) {
	var last int64
	err := p.pool.QueryRow(ctx, `SELECT coalesce((SELECT last FROM poll_lines WHERE subscription_id = $1), 0)`,
		subscriptionID).Scan(&last)
	if err != nil {
		return 0, fmt.Errorf("end of poll line %s: %w", subscriptionID, err)
	}
	return last, nil
}
