package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ExpiringCertificate is an mtls client certificate that
// ClaimExpiringCertificates claimed the e-mail of, with what the e-mail
// needs.
type ExpiringCertificate struct {
	SubscriptionID uuid.UUID
	MerchantID     string
	URL            string
	// Email is the merchant's notification address; nil or empty for none.
	Email *string
	// Certificate is the authentication's summary: the certificate's
	// subject, issuer, serial and not_after.
	Certificate AuthenticationSummary
}

// ClaimExpiringCertificates claims, for at most limit subscriptions not
// deleted, the one e-mail about their mtls client certificate expiring at
// or before expiresBy, and returns them: the claim stamps the
// authentication's summary with expiry_notified_at = now, so that each
// certificate is claimed once across every instance (SKIP LOCKED lets two
// run at once), and a new authentication, which replaces the summary, can
// be claimed again. The merchant's notification address is read with it;
// a merchant without one is claimed too (there is no one to tell).
func (s *EndpointHealth) ClaimExpiringCertificates(ctx context.Context, expiresBy, now time.Time, limit int) ([]ExpiringCertificate, error) {
	rows, err := s.pool.Query(ctx, `
		UPDATE subscriptions s SET authentication = s.authentication || jsonb_build_object('expiry_notified_at', $3::text)
		FROM merchants m
		WHERE m.id = s.merchant_id AND s.id IN (
			SELECT id FROM subscriptions
			WHERE deleted_at IS NULL AND authentication->>'type' = 'mtls'
			  AND NOT authentication ? 'expiry_notified_at'
			  AND (authentication->>'not_after')::timestamptz <= $1
			ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)
		RETURNING s.id, s.merchant_id, s.url, m.notification_email, s.authentication`,
		expiresBy, limit, now.UTC().Format(time.RFC3339Nano))
	if err != nil {
		return nil, fmt.Errorf("claim expiring certificates: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ExpiringCertificate, error) {
		var c ExpiringCertificate
		err := r.Scan(&c.SubscriptionID, &c.MerchantID, &c.URL, &c.Email, &c.Certificate)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim expiring certificates: %w", err)
	}
	return out, nil
}
