package store

import (
	"context"
	"crypto/sha256"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// EnsureMerchant returns the merchant, creating it pinned to defaultVersion
// when webhookd has not seen it before (spec 9.2: new accounts are pinned to
// the latest version at creation).
func (s *Store) EnsureMerchant(ctx context.Context, id, defaultVersion string) (Merchant, error) {
	now := s.Now()
	row := s.pool.QueryRow(ctx, `
		INSERT INTO merchants (id, api_version, created_at, updated_at) VALUES ($1, $2, $3, $3)
		ON CONFLICT (id) DO UPDATE SET id = EXCLUDED.id
		RETURNING `+merchantColumns, id, defaultVersion, now)
	m, err := scanMerchant(row)
	if err != nil {
		return Merchant{}, fmt.Errorf("ensure merchant %s: %w", id, err)
	}
	return m, nil
}

// GetMerchant returns one merchant.
func (s *Store) GetMerchant(ctx context.Context, id string) (Merchant, error) {
	m, err := scanMerchant(s.pool.QueryRow(ctx, `
		SELECT `+merchantColumns+` FROM merchants WHERE id = $1`, id))
	if err != nil {
		return Merchant{}, fmt.Errorf("get merchant %s: %w", id, notFound(err))
	}
	return m, nil
}

// MerchantSettings are the fields PUT /internal/v1/merchants/{id} may set;
// nil leaves a field as it is.
type MerchantSettings struct {
	NotificationEmail *string
	APIVersion        *string
	// PortalAccentColor and PortalLogoURL are the portal's default
	// branding; an empty string clears one.
	PortalAccentColor *string
	PortalLogoURL     *string
}

// UpdateMerchant creates or updates a merchant's settings.
func (s *Store) UpdateMerchant(ctx context.Context, id, defaultVersion string, set MerchantSettings) (Merchant, error) {
	now := s.Now()
	version := defaultVersion
	if set.APIVersion != nil {
		version = *set.APIVersion
	}
	m, err := scanMerchant(s.pool.QueryRow(ctx, `
		INSERT INTO merchants (id, api_version, notification_email, portal_accent_color, portal_logo_url, created_at, updated_at)
		VALUES ($1, $2, $3, NULLIF($7, ''), NULLIF($8, ''), $4, $4)
		ON CONFLICT (id) DO UPDATE SET
			api_version = CASE WHEN $5 THEN EXCLUDED.api_version ELSE merchants.api_version END,
			notification_email = CASE WHEN $6 THEN EXCLUDED.notification_email ELSE merchants.notification_email END,
			portal_accent_color = CASE WHEN $7::text IS NOT NULL THEN EXCLUDED.portal_accent_color ELSE merchants.portal_accent_color END,
			portal_logo_url = CASE WHEN $8::text IS NOT NULL THEN EXCLUDED.portal_logo_url ELSE merchants.portal_logo_url END,
			updated_at = EXCLUDED.updated_at
		RETURNING `+merchantColumns,
		id, version, set.NotificationEmail, now, set.APIVersion != nil, set.NotificationEmail != nil,
		set.PortalAccentColor, set.PortalLogoURL))
	if err != nil {
		return Merchant{}, fmt.Errorf("update merchant %s: %w", id, err)
	}
	return m, nil
}

// merchantColumns is the select list that scanMerchant reads.
const merchantColumns = `id, api_version, notification_email, portal_accent_color, portal_logo_url, created_at, updated_at`

func scanMerchant(row pgx.Row) (Merchant, error) {
	var m Merchant
	err := row.Scan(&m.ID, &m.APIVersion, &m.NotificationEmail, &m.PortalAccentColor, &m.PortalLogoURL, &m.CreatedAt, &m.UpdatedAt)
	return m, err
}

// HashAPIKey is how keys are stored and looked up. A fast hash is right
// here: keys carry 256 bits of randomness, so there is nothing to brute-force.
func HashAPIKey(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// CreateAPIKey stores the hash of a new key for a merchant (created if new).
func (s *Store) CreateAPIKey(ctx context.Context, merchantID, defaultVersion, environment, key string, scopes []string) (APIKey, error) {
	if _, err := s.EnsureMerchant(ctx, merchantID, defaultVersion); err != nil {
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
func (s *Store) APIKeyByHash(ctx context.Context, hash []byte) (APIKey, Merchant, error) {
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
