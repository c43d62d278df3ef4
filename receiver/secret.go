package receiver

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// SecretPrefix starts every signing secret webhookd issues. It makes a
// secret recognisable (in a config file, a log line, a secret scanner) and
// is not part of the key: the rest of the secret is the standard base64
// encoding of the HMAC key.
const SecretPrefix = "whsec_"

// ErrInvalidSecret reports a signing secret that is not [SecretPrefix]
// followed by non-empty standard base64. [NewVerifier] and [ParseSecret]
// return it, never [Verifier.Verify]; package signer returns the same value.
var ErrInvalidSecret = errors.New("receiver: invalid secret")

// Key is the raw HMAC key of a signing secret, as [ParseSecret] returns
// it. Its String method is redacted so that a Key that ends up in a log
// line or an error message does not leak.
type Key []byte

// String returns a fixed placeholder: key bytes must never be printed.
func (k Key) String() string { return "Key(redacted)" }

// GoString keeps %#v redacted too.
func (k Key) GoString() string { return k.String() }

// ParseSecret decodes a "whsec_…" secret into its key. It is the one
// reading of the secret format: webhookd signs with keys it parsed here and
// [NewVerifier] checks with them.
//
// The prefix is required, unlike in the Standard Webhooks libraries, which
// strip it when present: every secret webhookd issues carries it, so a value
// without it is almost certainly the wrong string (an API key, a truncated
// paste). An empty key is refused, since an HMAC under it is a value anyone
// can compute. Error messages never quote the secret, because they end up
// in logs.
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
