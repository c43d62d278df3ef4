package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Listeners owns the subscriptions of kind listener that `webhookd listen`
// holds: their creation under the merchant's cap, their binding to the key
// that opened them, their heartbeats and their end.
type Listeners struct {
	db
}

// SubscriptionKind says how a subscription's deliveries travel.
type SubscriptionKind string

// Subscription kinds.
const (
	// KindEndpoint is a subscription with a URL that workers dial.
	KindEndpoint SubscriptionKind = "endpoint"
	// KindListener is a subscription held by `webhookd listen`: its
	// deliveries are relayed down the command's WebSocket, never dialled.
	KindListener SubscriptionKind = "listener"
)

// ListenerURLPrefix starts the url column of a listener. It is no URL a
// sender accepts (neither http nor https), so that a listener's delivery
// that reached the dialling path by mistake would be refused, not dialled.
const ListenerURLPrefix = "listener:"

// ErrListenerLimit reports a listener refused because the merchant already
// holds NewListener.Limit live listeners.
var ErrListenerLimit = errors.New("listener limit reached")

// NewListener is a listener subscription as `webhookd listen` asks for it.
type NewListener struct {
	MerchantID string
	// Events is the checked events list (["*"] for every type).
	Events []string
	// ExpiresAt is when the listener ends unless a heartbeat pushes it on.
	ExpiresAt time.Time
	// Limit, when positive, is how many live listeners the merchant may
	// hold at once.
	Limit int
}

// Listener is a listener subscription and when it ends.
type Listener struct {
	Subscription
	ExpiresAt time.Time
	// APIKeyID is the key that opened the listener (BindListener), which
	// it ends with; uuid.Nil until bound.
	APIKeyID uuid.UUID
}

// listenerColumns are the columns scanListener reads, in its order.
const listenerColumns = subscriptionColumns + `, expires_at, api_key_id`

