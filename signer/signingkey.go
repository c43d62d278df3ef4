package signer

import "github.com/webhookd/webhookd/receiver"

// SigningKey is one parsed signing secret of either scheme: an HMAC key
// (from "whsec_") or an Ed25519 private key (from "whsk_"). It knows its
// scheme, so a subscription's active keys, which during a rotation from one
// scheme to the other are of both, are signed with by one call to
// [SignWith] or [SetHeadersWith]. The zero SigningKey is not usable. Its
// String method is redacted.
type SigningKey struct {
	// Exactly one is set.
	hmac    receiver.Key
	ed25519 receiver.PrivateKey
}

// ParseSigningKey parses a stored signing secret of either scheme, chosen
// by its prefix: "whsec_" by [receiver.ParseSecret], "whsk_" by
// [receiver.ParsePrivateKey]. Errors match [ErrInvalidSecret] and never
// quote the secret.
func ParseSigningKey(secret string) (SigningKey, error) {
	scheme, err := SchemeOf(secret)
	if err != nil {
		return SigningKey{}, err
	}
	if scheme == SchemeEd25519 {
		k, err := receiver.ParsePrivateKey(secret)
		if err != nil {
			return SigningKey{}, err
		}
		return SigningKey{ed25519: k}, nil
	}
	k, err := receiver.ParseSecret(secret)
	if err != nil {
		return SigningKey{}, err
	}
	return HMACSigningKey(k), nil
}

// HMACSigningKey wraps an HMAC key, such as one from [ParseSecret], for
// [SignWith].
func HMACSigningKey(k Key) SigningKey { return SigningKey{hmac: k} }

// Scheme returns the key's signature scheme.
func (k SigningKey) Scheme() Scheme {
	if k.ed25519 != nil {
		return SchemeEd25519
	}
	return SchemeHMACSHA256
}

// String names the scheme and nothing of the key.
func (k SigningKey) String() string { return "SigningKey(" + string(k.Scheme()) + ", redacted)" }

// GoString keeps %#v redacted too.
func (k SigningKey) GoString() string { return k.String() }

// signature returns the key's webhook-signature value for the content.
func (k SigningKey) signature(id, timestamp string, body []byte) string {
	if k.ed25519 != nil {
		return receiver.Ed25519Signature(id, timestamp, body, k.ed25519)
	}
	return receiver.Signature(id, timestamp, body, k.hmac)
}

// SigningKeys parses each secret's Value, of either scheme, in order,
// typically the result of [Active], to feed [SignWith] or [SetHeadersWith].
// It is [Keys] for subscriptions that may sign with Ed25519.
func SigningKeys(secrets []Secret) ([]SigningKey, error) {
	return parseAll(secrets, ParseSigningKey)
}
