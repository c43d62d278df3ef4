package signer

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// SecretPrefix starts every signing secret. It makes a secret recognisable
// (in a config file, a log line, a secret scanner) and is not part of the key.
const SecretPrefix = "whsec_"

// KeySize is the number of random bytes in a secret made by [NewSecret]:
// 256 bits, the output size of SHA-256, so the key is never the weak link.
const KeySize = 32

// ErrInvalidSecret reports a signing secret or key that cannot be used.
var ErrInvalidSecret = errors.New("signer: invalid secret")

// Key is the raw HMAC key material of a signing secret, as returned by
// [ParseSecret]. Its String method is redacted so that a Key that ends up in
// a log line or an error message does not leak.
type Key []byte

// String returns a fixed placeholder: key bytes must never be printed.
func (k Key) String() string { return "signer.Key(redacted)" }

// GoString keeps %#v redacted too.
func (k Key) GoString() string { return k.String() }

// NewSecret returns a new signing secret: [SecretPrefix] followed by the
// standard base64 encoding of [KeySize] bytes from crypto/rand.
func NewSecret() (string, error) {
	var b [KeySize]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("signer: generate secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b[:]), nil
}

// ParseSecret decodes a "whsec_…" secret into its key material.
//
// The prefix is required, unlike in the official libraries, which strip it
// when present: every secret webhookd issues carries it, so a value without it
// is almost certainly the wrong string (an API key, a truncated paste).
// Error messages never quote the secret, because they end up in logs.
func ParseSecret(s string) (Key, error) {
	raw, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return nil, fmt.Errorf("%w: missing %q prefix", ErrInvalidSecret, SecretPrefix)
	}
	if raw == "" {
		return nil, fmt.Errorf("%w: empty key after %q prefix", ErrInvalidSecret, SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		// The base64 error carries only an offset, never the input.
		return nil, fmt.Errorf("%w: key is not standard base64: %w", ErrInvalidSecret, err)
	}
	return Key(key), nil
}

// Keys parses each secret's Value, in order, typically the result of
// [Active], to feed [Sign] or a [Verifier].
func Keys(secrets []Secret) ([]Key, error) {
	keys := make([]Key, 0, len(secrets))
	for _, s := range secrets {
		k, err := ParseSecret(s.Value)
		if err != nil {
			return nil, fmt.Errorf("secret %d: %w", s.ID, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}