// CreateListener stores an enabled listener subscription and its signing
// secret, already sealed, in one transaction. Listeners never count
// against the merchant's cap of subscriptions (see checkSubscriptionLimit).
func (s *Listeners) CreateListener(ctx context.Context, n NewListener, sealedSecret []byte) (Listener, error) {
	now := s.Now()
	id, err := uuid.NewV7()
	if err != nil {
		return Listener{}, fmt.Errorf("create listener: %w", err)
	}
	var l Listener
	err = s.tx(ctx, func(tx pgx.Tx) error {
		if n.Limit > 0 {
			// The same lock as a subscription create: a merchant's creates
			// count each other's rows one at a time.
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, lockSubscriptionCreate, n.MerchantID); err != nil {
				return err
			}
			var held int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM subscriptions
				WHERE merchant_id = $1 AND deleted_at IS NULL AND kind = 'listener' AND expires_at > $2`,
				n.MerchantID, now).Scan(&held); err != nil {
				return err
			}
			if held >= n.Limit {
				return ErrListenerLimit
			}
		}
		row := tx.QueryRow(ctx, `
			INSERT INTO subscriptions (id, merchant_id, url, events, description, status, metadata, created_at, updated_at, kind, expires_at)
			VALUES ($1, $2, $3, $4, NULL, $5, '{}', $6, $6, 'listener', $7)
			RETURNING `+listenerColumns,
			id, n.MerchantID, ListenerURLPrefix+id.String(), n.Events, SubscriptionEnabled, now, n.ExpiresAt)
		var err error
		l, err = scanListener(row)
		if err != nil {
			return err
		}
		return insertSecret(ctx, tx, id, sealedSecret, now)
	})
	if err != nil {
		return Listener{}, fmt.Errorf("create listener for %s: %w", n.MerchantID, err)
	}
	return l, nil
}

func scanListener(row pgx.Row) (Listener, error) {
	var l Listener
	var keyID *uuid.UUID
	r := subscriptionRow{s: &l.Subscription}
	err := row.Scan(append(r.targets(), &l.ExpiresAt, &keyID)...)
	r.finish()
	if keyID != nil {
		l.APIKeyID = *keyID
	}
	return l, err
}

// GetListener returns one of the merchant's listeners that has not ended
// and whose expiry is after now. Another merchant's, an ended or an expired
// one is ErrNotFound: a command that reconnects too late gets a new one.
func (s *Listeners) GetListener(ctx context.Context, merchantID string, id uuid.UUID) (Listener, error) {
	l, err := scanListener(s.pool.QueryRow(ctx, `SELECT `+listenerColumns+` FROM subscriptions
		WHERE merchant_id = $1 AND id = $2 AND kind = 'listener' AND deleted_at IS NULL AND expires_at > $3`,
		merchantID, id, s.Now()))
	if err != nil {
		return Listener{}, fmt.Errorf("get listener %s: %w", id, notFound(err))
	}
	return l, nil
}

// ExtendListener moves a live listener's expiry to expiresAt (never back).
// An ended listener, or one whose API key no longer works (revoked, or its
// roll's overlap over), is ErrNotFound: its connection must stop relaying,
// and without heartbeats it ends after its grace.
func (s *Listeners) ExtendListener(ctx context.Context, id uuid.UUID, expiresAt time.Time) error {
	tag, err := s.pool.Exec(ctx, `UPDATE subscriptions l SET expires_at = GREATEST(l.expires_at, $3)
		WHERE l.id = $1 AND l.kind = 'listener' AND l.deleted_at IS NULL
		  AND NOT EXISTS (SELECT 1 FROM api_keys k WHERE k.id = l.api_key_id AND NOT `+keyUsableAt+`)`,
		id, s.Now(), expiresAt)
	if err != nil {
		return fmt.Errorf("extend listener %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("extend listener %s: %w", id, ErrNotFound)
	}
	return nil
}

// ListenerLive tells whether a listener may still be sent a delivery: it
// has not ended and the key that opened it still works. The connection
// asks before each delivery it writes, so that none reaches the command
// after the key's revocation, even one already relayed.
func (s *Listeners) ListenerLive(ctx context.Context, id uuid.UUID) (bool, error) {
	var live bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM subscriptions l LEFT JOIN api_keys k ON k.id = l.api_key_id
		WHERE l.id = $1 AND l.kind = 'listener' AND l.deleted_at IS NULL AND `+keyUsableAt+`)`, id, s.Now()).Scan(&live)
	if err != nil {
		return false, fmt.Errorf("listener %s live: %w", id, err)
	}
	return live, nil
}

// BindListener records that API key keyID opened the merchant's live
// listener, which then ends with the key (EndAPIKeyGrants). The key's row
// is read under a share lock, so that a revocation either waits for the
// binding, and then finds the listener to end, or goes first, and then the
// binding sees it. A key that no longer works (or is another merchant's)
// is ErrNotFound, and the listener is ended at once: nothing may reach it.
func (s *Listeners) BindListener(ctx context.Context, merchantID string, id, keyID uuid.UUID) error {
	keyEnded := false
	err := s.tx(ctx, func(tx pgx.Tx) error {
		now := s.Now()
		var usable bool
		err := tx.QueryRow(ctx, `SELECT true FROM api_keys k WHERE k.merchant_id = $1 AND k.id = $3 AND `+keyUsableAt+`
			FOR SHARE`, merchantID, now, keyID).Scan(&usable)
		if errors.Is(err, pgx.ErrNoRows) {
			keyEnded = true
			_, err = tx.Exec(ctx, `UPDATE subscriptions SET deleted_at = $3, updated_at = $3, expires_at = least(expires_at, $3)
				WHERE merchant_id = $1 AND id = $2 AND kind = 'listener' AND deleted_at IS NULL`, merchantID, id, now)
			return err
		}
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE subscriptions SET api_key_id = $3
			WHERE merchant_id = $1 AND id = $2 AND kind = 'listener' AND deleted_at IS NULL`, merchantID, id, keyID)
		if err == nil && tag.RowsAffected() == 0 {
			err = fmt.Errorf("listener %s: %w", id, ErrNotFound)
		}
		return err
	})
	switch {
	case errors.Is(err, ErrNotFound):
		return err
	case err != nil:
		return fmt.Errorf("bind listener %s to api key %s: %w", id, keyID, err)
	case keyEnded:
		return fmt.Errorf("bind listener %s: api key %s: %w", id, keyID, ErrNotFound)
	}
	return nil
}

// ListenerExpiry tells when a listener ends; ended is true once it was
// ended (or if id is no listener at all).
func (s *Listeners) ListenerExpiry(ctx context.Context, id uuid.UUID) (expiresAt time.Time, ended bool, err error) {
	var exp *time.Time
	var deleted bool
	err = s.pool.QueryRow(ctx, `SELECT expires_at, deleted_at IS NOT NULL FROM subscriptions
		WHERE id = $1 AND kind = 'listener'`, id).Scan(&exp, &deleted)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, true, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("listener expiry %s: %w", id, err)
	}
	if exp == nil || deleted {
		return time.Time{}, true, nil
	}
	return *exp, false, nil
}

// EndListener ends a listener whose expiry has passed at now: it is
// deleted, and each of its pending deliveries that no attempt holds gets a
// last failed attempt with error reason and ends failed, with nothing more
// due. It reports whether this call ended it; a listener still live (a
// reconnect extended it) or already ended is left alone. A delivery whose
// attempt is in flight is left to its worker, which sees the listener
// ended.
func (s *Listeners) EndListener(ctx context.Context, merchantID string, id uuid.UUID, now time.Time, reason string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE subscriptions SET deleted_at = $3, updated_at = $3
		WHERE merchant_id = $1 AND id = $2 AND kind = 'listener' AND deleted_at IS NULL AND expires_at <= $3`,
		merchantID, id, now)
	if err != nil {
		return false, fmt.Errorf("end listener %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	// A second statement, as DeleteSubscription's, for the same lock
	// order.
	if err := stopListenerDeliveries(ctx, s.pool, merchantID, id, now, reason); err != nil {
		return true, err
	}
	return true, nil
}

// stopListenerDeliveries fails each pending delivery of an ended listener
// that no attempt holds: a last failed attempt with error reason, which
// says why it stopped, and nothing more due.
func stopListenerDeliveries(ctx context.Context, q querier, merchantID string, id uuid.UUID, now time.Time, reason string) error {
	if _, err := q.Exec(ctx, `
		WITH d AS (
			UPDATE deliveries SET status = 'failed', next_attempt_at = NULL, attempt_count = attempt_count + 1,
				manual_requested = 0, manual_requested_at = NULL, updated_at = $3
			WHERE merchant_id = $1 AND subscription_id = $2 AND status = 'pending'
			  AND (lease_until IS NULL OR lease_until < $3)
			RETURNING id, created_at, attempt_count
		)
		INSERT INTO attempts (delivery_id, delivery_created_at, number, status, trigger, http_status, error,
			duration_ms, response_body, attempted_at)
		SELECT id, created_at, attempt_count, 'failed', 'scheduled', NULL, $4, 0, '', $3 FROM d`,
		merchantID, id, now, reason); err != nil {
		return fmt.Errorf("stop deliveries of ended listener %s: %w", id, err)
	}
	return nil
}

// EndExpiredListeners ends every listener whose expiry has passed at now
// (EndListener), so that a listener whose API process died with it is
// cleaned up too. It returns how many it ended.
func (s *Listeners) EndExpiredListeners(ctx context.Context, now time.Time, reason string) (int, error) {
	rows, err := s.pool.Query(ctx, `SELECT merchant_id, id FROM subscriptions
		WHERE kind = 'listener' AND deleted_at IS NULL AND expires_at <= $1 LIMIT 1000`, now)
	if err != nil {
		return 0, fmt.Errorf("expired listeners: %w", err)
	}
	type ref struct {
		merchant string
		id       uuid.UUID
	}
	refs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ref, error) {
		var x ref
		err := r.Scan(&x.merchant, &x.id)
		return x, err
	})
	if err != nil {
		return 0, fmt.Errorf("expired listeners: %w", err)
	}
	ended := 0
	for _, x := range refs {
		ok, err := s.EndListener(ctx, x.merchant, x.id, now, reason)
		if err != nil {
			return ended, err
		}
		if ok {
			ended++
		}
	}
	return ended, nil
}
