package signer

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"

	"github.com/webhookd/webhookd/receiver"
)

// PrivateKeyPrefix starts every Ed25519 signing key; it is
// [receiver.PrivateKeyPrefix], where the format is defined.
const PrivateKeyPrefix = receiver.PrivateKeyPrefix

// PublicKeyPrefix starts every Ed25519 public key; it is
// [receiver.PublicKeyPrefix].
const PublicKeyPrefix = receiver.PublicKeyPrefix

// NewSigningKeyPair returns a new Ed25519 key pair from crypto/rand: the
// private key as a "whsk_…" secret (base64 of the 64-byte key, seed then
// public key, as the Standard Webhooks reference implementation writes it),
// which is stored and sealed like a "whsec_" secret, and the "whpk_…"
// public key the merchant is shown. The public key can always be derived
// again with [PublicKeyOf].
func NewSigningKeyPair() (privateKey, publicKey string, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("signer: generate key pair: %w", err)
	}
	return PrivateKeyPrefix + base64.StdEncoding.EncodeToString(priv), receiver.PublicKey(pub).String(), nil
}

// PublicKeyOf returns the "whpk_…" public key of a "whsk_…" signing key:
// what a read of an ed25519 subscription shows. The error matches
// [ErrInvalidSecret] and never quotes the key.
func PublicKeyOf(privateKey string) (string, error) {
	k, err := receiver.ParsePrivateKey(privateKey)
	if err != nil {
		return "", err
	}
	return k.Public().String(), nil
}

// NewSigningSecret returns a new signing secret of scheme: [NewSecret]'s
// "whsec_…" for [SchemeHMACSHA256], [NewSigningKeyPair]'s "whsk_…" for
// [SchemeEd25519]. It is what a subscription's creation and each rotation
// store, whatever the scheme.
func NewSigningSecret(scheme Scheme) (string, error) {
	switch scheme {
	case SchemeHMACSHA256:
		return NewSecret()
	case SchemeEd25519:
		priv, _, err := NewSigningKeyPair()
		return priv, err
	}
	return "", fmt.Errorf("%w: %q", ErrUnknownScheme, scheme)
}
