package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// APIKeys owns the api_keys table: the hashes of merchants' keys, their
// prefixes, use, rolls and revocations, and the ending of what a dead key
// opened (its portal sessions and listeners).
type APIKeys struct {
	db
	// merchants creates a key's merchant on its first key.
	merchants *Merchants
}

// ErrAPIKeyInactive reports a roll asked of a key that is revoked, expired
// or already rolled: only a key in use can have a successor (the rule is
// merchants.MayRoll's). It wraps ErrConflict (a state conflict, not a
// race).
var ErrAPIKeyInactive = fmt.Errorf("api key is revoked, expired or already rolled: %w", ErrConflict)

// apiKeyPrefixChars is how many characters of a key's random part its
// prefix keeps: enough to tell a merchant's keys apart at a glance, far
// too few (36 bits) to guess the remaining 250.
const apiKeyPrefixChars = 6

// APIKeyPrefix is the part of key that may be stored and shown: the
// environment's prefix ("sandbox.", "prod.") and the first characters of
// the random part.
func APIKeyPrefix(key string) string {
	cut := strings.LastIndexByte(key, '.') + 1
	return key[:min(len(key), cut+apiKeyPrefixChars)]
}

// apiKeyColumns are the columns scanAPIKey reads, in its order.
const apiKeyColumns = `id, merchant_id, environment, scopes, created_at, coalesce(prefix, ''), last_used_at, expires_at, revoked_at`

func scanAPIKey(row pgx.Row) (APIKey, error) {
	var k APIKey
	err := row.Scan(&k.ID, &k.MerchantID, &k.Environment, &k.Scopes, &k.CreatedAt, &k.Prefix, &k.LastUsedAt, &k.ExpiresAt, &k.RevokedAt)
	return k, err
}

// GetAPIKey returns one key of the merchant; another merchant's key is
// ErrNotFound.
func (s *APIKeys) GetAPIKey(ctx context.Context, merchantID string, id uuid.UUID) (APIKey, error) {
	k, err := scanAPIKey(s.pool.QueryRow(ctx, `SELECT `+apiKeyColumns+` FROM api_keys
		WHERE merchant_id = $1 AND id = $2`, merchantID, id))
	if err != nil {
		return APIKey{}, fmt.Errorf("get api key %s of %s: %w", id, merchantID, notFound(err))
	}
	return k, nil
}

// RevokeAPIKey revokes one key of the merchant now. Revoking a revoked key
// changes nothing: its first revocation time stays.
func (s *APIKeys) RevokeAPIKey(ctx context.Context, merchantID string, id uuid.UUID) (APIKey, error) {
	k, err := scanAPIKey(s.pool.QueryRow(ctx, `UPDATE api_keys SET revoked_at = coalesce(revoked_at, $3)
		WHERE merchant_id = $1 AND id = $2 RETURNING `+apiKeyColumns, merchantID, id, s.Now()))
	if err != nil {
		return APIKey{}, fmt.Errorf("revoke api key %s of %s: %w", id, merchantID, notFound(err))
	}
	return k, nil
}

// EndedGrants is what EndAPIKeyGrants ended of a key.
type EndedGrants struct {
	// Sessions is how many live portal sessions it revoked.
	Sessions int64
	// Listeners are the listeners it ended: the API processes holding their
	// connections must close them.
	Listeners []uuid.UUID
}

