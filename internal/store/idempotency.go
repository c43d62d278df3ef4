package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// IdempotencyKeys owns the idempotency_keys table: the claims of requests
// carrying an Idempotency-Key and the answers stored for their replays.
type IdempotencyKeys struct {
	db
}

// IdempotencyOutcome says what a request carrying an Idempotency-Key must do.
type IdempotencyOutcome int

// The outcomes of ClaimIdempotencyKey.
const (
	// IdempotencyProceed: the key is new (or expired, or its holder died);
	// run the request, then CompleteIdempotencyKey or ReleaseIdempotencyKey.
	IdempotencyProceed IdempotencyOutcome = iota
	// IdempotencyReplay: the key was used with the same request; answer the
	// stored response.
	IdempotencyReplay
	// IdempotencyMismatch: the key was used with different parameters (409).
	IdempotencyMismatch
	// IdempotencyInProgress: a request with the key is running now (409).
	IdempotencyInProgress
)

// StoredResponse is a cached successful answer.
type StoredResponse struct {
	Status int
	Header map[string]string
	Body   []byte
}

// ClaimIdempotencyKey takes the key for a request whose parameters hash to
// requestHash. The claim is held until lockFor has passed, so that a crashed
// request does not block its key for 30 days.
func (s *IdempotencyKeys) ClaimIdempotencyKey(ctx context.Context, merchantID, key string, requestHash []byte, lockFor time.Duration) (IdempotencyOutcome, StoredResponse, error) {
	now := s.Now()
	var out IdempotencyOutcome
	var resp StoredResponse
	err := s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO idempotency_keys (merchant_id, key, request_hash, locked_until, created_at)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`, merchantID, key, requestHash, now.Add(lockFor), now)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			out = IdempotencyProceed
			return nil
		}
		var hash []byte
		var status *int
		var lockedUntil *time.Time
		var created time.Time
		err = tx.QueryRow(ctx, `SELECT request_hash, response_status, response_header, response_body, locked_until, created_at
			FROM idempotency_keys WHERE merchant_id = $1 AND key = $2 FOR UPDATE`, merchantID, key).
			Scan(&hash, &status, &resp.Header, &resp.Body, &lockedUntil, &created)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("key released concurrently: %w", ErrConflict)
		}
		if err != nil {
			return err
		}
		stale := created.Before(now.Add(-Retention)) || (status == nil && lockedUntil != nil && !lockedUntil.After(now))
		switch {
		case stale:
			out = IdempotencyProceed
			_, err = tx.Exec(ctx, `UPDATE idempotency_keys SET request_hash = $3, response_status = NULL,
				response_header = NULL, response_body = NULL, locked_until = $4, created_at = $5
				WHERE merchant_id = $1 AND key = $2`, merchantID, key, requestHash, now.Add(lockFor), now)
			return err
		case !bytes.Equal(hash, requestHash):
			out = IdempotencyMismatch
		case status == nil:
			out = IdempotencyInProgress
		default:
			out = IdempotencyReplay
			resp.Status = *status
		}
		return nil
	})
	if errors.Is(err, ErrConflict) {
		return IdempotencyInProgress, StoredResponse{}, nil
	}
	if err != nil {
		return 0, StoredResponse{}, fmt.Errorf("claim idempotency key: %w", err)
	}
	return out, resp, nil
}

// CompleteIdempotencyKey stores the successful answer under the key.
func (s *IdempotencyKeys) CompleteIdempotencyKey(ctx context.Context, merchantID, key string, resp StoredResponse) error {
	_, err := s.pool.Exec(ctx, `UPDATE idempotency_keys SET response_status = $3, response_header = $4,
		response_body = $5, locked_until = NULL WHERE merchant_id = $1 AND key = $2`,
		merchantID, key, resp.Status, resp.Header, resp.Body)
	if err != nil {
		return fmt.Errorf("complete idempotency key: %w", err)
	}
	return nil
}

// ReleaseIdempotencyKey forgets the key after a failed request (spec 4.4
// rule 5: only successes are cached).
func (s *IdempotencyKeys) ReleaseIdempotencyKey(ctx context.Context, merchantID, key string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE merchant_id = $1 AND key = $2 AND response_status IS NULL`, merchantID, key)
	if err != nil {
		return fmt.Errorf("release idempotency key: %w", err)
	}
	return nil
}
