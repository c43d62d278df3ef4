package signer

import (
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-jose/go-jose/v4"

	"github.com/webhookd/webhookd/internal/keybounds"
	"github.com/webhookd/webhookd/receiver/jwe"
)

// ContentTypeJWE is the content-type of a delivery whose body is encrypted:
// the compact JWE of the envelope ([jwe.ContentType]).
const ContentTypeJWE = jwe.ContentType

// MaxEncryptionKeyBytes bounds the JWK [ParseEncryptionKey] reads: a 4096-bit
// RSA public key takes under 1 KiB, a certificate chain (x5c) a few.
const MaxEncryptionKeyBytes = 16 << 10

// ErrInvalidEncryptionKey reports a JWK that webhookd will not encrypt to.
// The wrapping error's message says what is wrong and never quotes key
// material, so the API can return it (400 parameter_invalid naming
// encryption.public_key).
var ErrInvalidEncryptionKey = errors.New("signer: invalid encryption public key")

// EncryptionKey is a merchant's public key that delivery bodies are
// encrypted to, checked against package jwe's rules. It is safe for
// concurrent use: each Encrypt draws a fresh content key (and, for EC, a
// fresh ephemeral key).
type EncryptionKey struct {
	jwk jose.JSONWebKey
	enc jose.Encrypter
}

// jwkMembers are the members of a JWK checked before go-jose parses it: the
// key type, its intended use and algorithm, and whether any private or
// symmetric member is present. go-jose would parse a private key, which
// costs time on untrusted input and must be refused anyway.
type jwkMembers struct {
	Kty  string          `json:"kty"`
	Alg  string          `json:"alg"`
	Use  string          `json:"use"`
	Crv  string          `json:"crv"`
	K    json.RawMessage `json:"k"`
	D    json.RawMessage `json:"d"`
	P    json.RawMessage `json:"p"`
	Q    json.RawMessage `json:"q"`
	DP   json.RawMessage `json:"dp"`
	DQ   json.RawMessage `json:"dq"`
	QI   json.RawMessage `json:"qi"`
	Priv json.RawMessage `json:"priv"`
}

// privateMember names the first private member present, or "".
func (m jwkMembers) privateMember() string {
	for _, p := range []struct {
		name  string
		value json.RawMessage
	}{{"d", m.D}, {"p", m.P}, {"q", m.Q}, {"dp", m.DP}, {"dq", m.DQ}, {"qi", m.QI}, {"priv", m.Priv}} {
		if p.value != nil {
			return p.name
		}
	}
	return ""
}

// ParseEncryptionKey reads a merchant's public JWK and checks it: an RSA key
// of 2048 to 4096 bits for RSA-OAEP-256, or an EC key on P-256, P-384 or
// P-521 for ECDH-ES+A256KW. An "alg" member, when present, must be that
// algorithm, and a "use" member "enc". A private, symmetric or other key is
// refused with an error wrapping [ErrInvalidEncryptionKey].
func ParseEncryptionKey(jwk []byte) (*EncryptionKey, error) {
	if len(jwk) > MaxEncryptionKeyBytes {
		return nil, invalidKey("larger than %d bytes", MaxEncryptionKeyBytes)
	}
	var m jwkMembers
	if err := json.Unmarshal(jwk, &m); err != nil {
		return nil, invalidKey("not a JWK object: %v", err)
	}
	switch {
	case m.Kty == "oct" || m.K != nil:
		return nil, invalidKey(`a symmetric key (kty "oct"); give the public key of an RSA or EC key pair`)
	case m.privateMember() != "":
		return nil, invalidKey("a private key (member %q); give the public key only and keep the private key", m.privateMember())
	case m.Kty != "RSA" && m.Kty != "EC":
		return nil, invalidKey(`kty %.20q; "RSA" or "EC" is needed`, m.Kty)
	case m.Kty == "EC" && m.Crv != "P-256" && m.Crv != "P-384" && m.Crv != "P-521":
		return nil, invalidKey("EC curve %.20q; only P-256, P-384 and P-521 are accepted", m.Crv)
	case m.Use != "" && m.Use != "enc":
		return nil, invalidKey(`use %.20q; a key to encrypt to has use "enc"`, m.Use)
	}
	var k jose.JSONWebKey
	if err := k.UnmarshalJSON(jwk); err != nil {
		if m.Kty == "RSA" && errors.Is(err, jose.ErrUnsupportedKeyType) {
			return nil, invalidKey("RSA key larger than %d bits", jose.MaxRSAModulusBits)
		}
		return nil, invalidKey("%v", err)
	}
	// The one rule of key sizes and curves every merchant key is held to
	// (go-jose already refuses an RSA key above its own maximum).
	var bound *keybounds.Error
	if errors.As(keybounds.Check(k.Key), &bound) {
		return nil, invalidKey("%s", bound.Reason)
	}
	alg, err := jwe.Algorithm(k.Key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidEncryptionKey, err)
	}
	if m.Alg != "" && m.Alg != string(alg) {
		return nil, invalidKey("alg %.30q; an %s key is used with %s", m.Alg, m.Kty, alg)
	}
	enc, err := jose.NewEncrypter(jwe.ContentEncryption, jose.Recipient{Algorithm: alg, Key: k.Key, KeyID: k.KeyID}, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidEncryptionKey, err)
	}
	// Keep what the key means, not how it was written: no x5c, no
	// key_ops, the algorithm always named.
	return &EncryptionKey{
		jwk: jose.JSONWebKey{Key: k.Key, KeyID: k.KeyID, Algorithm: string(alg), Use: "enc"},
		enc: enc,
	}, nil
}

// invalidKey is an error wrapping ErrInvalidEncryptionKey.
func invalidKey(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidEncryptionKey, fmt.Sprintf(format, args...))
}

// Encrypt returns the compact JWE of envelope, the body to send with
// content-type [ContentTypeJWE]. Sign the result: the signature covers the
// body as sent.
func (k *EncryptionKey) Encrypt(envelope []byte) ([]byte, error) {
	obj, err := k.enc.Encrypt(envelope)
	if err != nil {
		return nil, fmt.Errorf("signer: encrypt body: %w", err)
	}
	compact, err := obj.CompactSerialize()
	if err != nil {
		return nil, fmt.Errorf("signer: encrypt body: %w", err)
	}
	return []byte(compact), nil
}

// Algorithm is the key-management algorithm of the JWEs made with k:
// "RSA-OAEP-256" or "ECDH-ES+A256KW".
func (k *EncryptionKey) Algorithm() string { return k.jwk.Algorithm }

// KeyID is the JWK's kid, "" when it has none; JWEs carry it in their
// header so that the merchant's receiver picks the right private key.
func (k *EncryptionKey) KeyID() string { return k.jwk.KeyID }

// Thumbprint is the key's RFC 7638 SHA-256 thumbprint, base64url: what a
// read of the subscription can show for the merchant to check which key
// webhookd has.
func (k *EncryptionKey) Thumbprint() string {
	tp, err := k.jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		return "" // not reached: the key parsed as RSA or EC
	}
	return base64.RawURLEncoding.EncodeToString(tp)
}

// MarshalJSON returns the public JWK as webhookd keeps it: kty and the
// public members, kid when given, alg and use "enc". It is not a secret.
func (k *EncryptionKey) MarshalJSON() ([]byte, error) {
	return k.jwk.MarshalJSON()
}
