package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// PortalSessions owns the portal_sessions table: the hashed tokens of
// portal sessions, each live until its TTL, its revocation or its key's
// end.
type PortalSessions struct {
	db
}

// PortalSession is a stored portal session: only its token's hash is kept.
type PortalSession struct {
	ID           uuid.UUID
	MerchantID   string
	Environment  string
	Capabilities []string
	// AccentColor and LogoURL are the session's own branding; nil falls
	// back to the merchant's settings.
	AccentColor *string
	LogoURL     *string
	// APIKeyID is the key that minted the session, which ends with it; nil
	// for a session the core API minted (it belongs to no key).
	APIKeyID *uuid.UUID
	// KeyScopes are that key's scopes as a lookup (PortalSessionByHash)
	// finds them, read with the session so that each request is judged by
	// what the key may do now; nil for a session of the core API, and on
	// the answer of CreatePortalSession.
	KeyScopes []string
	CreatedAt time.Time
	// ExpiresAt is when the session ends: its TTL, or earlier the end of
	// its key's roll overlap.
	ExpiresAt time.Time
	RevokedAt *time.Time
}

// NewPortalSession is a session to store; its token is hashed with
// HashAPIKey (tokens carry 256 random bits, like keys).
type NewPortalSession struct {
	MerchantID   string
	Environment  string
	Token        string
	Capabilities []string
	AccentColor  *string
	LogoURL      *string
	TTL          time.Duration
	// APIKeyID is the key minting the session (uuid.Nil for the core API's
	// ingest token): the session ends when that key does.
	APIKeyID uuid.UUID
}

// portalSessionColumns is the select list that PortalSessionByHash reads
// from the session (alias p).
const portalSessionColumns = `p.id, p.merchant_id, p.environment, p.capabilities, p.accent_color, p.logo_url,
	p.api_key_id, k.scopes, p.created_at, least(p.expires_at, k.expires_at), p.revoked_at`

// keyUsableAt is the condition, on the API key k (joined to what it
// opened, NULL when nothing names a key), that the key still works at the
// instant $2: merchants.KeyUsable in SQL.
const keyUsableAt = `(k.id IS NULL OR k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > $2))`

// CreatePortalSession stores a session of an existing merchant, starting
// now and ending TTL later, or when the key minting it expires if that is
// sooner (a rolled key). An unknown merchant is ErrNotFound: a session of
// a merchant webhookd never saw would show an empty portal.
func (s *PortalSessions) CreatePortalSession(ctx context.Context, n NewPortalSession) (PortalSession, error) {
	now := s.Now()
	id, err := uuid.NewV7()
	if err != nil {
		return PortalSession{}, fmt.Errorf("create portal session: %w", err)
	}
	p := PortalSession{ID: id, MerchantID: n.MerchantID, Environment: n.Environment, Capabilities: n.Capabilities,
		AccentColor: n.AccentColor, LogoURL: n.LogoURL, CreatedAt: now, ExpiresAt: now.Add(n.TTL)}
	if n.APIKeyID != uuid.Nil {
		p.APIKeyID = &n.APIKeyID
	}
	err = s.pool.QueryRow(ctx, `
		INSERT INTO portal_sessions (id, merchant_id, environment, token_hash, capabilities, accent_color, logo_url, created_at,
			expires_at, api_key_id)
		SELECT $1, m.id, $3, $4, $5, $6, $7, $8, least($9, (SELECT k.expires_at FROM api_keys k WHERE k.id = $10)), $10
		FROM merchants m WHERE m.id = $2
		RETURNING expires_at`,
		p.ID, n.MerchantID, n.Environment, HashAPIKey(n.Token), n.Capabilities, n.AccentColor, n.LogoURL, p.CreatedAt,
		p.ExpiresAt, p.APIKeyID).Scan(&p.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return PortalSession{}, fmt.Errorf("create portal session: merchant %s: %w", n.MerchantID, ErrNotFound)
	}
	if err != nil {
		return PortalSession{}, fmt.Errorf("create portal session for %s: %w", n.MerchantID, err)
	}
	return p, nil
}

// PortalSessionByHash finds a session that is live at now (not expired,
// not revoked, and the key that minted it, if one did, neither revoked
// nor expired), with its merchant. Any other is ErrNotFound. Reading the
// key on every lookup is what ends a key's sessions with it on every
// process at once, whatever EndAPIKeyGrants has recorded yet.
func (s *PortalSessions) PortalSessionByHash(ctx context.Context, hash []byte, now time.Time) (PortalSession, Merchant, error) {
	var p PortalSession
	var m Merchant
	err := s.pool.QueryRow(ctx, `
		SELECT `+portalSessionColumns+`,
		       m.id, m.api_version, m.notification_email, m.portal_accent_color, m.portal_logo_url, m.created_at, m.updated_at
		FROM portal_sessions p JOIN merchants m ON m.id = p.merchant_id
		LEFT JOIN api_keys k ON k.id = p.api_key_id
		WHERE p.token_hash = $1 AND p.revoked_at IS NULL AND p.expires_at > $2 AND `+keyUsableAt, hash, now).
		Scan(&p.ID, &p.MerchantID, &p.Environment, &p.Capabilities, &p.AccentColor, &p.LogoURL,
			&p.APIKeyID, &p.KeyScopes, &p.CreatedAt, &p.ExpiresAt, &p.RevokedAt,
			&m.ID, &m.APIVersion, &m.NotificationEmail, &m.PortalAccentColor, &m.PortalLogoURL, &m.CreatedAt, &m.UpdatedAt)
	if err != nil {
		return PortalSession{}, Merchant{}, fmt.Errorf("look up portal session: %w", notFound(err))
	}
	return p, m, nil
}

// RevokePortalSession ends one session of the merchant now. Ending one
// already ended changes nothing.
func (s *PortalSessions) RevokePortalSession(ctx context.Context, merchantID string, id uuid.UUID) error {
	if _, err := s.pool.Exec(ctx, `UPDATE portal_sessions SET revoked_at = $3
		WHERE merchant_id = $1 AND id = $2 AND revoked_at IS NULL`, merchantID, id, s.Now()); err != nil {
		return fmt.Errorf("revoke portal session %s: %w", id, err)
	}
	return nil
}

// RevokeMerchantPortalSessions ends every live session of the merchant now
// and says how many it ended.
func (s *PortalSessions) RevokeMerchantPortalSessions(ctx context.Context, merchantID string) (int64, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE portal_sessions SET revoked_at = $2
		WHERE merchant_id = $1 AND revoked_at IS NULL`, merchantID, s.Now())
	if err != nil {
		return 0, fmt.Errorf("revoke portal sessions of %s: %w", merchantID, err)
	}
	return tag.RowsAffected(), nil
}
