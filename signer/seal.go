package signer

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
)

// MasterKeySize is the length of WEBHOOKD_MASTER_KEY once base64-decoded.
const MasterKeySize = 32

// sealVersion is the first byte of every sealed secret. It names the key
// derivation and cipher, so that a later change of either can still open
// what was sealed before.
const sealVersion byte = 1

// sealInfo separates the sealing key from the other uses of the master key
// (cursor signing): the master key is never used directly as an AES key.
const sealInfo = "webhookd signing-secret sealing v1"

// sealAAD binds a ciphertext to its purpose: a blob sealed for something
// else under the same derived key would not open as a signing secret.
var sealAAD = []byte("webhookd signing secret")

// ErrSealed reports a ciphertext that cannot be opened: truncated, tampered
// with, or sealed under another master key. It never carries the secret.
var ErrSealed = errors.New("signer: cannot open sealed secret")

// Sealer encrypts signing secrets at rest with AES-256-GCM under a key
// derived from the master key. Each Seal draws a fresh random 96-bit nonce;
// with well under 2^32 secrets per master key the nonce collision risk is
// negligible. A Sealer is safe for concurrent use.
type Sealer struct {
	aead cipher.AEAD
}

// NewSealer derives the sealing key from the 32-byte master key.
func NewSealer(masterKey []byte) (*Sealer, error) {
	if len(masterKey) != MasterKeySize {
		return nil, fmt.Errorf("signer: master key must be %d bytes, got %d", MasterKeySize, len(masterKey))
	}
	key, err := hkdf.Key(sha256.New, masterKey, nil, sealInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("signer: derive sealing key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("signer: sealing cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("signer: sealing cipher: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

// Seal encrypts secret. The result is version byte || nonce || ciphertext
// with its tag, ready to be stored as bytes.
func (s *Sealer) Seal(secret string) ([]byte, error) {
	out := make([]byte, 1+s.aead.NonceSize(), 1+s.aead.NonceSize()+len(secret)+s.aead.Overhead())
	out[0] = sealVersion
	if _, err := rand.Read(out[1:]); err != nil {
		return nil, fmt.Errorf("signer: seal nonce: %w", err)
	}
	return s.aead.Seal(out, out[1:], []byte(secret), sealAAD), nil
}

// Open decrypts what Seal produced. Any failure is ErrSealed, without
// detail that could help an attacker or leak into logs.
func (s *Sealer) Open(ciphertext []byte) (string, error) {
	n := s.aead.NonceSize()
	if len(ciphertext) < 1+n+s.aead.Overhead() || ciphertext[0] != sealVersion {
		return "", ErrSealed
	}
	plain, err := s.aead.Open(nil, ciphertext[1:1+n], ciphertext[1+n:], sealAAD)
	if err != nil {
		return "", ErrSealed
	}
	return string(plain), nil
}

// String keeps a Sealer printed by mistake from showing anything.
func (s *Sealer) String() string { return "signer.Sealer(redacted)" }
