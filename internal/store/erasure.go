package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Erasures owns the erasure of an event's content on a data subject's
// request (docs/erasure.md): the event's payload, the bodies its attempts
// sent and received, and its deliveries still waiting, all in one
// transaction, with its audit entry.
type Erasures struct {
	db
}

// DeliveryErased is the status of a delivery that was still waiting
// (pending, skipped or otherwise not ended) when its event was erased: it
// is never attempted.
const DeliveryErased DeliveryStatus = "erased"

// Erasure is what erasing an event did. Erasing again changes nothing and
// returns the first erasure's record.
type Erasure struct {
	EventID    uuid.UUID
	MerchantID string
	ErasedAt   time.Time
	// Deliveries counts the event's deliveries; DeliveriesEnded those of
	// them that were still waiting and ended as erased.
	Deliveries      int
	DeliveriesEnded int
	// Attempts counts the attempts whose bodies were replaced.
	Attempts int
}

// Tombstone is what stands in for erased content: the payload of an erased
// event's envelope, and every erased request or response body.
func Tombstone(at time.Time) []byte {
	b, _ := json.Marshal(struct {
		Erased   bool   `json:"erased"`
		ErasedAt string `json:"erased_at"`
	}{true, at.UTC().Format(time.RFC3339)})
	return b
}

// EraseRequest names the event to erase and who asks.
type EraseRequest struct {
	EventID uuid.UUID
	// MerchantID, when set, must be the event's merchant: another
	// merchant's event is ErrNotFound.
	MerchantID string
	// Actor is who asked, for the audit entry.
	Actor string
}

// EraseEvent replaces the content of the event with a tombstone, in one
// transaction: the payload in its stored envelope (which every read and
// any later send then shows), the request and response bodies of every
// attempt of its deliveries (and the headers of those a transformation
// made, which may carry payload values), the ordering key values its
// deliveries carry, and it ends every delivery of it not yet ended as
// erased (a task of it still in Redis then finds nothing to lease). It
// records the erasure and an audit entry. An event already erased is left
// as it is and its first erasure returned (same counts, same ErasedAt).
// An unknown event, or one of another merchant than req.MerchantID, is
// ErrNotFound.
func (s *Erasures) EraseEvent(ctx context.Context, req EraseRequest) (Erasure, error) {
	var out Erasure
	err := s.txRetryingDeadlocks(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = eraseEvent(ctx, tx, req, s.Now())
		return err
	})
	if err != nil {
		return Erasure{}, fmt.Errorf("erase event %s: %w", req.EventID, err)
	}
	return out, nil
}

// eraseEvent is EraseEvent's transaction. The deliveries are updated
// before the attempts: an attempt being recorded holds its delivery's row,
// so the erasure waits for that record to commit and its attempts
// statement (a new snapshot) then sees the new attempt; a record that
// comes after finds the delivery erased and writes nothing (recordAttempts).
func eraseEvent(ctx context.Context, tx pgx.Tx, req EraseRequest, now time.Time) (Erasure, error) {
	var e Event
	err := tx.QueryRow(ctx, `
		SELECT e.id, e.merchant_id, e.type, e.api_version, e.body, e.created_at
		FROM event_ids i JOIN events e ON e.id = i.id AND e.created_at = i.created_at
		WHERE i.id = $1 FOR UPDATE OF e`, req.EventID).
		Scan(&e.ID, &e.MerchantID, &e.Type, &e.APIVersion, &e.Body, &e.CreatedAt)
	if err != nil {
		return Erasure{}, notFound(err)
	}
	if req.MerchantID != "" && req.MerchantID != e.MerchantID {
		return Erasure{}, ErrNotFound
	}
	prior, err := readErasure(ctx, tx, e.ID)
	if err == nil {
		return prior, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return Erasure{}, err
	}
	out := Erasure{EventID: e.ID, MerchantID: e.MerchantID, ErasedAt: now}
	body, err := tombstoneEnvelope(e, now)
	if err != nil {
		return Erasure{}, err
	}
	if _, err := tx.Exec(ctx, `UPDATE events SET body = $3 WHERE id = $1 AND created_at = $2`, e.ID, e.CreatedAt, body); err != nil {
		return Erasure{}, err
	}
	ended, err := endErasedDeliveries(ctx, tx, e, now)
	if err != nil {
		return Erasure{}, err
	}
	out.DeliveriesEnded = len(ended)
	if _, err := advanceLines(ctx, tx, orderedOnly(ended), now); err != nil {
		return Erasure{}, err
	}
	// The ordering lines of its key values (payload values) go too when
	// nothing waits in them any more; a line still busy with other events'
	// deliveries keeps its row, which those events name as well. A later
	// event of the same value starts the line afresh.
	if _, err := tx.Exec(ctx, `
		DELETE FROM ordering_keys k USING (
			SELECT DISTINCT subscription_id, ordering_key FROM deliveries
			WHERE event_id = $1 AND created_at >= $2 AND ordering_key IS NOT NULL) d
		WHERE k.subscription_id = d.subscription_id AND k.key = d.ordering_key AND k.head > k.last`, e.ID, e.CreatedAt); err != nil {
		return Erasure{}, err
	}
	// Every delivery of the event: its ordering value goes, and no manual
	// attempt asked for before is made.
	tag, err := tx.Exec(ctx, `
		UPDATE deliveries SET ordering_key = NULL, manual_requested = 0, manual_requested_at = NULL
		WHERE event_id = $1 AND created_at >= $2`, e.ID, e.CreatedAt)
	if err != nil {
		return Erasure{}, err
	}
	out.Deliveries = int(tag.RowsAffected())
	stone := string(Tombstone(now))
	tag, err = tx.Exec(ctx, `
		UPDATE attempts a SET response_body = $3,
			request_body = CASE WHEN a.request_body IS NULL THEN NULL ELSE $3 END,
			request_headers = CASE WHEN a.transformation_version IS NULL THEN a.request_headers END
		FROM deliveries d
		WHERE d.event_id = $1 AND d.created_at >= $2
		  AND a.delivery_id = d.id AND a.delivery_created_at = d.created_at`, e.ID, e.CreatedAt, stone)
	if err != nil {
		return Erasure{}, err
	}
	out.Attempts = int(tag.RowsAffected())
	if _, err := tx.Exec(ctx, `
		INSERT INTO erasures (event_id, merchant_id, erased_at, deliveries, deliveries_ended, attempts)
		VALUES ($1, $2, $3, $4, $5, $6)`,
		out.EventID, out.MerchantID, out.ErasedAt, out.Deliveries, out.DeliveriesEnded, out.Attempts); err != nil {
		return Erasure{}, err
	}
	err = insertAudit(ctx, tx, AuditEntry{MerchantID: e.MerchantID, Actor: req.Actor, Action: AuditEventErased,
		Target: e.ID.String(), Details: map[string]any{"deliveries": out.Deliveries,
			"deliveries_ended": out.DeliveriesEnded, "attempts": out.Attempts}, CreatedAt: now})
	return out, err
}

