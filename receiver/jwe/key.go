package jwe

import (
	"crypto"
	"encoding/json"
	"fmt"

	"github.com/go-jose/go-jose/v4"
)

// ParsePrivateJWK reads the merchant's private key from its JWK, keeping
// its kid, and refuses a public, symmetric or unaccepted key. The result
// goes into [Config.Keys].
func ParsePrivateJWK(jwk []byte) (*jose.JSONWebKey, error) {
	var k jose.JSONWebKey
	if err := k.UnmarshalJSON(jwk); err != nil {
		return nil, fmt.Errorf("jwe: private JWK: %w", err)
	}
	if _, err := newDecryptionKey(&k); err != nil {
		return nil, fmt.Errorf("jwe: private JWK: %w", err)
	}
	return &k, nil
}

// PublicJWK returns the JWK to give webhookd (a subscription's
// encryption.public_key) for the private key priv, an *rsa.PrivateKey or
// *ecdsa.PrivateKey: its public half, with kid when not empty, its alg and
// use "enc". It never contains private members.
func PublicJWK(priv crypto.PrivateKey, kid string) ([]byte, error) {
	dk, err := newDecryptionKey(priv)
	if err != nil {
		return nil, fmt.Errorf("jwe: public JWK: %w", err)
	}
	pub := dk.key.(privateKey).Public()
	b, err := json.Marshal(jose.JSONWebKey{Key: pub, KeyID: kid, Algorithm: string(dk.alg), Use: "enc"})
	if err != nil {
		return nil, fmt.Errorf("jwe: public JWK: %w", err)
	}
	return b, nil
}
