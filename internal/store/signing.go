package store

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Signature schemes of a subscription (its signature_scheme column), as
// signer.Scheme names them.
const (
	SchemeHMACSHA256 = "hmac_sha256"
	SchemeEd25519    = "ed25519"
)

// SigningPublicKey is the public key of one of a subscription's Ed25519
// signing secrets, stored in clear beside the sealed private key.
type SigningPublicKey struct {
	// PublicKey is the "whpk_…" key.
	PublicKey string `json:"public_key"`
	// ExpiresAt is when its private key stops signing; nil while it is
	// the current one.
	ExpiresAt *time.Time `json:"expires_at"`
}

// signingColumns end subscriptionColumns: the signature scheme, the
// encryption key, and the public keys of the two newest secrets (a
// rotation never leaves more than two signing), newest first, whether or
// not they have expired: the reader keeps those active at its clock.
const signingColumns = `signature_scheme, encryption_key,
	coalesce((SELECT jsonb_agg(jsonb_build_object('public_key', k.public_key, 'expires_at', k.expires_at)
			ORDER BY k.created_at DESC, k.id DESC)
		FROM (SELECT id, public_key, created_at, expires_at FROM subscription_secrets
			WHERE subscription_id = subscriptions.id ORDER BY created_at DESC, id DESC LIMIT 2) k
		WHERE k.public_key IS NOT NULL), '[]')`

// signingTargets are where signingColumns scan to.
func signingTargets(s *Subscription) []any {
	return []any{&s.SignatureScheme, &s.EncryptionKey, &s.SigningPublicKeys}
}

// encryptionKeyArg is an encryption key's column value: JSON text (see
// authenticationArgs for why not bytes), nil for none.
func encryptionKeyArg(jwk []byte) *string {
	if jwk == nil {
		return nil
	}
	text := string(jwk)
	return &text
}

// insertSigningSecret is insertSecret for a secret with a public key (an
// Ed25519 one): publicKey is stored in clear beside it; nil for none.
func insertSigningSecret(ctx context.Context, tx pgx.Tx, subscriptionID uuid.UUID, sealed []byte, publicKey *string, at time.Time) error {
	_, err := tx.Exec(ctx, `INSERT INTO subscription_secrets (subscription_id, ciphertext, public_key, created_at)
		VALUES ($1, $2, $3, $4)`, subscriptionID, sealed, publicKey, at)
	return err
}

// rereadSubscription reads the subscription id again in tx, once its new
// secret is stored, so that its public keys include the new one.
func rereadSubscription(ctx context.Context, tx pgx.Tx, id uuid.UUID) (Subscription, error) {
	return scanSubscription(tx.QueryRow(ctx, `SELECT `+subscriptionColumns+` FROM subscriptions WHERE id = $1`, id))
}
