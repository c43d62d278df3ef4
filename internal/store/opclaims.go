package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The kinds of operational claim (operational_claims.kind).
const (
	// ClaimState is a subscription's last announced state, "disabled" or
	// "enabled": one webhook_endpoint.disabled or .enabled per change.
	ClaimState = "state"
	// ClaimExhausted is the last webhook_delivery.exhausted, at most one
	// per interval.
	ClaimExhausted = "exhausted"
	// ClaimTokenFailing is the token_failing episode announced, keyed by
	// when it began.
	ClaimTokenFailing = "token_failing"
)

// ClaimOperational claims the operational event of kind about
// subscriptionID, keyed key, at now, and reports whether it won: it wins
// when no claim of the kind is held yet, when the held one has another
// key (a new state, a new episode), or when it is older than interval (0:
// no age frees it). One statement that only one caller can win, so each
// event goes out once whichever worker asks. A claim of state "enabled"
// never wins without an earlier claim: an enabled subscription that was
// never announced disabled has no change to tell.
func (s *EndpointHealth) ClaimOperational(ctx context.Context, subscriptionID uuid.UUID, kind, key string, interval time.Duration) (bool, error) {
	now := s.Now()
	var freed *time.Time
	if interval > 0 {
		at := now.Add(-interval)
		freed = &at
	}
	var won bool
	err := s.pool.QueryRow(ctx, `
		INSERT INTO operational_claims AS c (subscription_id, kind, key, claimed_at)
		SELECT $1, $2, $3, $4 WHERE NOT ($2 = 'state' AND $3 = 'enabled')
		ON CONFLICT (subscription_id, kind) DO UPDATE SET key = excluded.key, claimed_at = excluded.claimed_at
		WHERE c.key <> excluded.key OR c.claimed_at <= $5::timestamptz
		RETURNING true`, subscriptionID, kind, key, now, freed).Scan(&won)
	if errors.Is(err, pgx.ErrNoRows) {
		if kind == ClaimState && key == "enabled" {
			// No row to insert: update a held "disabled" claim instead.
			return s.claimEnabled(ctx, subscriptionID, now)
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claim %s event of %s: %w", kind, subscriptionID, err)
	}
	return won, nil
}

// claimEnabled turns a held "disabled" state claim into "enabled".
func (s *EndpointHealth) claimEnabled(ctx context.Context, subscriptionID uuid.UUID, now time.Time) (bool, error) {
	tag, err := s.pool.Exec(ctx, `
		UPDATE operational_claims SET key = 'enabled', claimed_at = $2
		WHERE subscription_id = $1 AND kind = 'state' AND key = 'disabled'`, subscriptionID, now)
	if err != nil {
		return false, fmt.Errorf("claim enabled event of %s: %w", subscriptionID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// claimTokenFailingSince is the claim row whose claimed_at is when the
// subscription's current token failing episode began (TokenFailingSince).
const claimTokenFailingSince = "token_failing_since"

// TokenFailingSince notes that an attempt of subscriptionID failed at now
// because its OAuth2 token endpoint did, and returns when the failing
// episode began, the first such failure since the subscription's last
// success, with the token URL of its authentication (as its public
// summary holds it). One statement, only on a failure: a success writes
// nothing here, the subscription's last_success_at (which the record
// keeps) ends the episode.
func (s *EndpointHealth) TokenFailingSince(ctx context.Context, subscriptionID uuid.UUID) (time.Time, string, error) {
	var since time.Time
	var tokenURL string
	err := s.pool.QueryRow(ctx, `
		INSERT INTO operational_claims AS c (subscription_id, kind, key, claimed_at)
		VALUES ($1, $2, '', $3)
		ON CONFLICT (subscription_id, kind) DO UPDATE SET claimed_at = CASE
			WHEN (SELECT last_success_at FROM subscriptions WHERE id = $1) >= c.claimed_at THEN excluded.claimed_at
			ELSE c.claimed_at END
		RETURNING claimed_at, (SELECT coalesce(authentication->>'token_url', '') FROM subscriptions WHERE id = $1)`,
		subscriptionID, claimTokenFailingSince, s.Now()).Scan(&since, &tokenURL)
	if err != nil {
		return time.Time{}, "", fmt.Errorf("note the token failure of %s: %w", subscriptionID, err)
	}
	return since, tokenURL, nil
}
