package receiver

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// PublicKeyPrefix starts every Ed25519 public key webhookd shows a
// merchant, as in the Standard Webhooks reference implementation: "whpk_"
// followed by the standard base64 encoding of the 32-byte key. A merchant
// holds it to verify "v1a" signatures; it is not a secret.
const PublicKeyPrefix = "whpk_"

// ErrInvalidPublicKey reports a public key that is not [PublicKeyPrefix]
// followed by the standard base64 of 32 bytes. [NewVerifier] and
// [ParsePublicKey] return it, never [Verifier.Verify].
var ErrInvalidPublicKey = errors.New("receiver: invalid public key")

// PublicKey is an Ed25519 public key that checks "v1a" signatures, as
// [ParsePublicKey] returns it.
type PublicKey ed25519.PublicKey

// ParsePublicKey decodes a "whpk_…" public key. Like [ParseSecret] it
// requires the prefix, so that a secret pasted in the wrong place (a
// "whsec_" or, worse, a "whsk_" value) is refused rather than misread.
func ParsePublicKey(s string) (PublicKey, error) {
	raw, ok := strings.CutPrefix(s, PublicKeyPrefix)
	if !ok {
		return nil, fmt.Errorf("%w: missing %q prefix", ErrInvalidPublicKey, PublicKeyPrefix)
	}
	key, err := decodeCanonical(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: key is not standard base64: %w", ErrInvalidPublicKey, err)
	}
	if len(key) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrInvalidPublicKey, len(key), ed25519.PublicKeySize)
	}
	return PublicKey(key), nil
}

// String returns the key as a merchant is shown it: "whpk_" and standard
// base64, the form [ParsePublicKey] reads. A public key is not a secret, so
// unlike [Key] and [PrivateKey] it prints in full.
func (k PublicKey) String() string {
	return PublicKeyPrefix + base64.StdEncoding.EncodeToString(k)
}

// decodeCanonical decodes standard base64 that has one spelling per value,
// so that a key round-trips through String: Strict requires the unused
// bits of the last character to be zero, and line breaks, which every
// base64 decoder of the standard library skips, even Strict, are refused
// here (a fuzzer found a key with a newline inside accepted).
func decodeCanonical(raw string) ([]byte, error) {
	if i := strings.IndexAny(raw, "\r\n"); i >= 0 {
		return nil, base64.CorruptInputError(i)
	}
	return base64.StdEncoding.Strict().DecodeString(raw)
}
