package jwe

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"fmt"

	"github.com/go-jose/go-jose/v4"
)

// ContentType is the content-type of a delivery whose body is a compact JWE
// (RFC 7515's media type for compact JOSE objects).
const ContentType = "application/jose"

// ContentEncryption is the one content-encryption algorithm ("enc") of
// webhookd's JWEs.
const ContentEncryption = jose.A256GCM

// The key-management algorithms ("alg") of webhookd's JWEs, one per key
// type.
const (
	// RSAOAEP256 wraps the content key with RSA-OAEP and SHA-256.
	RSAOAEP256 = jose.RSA_OAEP_256
	// ECDHESA256KW agrees a key with ECDH-ES and wraps the content key
	// with AES-256 key wrap.
	ECDHESA256KW = jose.ECDH_ES_A256KW
)

// MinRSABits is the smallest RSA modulus accepted. The largest is go-jose's
// limit, 4096 bits.
const MinRSABits = 2048

// ErrKeyNotAccepted reports a key that webhookd neither encrypts to nor
// decrypts with; its message says why.
var ErrKeyNotAccepted = errors.New("key not accepted")

// Algorithm returns the key-management algorithm webhookd uses with key, a
// public or a private RSA or EC key, or refuses the key with an error
// wrapping [ErrKeyNotAccepted] that names what is wrong (size, curve or
// type).
func Algorithm(key any) (jose.KeyAlgorithm, error) {
	switch k := key.(type) {
	case *rsa.PrivateKey:
		return Algorithm(&k.PublicKey)
	case *ecdsa.PrivateKey:
		return Algorithm(&k.PublicKey)
	case *rsa.PublicKey:
		if bits := k.N.BitLen(); bits < MinRSABits {
			return "", fmt.Errorf("%w: RSA key of %d bits, at least %d needed", ErrKeyNotAccepted, bits, MinRSABits)
		}
		return RSAOAEP256, nil
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256(), elliptic.P384(), elliptic.P521():
			return ECDHESA256KW, nil
		}
		return "", fmt.Errorf("%w: EC curve %s, only P-256, P-384 and P-521 are accepted", ErrKeyNotAccepted, k.Curve.Params().Name)
	case []byte:
		return "", fmt.Errorf("%w: a symmetric key; an RSA or EC key pair is needed", ErrKeyNotAccepted)
	}
	return "", fmt.Errorf("%w: key type %T; an RSA or EC key is needed", ErrKeyNotAccepted, key)
}