// EndAPIKeyGrants ends what key id of the merchant opened, provided the key
// no longer works at now (revoked, or its roll's overlap over): its live
// portal sessions are revoked, and its live listeners ended, each of their
// pending deliveries that no attempt holds failed with error reason, as
// EndListener does. A key that still works, or none, ends nothing; so does
// a second call. Lookups refuse what a dead key opened whether or not this
// has run (PortalSessionByHash, ListenerLive, ExtendListener): this records
// it, stops the deliveries, and names the connections to close.
func (s *APIKeys) EndAPIKeyGrants(ctx context.Context, merchantID string, id uuid.UUID, now time.Time, reason string) (EndedGrants, error) {
	var g EndedGrants
	err := s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE portal_sessions p SET revoked_at = $2
			FROM api_keys k WHERE k.id = p.api_key_id
			  AND p.merchant_id = $1 AND p.api_key_id = $3 AND p.revoked_at IS NULL AND p.expires_at > $2
			  AND NOT `+keyUsableAt, merchantID, now, id)
		if err != nil {
			return err
		}
		g.Sessions = tag.RowsAffected()
		rows, err := tx.Query(ctx, `UPDATE subscriptions l SET deleted_at = $2, updated_at = $2, expires_at = least(l.expires_at, $2)
			FROM api_keys k WHERE k.id = l.api_key_id
			  AND l.merchant_id = $1 AND l.api_key_id = $3 AND l.kind = 'listener' AND l.deleted_at IS NULL
			  AND NOT `+keyUsableAt+`
			RETURNING l.id`, merchantID, now, id)
		if err != nil {
			return err
		}
		g.Listeners, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		return err
	})
	if err != nil {
		return EndedGrants{}, fmt.Errorf("end what api key %s of %s opened: %w", id, merchantID, err)
	}
	// The deliveries after the listeners' transaction, as EndListener
	// does, for the same lock order. Should this fail, a worker stops each
	// of them at its next attempt: the listener has ended.
	for _, l := range g.Listeners {
		if err := stopListenerDeliveries(ctx, s.pool, merchantID, l, now, reason); err != nil {
			return g, err
		}
	}
	return g, nil
}

// RollRule decides, under the key's row lock and at the store's clock,
// whether key may be given a successor: nil lets the roll go on; an error
// is returned and nothing is written. The domain writes it
// (merchants.MayRoll); the store only locks and persists.
type RollRule func(key APIKey, now time.Time) error

// RollAPIKey gives a key of the merchant a successor, newKey, with the same
// environment and scopes, and makes the old key expire at expiresAt; both
// in one transaction. mayRoll runs under the key's lock, so that of two
// concurrent rolls the second sees the first's; its error is returned (a
// key no longer active: ErrAPIKeyInactive). It returns the successor.
func (s *APIKeys) RollAPIKey(ctx context.Context, merchantID string, id uuid.UUID, newKey string, expiresAt time.Time, mayRoll RollRule) (APIKey, error) {
	var successor APIKey
	err := s.tx(ctx, func(tx pgx.Tx) error {
		old, err := scanAPIKey(tx.QueryRow(ctx, `SELECT `+apiKeyColumns+` FROM api_keys
			WHERE merchant_id = $1 AND id = $2 FOR UPDATE`, merchantID, id))
		if err != nil {
			return notFound(err)
		}
		// The clock after the lock: a roll that waited for it is judged
		// and dated after the one that held it.
		now := s.Now()
		if err := mayRoll(old, now); err != nil {
			return err
		}
		successor = APIKey{ID: uuid.Must(uuid.NewV7()), MerchantID: merchantID, Environment: old.Environment,
			Scopes: old.Scopes, CreatedAt: now, Prefix: APIKeyPrefix(newKey)}
		if _, err := tx.Exec(ctx, `INSERT INTO api_keys (id, merchant_id, environment, key_hash, scopes, created_at, prefix)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, successor.ID, merchantID, successor.Environment, HashAPIKey(newKey),
			successor.Scopes, now, successor.Prefix); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE api_keys SET expires_at = $2 WHERE id = $1`, id, expiresAt)
		return err
	})
	if err != nil {
		return APIKey{}, fmt.Errorf("roll api key %s of %s: %w", id, merchantID, err)
	}
	return successor, nil
}

// RecordAPIKeyUsage sets the last use of many keys in one statement. A
// time older than the stored one changes nothing (another process may have
// written a later use first); a key deleted meanwhile is skipped.
func (s *APIKeys) RecordAPIKeyUsage(ctx context.Context, lastUsed map[uuid.UUID]time.Time) error {
	if len(lastUsed) == 0 {
		return nil
	}
	// In id order, so that two processes writing overlapping keys lock
	// their rows in the same order and never deadlock.
	ids := slices.SortedFunc(maps.Keys(lastUsed), func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	times := make([]time.Time, len(ids))
	for i, id := range ids {
		times[i] = lastUsed[id]
	}
	_, err := s.pool.Exec(ctx, `WITH locked AS (
			SELECT id FROM api_keys WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE)
		UPDATE api_keys k SET last_used_at = u.at
		FROM unnest($1::uuid[], $2::timestamptz[]) AS u(id, at), locked
		WHERE k.id = u.id AND locked.id = u.id AND (k.last_used_at IS NULL OR k.last_used_at < u.at)`, ids, times)
	if err != nil {
		return fmt.Errorf("record the use of %d api keys: %w", len(ids), err)
	}
	return nil
}

// HashAPIKey is how keys are stored and looked up. A fast hash is right
// here: keys carry 256 bits of randomness, so there is nothing to brute-force.
func HashAPIKey(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// CreateAPIKey stores the hash of a new key for a merchant (created if new).
func (s *APIKeys) CreateAPIKey(ctx context.Context, merchantID, defaultVersion, environment, key string, scopes []string) (APIKey, error) {
	if _, err := s.merchants.EnsureMerchant(ctx, merchantID, defaultVersion); err != nil {
		return APIKey{}, err
	}
	k := APIKey{ID: uuid.Must(uuid.NewV7()), MerchantID: merchantID, Environment: environment, Scopes: scopes, CreatedAt: s.Now(),
		Prefix: APIKeyPrefix(key)}
	_, err := s.pool.Exec(ctx, `INSERT INTO api_keys (id, merchant_id, environment, key_hash, scopes, created_at, prefix)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, k.ID, merchantID, environment, HashAPIKey(key), scopes, k.CreatedAt, k.Prefix)
	if err != nil {
		return APIKey{}, fmt.Errorf("create api key for %s: %w", merchantID, err)
	}
	return k, nil
}

// APIKeyByHash finds a key, with its merchant's pinned version. A revoked
// or expired key is found too (with RevokedAt, ExpiresAt): whether it may
// still be used is for the caller to decide, with its clock.
func (s *APIKeys) APIKeyByHash(ctx context.Context, hash []byte) (APIKey, Merchant, error) {
	var k APIKey
	var m Merchant
	err := s.pool.QueryRow(ctx, `
		SELECT k.id, k.merchant_id, k.environment, k.scopes, k.created_at, k.expires_at, k.revoked_at,
		       m.id, m.api_version, m.notification_email, m.portal_accent_color, m.portal_logo_url, m.created_at, m.updated_at
		FROM api_keys k JOIN merchants m ON m.id = k.merchant_id WHERE k.key_hash = $1`, hash).
		Scan(&k.ID, &k.MerchantID, &k.Environment, &k.Scopes, &k.CreatedAt, &k.ExpiresAt, &k.RevokedAt,
			&m.ID, &m.APIVersion, &m.NotificationEmail, &m.PortalAccentColor, &m.PortalLogoURL, &m.CreatedAt, &m.UpdatedAt)
	if err != nil {
		return APIKey{}, Merchant{}, fmt.Errorf("look up api key: %w", notFound(err))
	}
	return k, m, nil
}