// rowReader is a pool or a transaction, for a read of one row.
type rowReader interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// readErasure is the event's erasure already recorded (pgx.ErrNoRows:
// none).
func readErasure(ctx context.Context, q rowReader, eventID uuid.UUID) (Erasure, error) {
	var p Erasure
	err := q.QueryRow(ctx, `
		SELECT event_id, merchant_id, erased_at, deliveries, deliveries_ended, attempts
		FROM erasures WHERE event_id = $1`, eventID).
		Scan(&p.EventID, &p.MerchantID, &p.ErasedAt, &p.Deliveries, &p.DeliveriesEnded, &p.Attempts)
	return p, err
}

// endErasedDeliveries ends, as erased, the event's deliveries not yet
// ended (pending, skipped, or any waiting status but succeeded and failed),
// and returns them with their ordering line.
func endErasedDeliveries(ctx context.Context, tx pgx.Tx, e Event, now time.Time) ([]Delivery, error) {
	rows, err := tx.Query(ctx, `
		UPDATE deliveries SET status = 'erased', next_attempt_at = NULL, lease_until = NULL, updated_at = $3
		WHERE event_id = $1 AND created_at >= $2 AND status NOT IN ('succeeded', 'failed', 'erased')
		RETURNING `+deliveryColumns+`, ordering_key, sequence`, e.ID, e.CreatedAt, now)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Delivery, error) {
		var d Delivery
		err := row.Scan(&d.ID, &d.MerchantID, &d.EventID, &d.EventCreatedAt, &d.EventType, &d.SubscriptionID,
			&d.Status, &d.Test, &d.AttemptCount, &d.NextAttemptAt, &d.CreatedAt, &d.UpdatedAt, &d.OrderingKey, &d.Sequence)
		return d, err
	})
}

// orderedOnly keeps the deliveries that hold a place in an ordering line.
func orderedOnly(ds []Delivery) []Delivery {
	var out []Delivery
	for _, d := range ds {
		if d.OrderingKey != nil && d.Sequence != nil {
			out = append(out, d)
		}
	}
	return out
}

// tombstoneEnvelope is e's envelope with the tombstone for payload: the
// same members in the same order (id, type, api_version, payload, date),
// so that reads keep showing the event's id, type and date.
func tombstoneEnvelope(e Event, at time.Time) ([]byte, error) {
	var old struct {
		Date json.RawMessage `json:"date"`
	}
	_ = json.Unmarshal(e.Body, &old) // webhookd wrote it; without a date, created_at stands in
	date := old.Date
	if len(date) == 0 {
		date, _ = json.Marshal(e.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(struct {
		ID         uuid.UUID       `json:"id"`
		Type       string          `json:"type"`
		APIVersion string          `json:"api_version"`
		Payload    json.RawMessage `json:"payload"`
		Date       json.RawMessage `json:"date"`
	}{e.ID, e.Type, e.APIVersion, Tombstone(at), date})
	if err != nil {
		return nil, fmt.Errorf("tombstone envelope: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// ErasureOf returns the event's erasure; ErrNotFound when it was never
// erased.
func (s *Erasures) ErasureOf(ctx context.Context, eventID uuid.UUID) (Erasure, error) {
	p, err := readErasure(ctx, s.pool, eventID)
	if err != nil {
		return Erasure{}, fmt.Errorf("erasure of %s: %w", eventID, notFound(err))
	}
	return p, nil
}
