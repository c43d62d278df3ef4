package subscriptions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/receiver/jwe"
	"github.com/webhookd/webhookd/signer"
)

// checkSignatureScheme reads a signature_scheme value; nil or "" is the
// default, hmac_sha256.
func checkSignatureScheme(param string, s *string) (signer.Scheme, error) {
	if s == nil || *s == "" {
		return signer.SchemeHMACSHA256, nil
	}
	scheme, err := signer.ParseScheme(*s)
	if err != nil {
		return "", invalid.Value(param, "signature_scheme_unknown", fmt.Sprintf("%s must be %q or %q; %s is not a signature scheme.",
			param, signer.SchemeHMACSHA256, signer.SchemeEd25519, invalid.Quote(*s)))
	}
	return scheme, nil
}

// checkSchemeUnchanged refuses an update's signature_scheme other than
// the subscription's: the scheme is chosen at creation, since the
// merchant's receiver verifies with what it was given then (a secret or a
// public key). The same value is accepted, so that a read sent back as an
// update passes.
func (g *Registry) checkSchemeUnchanged(ctx context.Context, merchantID string, id uuid.UUID, s *string) error {
	if s == nil {
		return nil
	}
	const param = "signature_scheme"
	scheme, err := checkSignatureScheme(param, s)
	if err != nil {
		return err
	}
	cur, err := g.store.GetSubscription(ctx, merchantID, id)
	if err != nil {
		return err
	}
	if string(scheme) != SignatureScheme(cur) {
		return invalid.Value(param, "signature_scheme_immutable", fmt.Sprintf(
			"%s is chosen when a subscription is created and cannot be changed (it is %q); create a new subscription to sign with %q.",
			param, SignatureScheme(cur), scheme))
	}
	return nil
}

// SignatureScheme is a subscription's signature scheme as reads show it.
func SignatureScheme(sub store.Subscription) string {
	if sub.SignatureScheme == "" {
		return string(signer.SchemeHMACSHA256)
	}
	return sub.SignatureScheme
}

// SigningPublicKeys are the "whpk_…" public keys an ed25519 subscription
// signs with at now, the current one first (two during a rotation's
// overlap); nil for an hmac_sha256 subscription. They are not secrets.
func SigningPublicKeys(sub store.Subscription, now time.Time) []string {
	var keys []string
	for _, k := range sub.SigningPublicKeys {
		if k.ExpiresAt == nil || k.ExpiresAt.After(now) {
			keys = append(keys, k.PublicKey)
		}
	}
	return keys
}

// checkEncryption checks the public JWK deliveries are to be encrypted
// to (signer.ParseEncryptionKey's rules) and returns it as webhookd keeps
// it; nil jwk is none. param names the field.
func checkEncryption(param string, jwk []byte) ([]byte, error) {
	if jwk == nil {
		return nil, nil
	}
	k, err := signer.ParseEncryptionKey(jwk)
	if err != nil {
		if errors.Is(err, signer.ErrInvalidEncryptionKey) {
			// Its message never quotes key material.
			why := strings.TrimPrefix(err.Error(), signer.ErrInvalidEncryptionKey.Error()+": ")
			return nil, invalid.Value(param, "encryption_key_invalid", param+" is not a public key webhookd encrypts to: "+why+
				". Give the public JWK of an RSA key (2048 bits or more, RSA-OAEP-256) or of an EC key on P-256, P-384 or P-521 (ECDH-ES+A256KW).")
		}
		return nil, fmt.Errorf("%s: %w", param, err)
	}
	kept, err := k.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", param, err)
	}
	return kept, nil
}

// Encryption is what a read shows of a subscription's encryption key: the
// public JWK as webhookd keeps it, its kid, its RFC 7638 thumbprint and
// the JWE algorithms deliveries use. None of it is secret.
type Encryption struct {
	PublicKey  []byte
	KeyID      string
	Thumbprint string
	Algorithm  string
	// ContentEncryption is the JWE's "enc": A256GCM.
	ContentEncryption string
}

// EncryptionOf describes sub's encryption key; nil when it has none.
func EncryptionOf(sub store.Subscription) (*Encryption, error) {
	if sub.EncryptionKey == nil {
		return nil, nil
	}
	k, err := signer.ParseEncryptionKey(sub.EncryptionKey)
	if err != nil {
		return nil, fmt.Errorf("encryption key of %s: %w", sub.ID, err)
	}
	return &Encryption{PublicKey: sub.EncryptionKey, KeyID: k.KeyID(), Thumbprint: k.Thumbprint(), Algorithm: k.Algorithm(),
		ContentEncryption: string(jwe.ContentEncryption)}, nil
}

// newSigningSecret makes a signing secret of scheme, its public key (for
// ed25519; nil for hmac_sha256) and its sealed form for storage.
func (g *Registry) newSigningSecret(scheme signer.Scheme) (secret string, publicKey *string, sealed []byte, err error) {
	sealer, err := signer.NewSealer(g.masterKey)
	if err != nil {
		return "", nil, nil, fmt.Errorf("signing secret: %w", err)
	}
	secret, err = signer.NewSigningSecret(scheme)
	if err != nil {
		return "", nil, nil, fmt.Errorf("signing secret: %w", err)
	}
	if scheme == signer.SchemeEd25519 {
		pub, err := signer.PublicKeyOf(secret)
		if err != nil {
			return "", nil, nil, fmt.Errorf("signing secret: %w", err)
		}
		publicKey = &pub
	}
	sealed, err = sealer.Seal(secret)
	if err != nil {
		return "", nil, nil, fmt.Errorf("signing secret: %w", err)
	}
	return secret, publicKey, sealed, nil
}

// shown is what a merchant is shown of a new signing secret: the secret
// itself for hmac_sha256, the public key for ed25519 (the private key
// never leaves webhookd).
func shown(secret string, publicKey *string) string {
	if publicKey != nil {
		return *publicKey
	}
	return secret
}

// SigningPublicKeys is the package's SigningPublicKeys at the rules' now.
func (g *Registry) SigningPublicKeys(sub store.Subscription) []string {
	return SigningPublicKeys(sub, g.check.rules.now())
}
