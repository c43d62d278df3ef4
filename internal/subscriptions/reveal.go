package subscriptions

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/signer"
)

// SecretStore is what a SecretRevealer needs of the database.
type SecretStore interface {
	// GetSubscription returns the merchant's subscription; another
	// merchant's or a deleted one is store.ErrNotFound.
	GetSubscription(ctx context.Context, merchantID string, id uuid.UUID) (store.Subscription, error)
	// SigningSecrets returns the subscription's unexpired sealed secrets.
	SigningSecrets(ctx context.Context, subscriptionID uuid.UUID) ([]store.Secret, error)
}

// Revealed is a subscription's current signing secret, in clear, and
// when the previous one stops signing after a rotation.
type Revealed struct {
	// Secret is what the merchant verifies with: the "whsec_" secret, or
	// for an ed25519 subscription the "whpk_" public key (the private key
	// is never revealed).
	Secret string
	// PreviousExpiresAt is nil when no previous secret still signs.
	PreviousExpiresAt *time.Time
}

// SecretRevealer opens a subscription's current signing secret for its
// merchant, so that a merchant who lost it can read it again instead of
// rotating (which would break receivers still holding it).
type SecretRevealer struct {
	store     SecretStore
	masterKey []byte
	now       func() time.Time
}

// NewSecretRevealer is a SecretRevealer over st; masterKey opens the
// sealed secrets, now decides which are active.
func NewSecretRevealer(st SecretStore, masterKey []byte, now func() time.Time) *SecretRevealer {
	return &SecretRevealer{store: st, masterKey: masterKey, now: now}
}

// Reveal returns the current secret of the merchant's subscription id: the
// one that signs first (signer.Active), and the expiry of the other active
// one if a rotation left it signing.
func (v *SecretRevealer) Reveal(ctx context.Context, merchantID string, id uuid.UUID) (Revealed, error) {
	if _, err := v.store.GetSubscription(ctx, merchantID, id); err != nil {
		return Revealed{}, err
	}
	stored, err := v.store.SigningSecrets(ctx, id)
	if err != nil {
		return Revealed{}, err
	}
	// Only the times decide which secrets are active: open just the one
	// shown.
	secrets := make([]signer.Secret, 0, len(stored))
	for _, s := range stored {
		secrets = append(secrets, signer.Secret{ID: s.ID, CreatedAt: s.CreatedAt, ExpiresAt: s.ExpiresAt})
	}
	active := signer.Active(secrets, v.now())
	if len(active) == 0 {
		return Revealed{}, fmt.Errorf("reveal secret of subscription %s: no active signing secret", id)
	}
	sealer, err := signer.NewSealer(v.masterKey)
	if err != nil {
		return Revealed{}, fmt.Errorf("reveal secret of subscription %s: %w", id, err)
	}
	var out Revealed
	for _, s := range stored {
		if s.ID == active[0].ID {
			if out.Secret, err = sealer.Open(s.Ciphertext); err != nil {
				return Revealed{}, fmt.Errorf("reveal secret %d of subscription %s: %w", s.ID, id, err)
			}
			if out.Secret, err = revealable(out.Secret); err != nil {
				return Revealed{}, fmt.Errorf("reveal secret %d of subscription %s: %w", s.ID, id, err)
			}
		}
	}
	if len(active) > 1 {
		out.PreviousExpiresAt = active[1].ExpiresAt
	}
	return out, nil
}

// revealable is what may be shown of an opened signing secret: an HMAC
// secret itself, an Ed25519 private key's public key.
func revealable(secret string) (string, error) {
	scheme, err := signer.SchemeOf(secret)
	if err != nil || scheme != signer.SchemeEd25519 {
		return secret, err
	}
	return signer.PublicKeyOf(secret)
}
