package receiver

import (
	"crypto/ed25519"
	"crypto/subtle"
	"fmt"
	"strings"
)

// PrivateKeyPrefix starts every Ed25519 signing key webhookd issues, as in
// the Standard Webhooks specification: "whsk_" followed by standard base64.
// webhookd writes the 64-byte key, the 32-byte seed and then the 32-byte
// public key (Go's [ed25519.PrivateKey] layout), as the Svix server does; the
// Standard Webhooks Go library reads the 32-byte seed alone, and
// [ParsePrivateKey] takes both. It is a secret: webhookd seals it at rest
// and signs with it; merchants never see it.
const PrivateKeyPrefix = "whsk_"

// PrivateKey is an Ed25519 signing key, as [ParsePrivateKey] returns it. Its
// String method is redacted, like [Key]'s, so that a PrivateKey that ends up
// in a log line or an error message does not leak.
type PrivateKey ed25519.PrivateKey

// ParsePrivateKey decodes a "whsk_…" signing key. It is the one reading of
// the format: package signer signs with keys parsed here. The error matches
// [ErrInvalidSecret] (a signing key is a secret) and never quotes the key.
//
// The key is 64 bytes, seed then public key, or the 32-byte seed alone. In
// the 64-byte form the public half must be the one the seed derives: a key
// whose halves disagree (a corrupted or spliced value) would sign with one
// key while claiming another, and its signatures would verify under
// neither.
func ParsePrivateKey(s string) (PrivateKey, error) {
	raw, ok := strings.CutPrefix(s, PrivateKeyPrefix)
	if !ok {
		return nil, fmt.Errorf("%w: missing %q prefix", ErrInvalidSecret, PrivateKeyPrefix)
	}
	// One spelling per key, as in ParsePublicKey.
	key, err := decodeCanonical(raw)
	if err != nil {
		// The base64 error carries only an offset, never the input.
		return nil, fmt.Errorf("%w: key is not standard base64: %w", ErrInvalidSecret, err)
	}
	if len(key) != ed25519.PrivateKeySize && len(key) != ed25519.SeedSize {
		return nil, fmt.Errorf("%w: %d bytes, want %d (or a %d-byte seed)", ErrInvalidSecret, len(key), ed25519.PrivateKeySize, ed25519.SeedSize)
	}
	derived := ed25519.NewKeyFromSeed(key[:ed25519.SeedSize])
	if len(key) == ed25519.SeedSize {
		return PrivateKey(derived), nil
	}
	if subtle.ConstantTimeCompare(derived, key) != 1 {
		return nil, fmt.Errorf("%w: public half does not match the seed", ErrInvalidSecret)
	}
	return PrivateKey(key), nil
}

// Public returns the public key that verifies the key's signatures: what a
// merchant is shown and configures in [VerifierConfig.PublicKeys].
func (k PrivateKey) Public() PublicKey {
	return PublicKey(ed25519.PrivateKey(k).Public().(ed25519.PublicKey))
}

// String returns a fixed placeholder: key bytes must never be printed.
func (k PrivateKey) String() string { return "PrivateKey(redacted)" }

// GoString keeps %#v redacted too.
func (k PrivateKey) GoString() string { return k.String() }
