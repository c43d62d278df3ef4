// Package keybounds is the one rule for the size and kind of every key a
// merchant gives webhookd (an mtls client key, a private_key_jwt key, a
// service account key, a key bodies are encrypted to) and for the length
// of a certificate chain: each is hostile input whose cost grows with its
// size (an RSA operation with a 16,384-bit key takes seconds), so it is
// bounded where it is taken and again where a stored one is used.
package keybounds

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/webhookd/webhookd/internal/invalid"
)

// Bounds of a key and of a chain.
const (
	// MinRSABits is the smallest RSA modulus accepted (NIST SP 800-57,
	// RFC 7518 §3.3 and §4.3).
	MinRSABits = 2048
	// MaxRSABits is the largest: every RSA operation costs more than
	// linearly in the modulus, and no CA or cloud issues larger keys.
	MaxRSABits = 4096
	// MaxChainCertificates bounds the certificates of one PEM chain or
	// CA bundle: a leaf, a few intermediates and a root are five.
	MaxChainCertificates = 5
	// maxPrivateKeyDER bounds the DER of a private key read before it is
	// parsed: a 4,096-bit RSA key takes under 2,400 bytes in PKCS #8, a
	// P-521 key 241, and parsing a much larger one costs its own work.
	maxPrivateKeyDER = 3000
)

// Codes of the refusals, for the API's error (invalid.Value's code).
const (
	// CodeKeySize: an RSA key outside MinRSABits..MaxRSABits.
	CodeKeySize = "key_size"
	// CodeKeyType: a key of another kind or curve.
	CodeKeyType = "key_type"
	// CodeChainTooLong: more than MaxChainCertificates certificates.
	CodeChainTooLong = "certificate_chain_too_long"
)

// ErrKeyNotAccepted is wrapped by every refusal of Check and CheckChain.
var ErrKeyNotAccepted = errors.New("key not accepted")

// Refusals of ParsePrivateKeyPEM before the key's bounds: they say what
// is wrong with the text, never what it holds.
var (
	// ErrNotPEM: not exactly one PEM block of a private key type.
	ErrNotPEM = errors.New("not one PEM private key (-----BEGIN PRIVATE KEY-----, RSA or EC)")
	// ErrUnparsable: a PEM private key block whose DER cannot be parsed.
	ErrUnparsable = errors.New("a private key that cannot be parsed (PKCS #8, PKCS #1 or SEC 1)")
)

// Error is a refusal: Code says which rule (CodeKeySize, CodeKeyType,
// CodeChainTooLong), Reason says why in words that quote no key material.
type Error struct {
	Code   string
	Reason string
}

// Error is Reason.
func (e *Error) Error() string { return e.Reason }

// Unwrap makes every Error an ErrKeyNotAccepted.
func (e *Error) Unwrap() error { return ErrKeyNotAccepted }

// Check accepts a public or private RSA key of MinRSABits to MaxRSABits,
// an ECDSA key on P-256, P-384 or P-521, or an Ed25519 key; anything else
// is an *Error.
func Check(key any) error {
	switch k := key.(type) {
	case *rsa.PrivateKey:
		return Check(&k.PublicKey)
	case *ecdsa.PrivateKey:
		return Check(&k.PublicKey)
	case *rsa.PublicKey:
		if bits := k.N.BitLen(); bits < MinRSABits || bits > MaxRSABits {
			return &Error{Code: CodeKeySize, Reason: fmt.Sprintf("an RSA key of %d bits; from %d to %d bits are accepted", bits, MinRSABits, MaxRSABits)}
		}
		return nil
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256(), elliptic.P384(), elliptic.P521():
			return nil
		}
		return &Error{Code: CodeKeyType, Reason: "an EC key on another curve than P-256, P-384 and P-521"}
	case ed25519.PublicKey, ed25519.PrivateKey:
		return nil
	}
	return &Error{Code: CodeKeyType, Reason: fmt.Sprintf("a key of type %T; an RSA, EC or Ed25519 key is accepted", key)}
}

// CheckChain accepts at most MaxChainCertificates certificates, each
// one's public key by Check.
func CheckChain(chain []*x509.Certificate) error {
	if len(chain) > MaxChainCertificates {
		return &Error{Code: CodeChainTooLong, Reason: fmt.Sprintf("%d certificates; at most %d are accepted", len(chain), MaxChainCertificates)}
	}
	for i, c := range chain {
		if err := Check(c.PublicKey); err != nil {
			var e *Error
			errors.As(err, &e)
			return &Error{Code: e.Code, Reason: fmt.Sprintf("certificate %d holds %s", i+1, e.Reason)}
		}
	}
	return nil
}

// ParsePrivateKeyPEM reads one PEM private key in the encodings openssl
// writes, PKCS #8 ("PRIVATE KEY"), PKCS #1 ("RSA PRIVATE KEY") and SEC 1
// ("EC PRIVATE KEY"), with nothing but space around it, and checks it by
// Check: ErrNotPEM, ErrUnparsable or an *Error when it is not one that is
// accepted. Every private key a merchant gives is read by it, when it is
// given and again when a stored one is used.
func ParsePrivateKeyPEM(s []byte) (any, error) {
	block, rest := pem.Decode(s)
	if block == nil || len(bytes.TrimSpace(rest)) != 0 {
		return nil, ErrNotPEM
	}
	if len(block.Bytes) > maxPrivateKeyDER {
		return nil, &Error{Code: CodeKeySize, Reason: fmt.Sprintf("a private key of more than %d bytes; an RSA key of at most %d bits is accepted", maxPrivateKeyDER, MaxRSABits)}
	}
	if block.Type != "PRIVATE KEY" && block.Type != "RSA PRIVATE KEY" && block.Type != "EC PRIVATE KEY" {
		return nil, ErrNotPEM
	}
	// Each encoding whatever the block says, as crypto/tls reads a key:
	// a label that does not match its DER is a common slip.
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		if key, err = x509.ParsePKCS1PrivateKey(block.Bytes); err != nil {
			if key, err = x509.ParseECPrivateKey(block.Bytes); err != nil {
				return nil, ErrUnparsable
			}
		}
	}
	if err := Check(key); err != nil {
		return nil, err
	}
	return key, nil
}

// Fault is err, a refusal of this package's rules, as the fault of param: what is
// wrong with the key in words that never quote it, under the bound's code
// (key_size, key_type, certificate_chain_too_long) or pem_invalid and
// private_key_invalid; nil for nil.
func Fault(param string, err error) error {
	var bound *Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &bound):
		return invalid.Value(param, bound.Code, param+" holds "+bound.Reason+".")
	case errors.Is(err, ErrUnparsable):
		return invalid.Value(param, "private_key_invalid", param+" holds a private key that cannot be parsed.")
	default:
		return invalid.Value(param, "pem_invalid", param+" must be one PEM private key (-----BEGIN PRIVATE KEY-----, RSA or EC).")
	}
}
