package signer

import (
	"errors"
	"fmt"
	"strings"

	"github.com/webhookd/webhookd/receiver"
)

// Scheme is how a subscription's deliveries are signed. Its values are
// those of the API's signature_scheme field.
type Scheme string

const (
	// SchemeHMACSHA256 signs with a shared "whsec_" secret: "v1,"
	// signatures. It is the default.
	SchemeHMACSHA256 Scheme = "hmac_sha256"
	// SchemeEd25519 signs with a "whsk_" private key whose "whpk_" public
	// key the merchant verifies with: "v1a," signatures.
	SchemeEd25519 Scheme = "ed25519"
)

// ErrUnknownScheme reports a signature scheme other than
// [SchemeHMACSHA256] and [SchemeEd25519].
var ErrUnknownScheme = errors.New("signer: unknown signature scheme")

// ParseScheme reads a signature_scheme value; "" is not a scheme, so a
// caller applies its default first.
func ParseScheme(s string) (Scheme, error) {
	switch sc := Scheme(s); sc {
	case SchemeHMACSHA256, SchemeEd25519:
		return sc, nil
	}
	return "", fmt.Errorf("%w: %q", ErrUnknownScheme, s)
}

// SchemeOf returns the scheme a stored signing secret belongs to, read from
// its prefix: "whsec_" is [SchemeHMACSHA256], "whsk_" is [SchemeEd25519].
// It does not check the rest of the secret; [ParseSigningKey] does.
func SchemeOf(secret string) (Scheme, error) {
	switch {
	case strings.HasPrefix(secret, receiver.SecretPrefix):
		return SchemeHMACSHA256, nil
	case strings.HasPrefix(secret, receiver.PrivateKeyPrefix):
		return SchemeEd25519, nil
	}
	return "", fmt.Errorf("%w: neither %q nor %q prefix", ErrInvalidSecret, receiver.SecretPrefix, receiver.PrivateKeyPrefix)
}
