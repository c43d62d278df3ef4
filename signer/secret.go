package signer

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"

	"github.com/webhookd/webhookd/receiver"
)

// SecretPrefix starts every signing secret; it is [receiver.SecretPrefix],
// where the secret format is defined.
const SecretPrefix = receiver.SecretPrefix

// KeySize is the number of random bytes in a secret made by [NewSecret]:
// 256 bits, the output size of SHA-256, so the key is never the weak link.
const KeySize = 32

// ErrInvalidSecret reports a signing secret or key that cannot be used. It
// is [receiver.ErrInvalidSecret], so that errors.Is matches either name.
var ErrInvalidSecret = receiver.ErrInvalidSecret

// Key is the raw HMAC key material of a signing secret: [receiver.Key],
// whose String method is redacted.
type Key = receiver.Key

// NewSecret returns a new signing secret: [SecretPrefix] followed by the
// standard base64 encoding of [KeySize] bytes from crypto/rand.
func NewSecret() (string, error) {
	var b [KeySize]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("signer: generate secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b[:]), nil
}

// ParseSecret decodes a "whsec_…" secret into its key material by
// [receiver.ParseSecret], the one reading of the secret format, so that
// webhookd signs only with secrets every receiver accepts.
func ParseSecret(s string) (Key, error) {
	return receiver.ParseSecret(s)
}

// Keys parses each secret's Value, in order, typically the result of
// [Active], to feed [Sign].
func Keys(secrets []Secret) ([]Key, error) {
	return parseAll(secrets, ParseSecret)
}

// parseAll parses each secret's Value with parse, in order; an error names
// the secret by its ID, never by its value.
func parseAll[K any](secrets []Secret, parse func(string) (K, error)) ([]K, error) {
	keys := make([]K, 0, len(secrets))
	for _, s := range secrets {
		k, err := parse(s.Value)
		if err != nil {
			return nil, fmt.Errorf("secret %d: %w", s.ID, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}
