package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// Merchants owns the merchants table: the tenants webhookd has seen, their
// pinned API version and their settings.
type Merchants struct {
	db
}

// EnsureMerchant returns the merchant, creating it pinned to defaultVersion
// when webhookd has not seen it before (spec 9.2: new accounts are pinned to
// the latest version at creation).
func (s *Merchants) EnsureMerchant(ctx context.Context, id, defaultVersion string) (Merchant, error) {
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
func (s *Merchants) GetMerchant(ctx context.Context, id string) (Merchant, error) {
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
	// RetentionDays is how many days the merchant's events and deliveries
	// are kept (1 to RetentionDays).
	RetentionDays *int
	// Actor is who changes the settings, for the audit entry of a
	// retention change.
	Actor string
}

// RetentionDays is the engine's retention in days, a merchant's default
// and longest.
const RetentionDays = int(Retention / (24 * time.Hour))

// UpdateMerchant creates or updates a merchant's settings. A change of
// retention is written to the audit trail in the same transaction.
func (s *Merchants) UpdateMerchant(ctx context.Context, id, defaultVersion string, set MerchantSettings) (Merchant, error) {
	now := s.Now()
	version := defaultVersion
	if set.APIVersion != nil {
		version = *set.APIVersion
	}
	var m Merchant
	err := s.tx(ctx, func(tx pgx.Tx) error {
		before := RetentionDays
		err := tx.QueryRow(ctx, `SELECT retention_days FROM merchants WHERE id = $1 FOR UPDATE`, id).Scan(&before)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		m, err = scanMerchant(tx.QueryRow(ctx, `
			INSERT INTO merchants (id, api_version, notification_email, portal_accent_color, portal_logo_url, retention_days, created_at, updated_at)
			VALUES ($1, $2, $3, NULLIF($7, ''), NULLIF($8, ''), coalesce($9, `+strconv.Itoa(RetentionDays)+`), $4, $4)
			ON CONFLICT (id) DO UPDATE SET
				api_version = CASE WHEN $5 THEN EXCLUDED.api_version ELSE merchants.api_version END,
				notification_email = CASE WHEN $6 THEN EXCLUDED.notification_email ELSE merchants.notification_email END,
				portal_accent_color = CASE WHEN $7::text IS NOT NULL THEN EXCLUDED.portal_accent_color ELSE merchants.portal_accent_color END,
				portal_logo_url = CASE WHEN $8::text IS NOT NULL THEN EXCLUDED.portal_logo_url ELSE merchants.portal_logo_url END,
				retention_days = coalesce($9, merchants.retention_days),
				updated_at = EXCLUDED.updated_at
			RETURNING `+merchantColumns,
			id, version, set.NotificationEmail, now, set.APIVersion != nil, set.NotificationEmail != nil,
			set.PortalAccentColor, set.PortalLogoURL, set.RetentionDays))
		if err != nil || m.RetentionDays == before {
			return err
		}
		return insertAudit(ctx, tx, AuditEntry{MerchantID: id, Actor: set.Actor, Action: AuditRetentionChanged,
			Target: id, Details: map[string]any{"from_days": before, "to_days": m.RetentionDays}, CreatedAt: now})
	})
	if err != nil {
		return Merchant{}, fmt.Errorf("update merchant %s: %w", id, err)
	}
	return m, nil
}

// merchantColumns is the select list that scanMerchant reads.
const merchantColumns = `id, api_version, notification_email, portal_accent_color, portal_logo_url, created_at, updated_at, retention_days`

func scanMerchant(row pgx.Row) (Merchant, error) {
	var m Merchant
	err := row.Scan(&m.ID, &m.APIVersion, &m.NotificationEmail, &m.PortalAccentColor, &m.PortalLogoURL, &m.CreatedAt, &m.UpdatedAt, &m.RetentionDays)
	return m, err
}
