package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
)

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
	CreatedAt   time.Time
	ExpiresAt   time.Time
	RevokedAt   *time.Time
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
}

// portalSessionColumns is the select list that PortalSessionByHash reads
// from the session (alias p).
const portalSessionColumns = `p.id, p.merchant_id, p.environment, p.capabilities, p.accent_color, p.logo_url,
	p.created_at, p.expires_at, p.revoked_at`

// CreatePortalSession stores a session of an existing merchant, starting
// now and ending TTL later. An unknown merchant is ErrNotFound: a session
// of a merchant webhookd never saw would show an empty portal.
func (s *Store) CreatePortalSession(ctx context.Context, n NewPortalSession) (PortalSession, error) {
	now := s.Now()
	id, err := uuid.NewV7()
	if err != nil {
		return PortalSession{}, fmt.Errorf("create portal session: %w", err)
	}
	p := PortalSession{ID: id, MerchantID: n.MerchantID, Environment: n.Environment, Capabilities: n.Capabilities,
		AccentColor: n.AccentColor, LogoURL: n.LogoURL, CreatedAt: now, ExpiresAt: now.Add(n.TTL)}
	tag, err := s.pool.Exec(ctx, `
		INSERT INTO portal_sessions (id, merchant_id, environment, token_hash, capabilities, accent_color, logo_url, created_at, expires_at)
		SELECT $1, m.id, $3, $4, $5, $6, $7, $8, $9 FROM merchants m WHERE m.id = $2`,
		p.ID, n.MerchantID, n.Environment, HashAPIKey(n.Token), n.Capabilities, n.AccentColor, n.LogoURL, p.CreatedAt, p.ExpiresAt)
	if err != nil {
		return PortalSession{}, fmt.Errorf("create portal session for %s: %w", n.MerchantID, err)
	}
	if tag.RowsAffected() == 0 {
		return PortalSession{}, fmt.Errorf("create portal session: merchant %s: %w", n.MerchantID, ErrNotFound)
	}
	return p, nil
}

// PortalSessionByHash finds a session that is live at now (not expired,
// not revoked), with its merchant. Any other is ErrNotFound.
func (s *Store) PortalSessionByHash(ctx context.Context, hash []byte, now time.Time) (PortalSession, Merchant, error) {
	var p PortalSession
	var m Merchant
	err := s.pool.QueryRow(ctx, `
		SELECT `+portalSessionColumns+`,
		       m.id, m.api_version, m.notification_email, m.portal_accent_color, m.portal_logo_url, m.created_at, m.updated_at
		FROM portal_sessions p JOIN merchants m ON m.id = p.merchant_id
		WHERE p.token_hash = $1 AND p.revoked_at IS NULL AND p.expires_at > $2`, hash, now).
		Scan(&p.ID, &p.MerchantID, &p.Environment, &p.Capabilities, &p.AccentColor, &p.LogoURL,
			&p.CreatedAt, &p.ExpiresAt, &p.RevokedAt,
			&m.ID, &m.APIVersion, &m.NotificationEmail, &m.PortalAccentColor, &m.PortalLogoURL, &m.CreatedAt, &m.UpdatedAt)
	if err != nil {
		return PortalSession{}, Merchant{}, fmt.Errorf("look up portal session: %w", notFound(err))
	}
	return p, m, nil
}

// RevokePortalSession ends one session of the merchant now. Ending one
// already ended changes nothing.
func (s *Store) RevokePortalSession(ctx context.Context, merchantID string, id uuid.UUID) error {
	if _, err := s.pool.Exec(ctx, `UPDATE portal_sessions SET revoked_at = $3
		WHERE merchant_id = $1 AND id = $2 AND revoked_at IS NULL`, merchantID, id, s.Now()); err != nil {
		return fmt.Errorf("revoke portal session %s: %w", id, err)
	}
	return nil
}

// RevokeMerchantPortalSessions ends every live session of the merchant now
// and says how many it ended.
func (s *Store) RevokeMerchantPortalSessions(ctx context.Context, merchantID string) (int64, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE portal_sessions SET revoked_at = $2
		WHERE merchant_id = $1 AND revoked_at IS NULL`, merchantID, s.Now())
	if err != nil {
		return 0, fmt.Errorf("revoke portal sessions of %s: %w", merchantID, err)
	}
	return tag.RowsAffected(), nil
}
