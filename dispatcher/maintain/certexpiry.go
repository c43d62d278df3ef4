package maintain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
)

// CertExpiryInterval is how often the certificate expiry job runs: the
// warning comes days ahead, so an hour late is nothing.
const CertExpiryInterval = time.Hour

// certExpiryBatch bounds the certificates one round claims; the round goes
// on until none is left.
const certExpiryBatch = 500

// ExpiryNotifier is told about mtls client certificates that expire
// soon. notify.Mailer is one.
type ExpiryNotifier interface {
	// CertificateExpiring is called once per certificate, at now.
	CertificateExpiring(ctx context.Context, c store.ExpiringCertificate, now time.Time)
}

// certExpiryStore is what the CertExpiry job needs of the database.
type certExpiryStore interface {
	// ClaimExpiringCertificates claims, for at most limit subscriptions,
	// the one e-mail about a client certificate expiring by expiresBy.
	ClaimExpiringCertificates(ctx context.Context, expiresBy, now time.Time, limit int) ([]store.ExpiringCertificate, error)
}

// CertExpiryConfig is what the CertExpiry job needs.
type CertExpiryConfig struct {
	// Store is the database (required).
	Store certExpiryStore
	// Notifier e-mails the merchant (required: telling is all the job
	// does).
	Notifier ExpiryNotifier
	// Runtime is the clock and the logger.
	Runtime
}

func (c CertExpiryConfig) validate() error {
	switch {
	case c.Store == nil:
		return errors.New("certificate expiry: Store is required")
	case c.Notifier == nil:
		return errors.New("certificate expiry: Notifier is required")
	}
	return nil
}

// CertExpiry warns merchants, once per certificate, that the client
// certificate of an mtls endpoint expires within
// subscriptions.CertificateExpiryWarning: after it expires the endpoint
// refuses every delivery's handshake. It runs as TaskCertExpiry.
type CertExpiry struct {
	cfg    CertExpiryConfig
	clock  clock.Clock
	logger *slog.Logger
}

// NewCertExpiry checks cfg and builds the job.
func NewCertExpiry(cfg CertExpiryConfig) (*CertExpiry, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &CertExpiry{cfg: cfg, clock: cfg.clock(), logger: cfg.logger()}, nil
}

// HandleCertExpiry runs warn as a periodic task.
func (c *CertExpiry) HandleCertExpiry(ctx context.Context, _ *asynq.Task) error {
	if _, err := c.warn(ctx); err != nil {
		c.logger.ErrorContext(ctx, "certificate expiry", "error", err)
	}
	return nil // the next period tries again; never archive the job
}

// warn does one round: it claims every certificate due a warning, in
// batches, tells each merchant, and returns them. The claim is one UPDATE
// that only one instance's round wins, so each e-mail goes out once.
func (c *CertExpiry) warn(ctx context.Context) ([]store.ExpiringCertificate, error) {
	var all []store.ExpiringCertificate
	for {
		now := c.clock.Now()
		due, err := c.cfg.Store.ClaimExpiringCertificates(ctx, now.Add(subscriptions.CertificateExpiryWarning), now, certExpiryBatch)
		if err != nil {
			return all, fmt.Errorf("certificate expiry: %w", err)
		}
		for _, e := range due {
			c.logger.InfoContext(ctx, "client certificate expires soon", "subscription_id", e.SubscriptionID,
				"merchant_id", e.MerchantID, "not_after", e.Certificate.NotAfter)
			c.cfg.Notifier.CertificateExpiring(ctx, e, now)
		}
		all = append(all, due...)
		if len(due) < certExpiryBatch {
			return all, nil
		}
	}
}
