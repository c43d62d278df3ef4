package jwe

import (
	"bytes"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/go-jose/go-jose/v4"
)

// Errors of [Decrypter.Decrypt]. None carries plaintext or key material.
var (
	// ErrMalformed reports a body that is not a compact JWE.
	ErrMalformed = errors.New("jwe: body is not a compact JWE")
	// ErrAlgorithmRefused reports a JWE whose header asks for an algorithm
	// or feature outside the package's rules ("none", RSA1_5, direct
	// ECDH-ES, another enc, compression, critical extensions).
	ErrAlgorithmRefused = errors.New("jwe: algorithm refused")
	// ErrUndecryptable reports a JWE that none of the keys decrypts: it
	// was encrypted to another key, or altered on the way.
	ErrUndecryptable = errors.New("jwe: cannot decrypt body")
)

// Config configures a [Decrypter].
type Config struct {
	// Keys are the merchant's private keys: *rsa.PrivateKey,
	// *ecdsa.PrivateKey, or a private jose.JSONWebKey (by value or
	// pointer, as from [ParsePrivateJWK]), whose kid picks it for JWEs
	// that name it. Give two while replacing the key pair: the new one,
	// and the old one until webhookd's retries to it are over. At least
	// one is required.
	Keys []crypto.PrivateKey
	// AllowPlaintext passes a body that is a JSON object rather than a
	// JWE through unchanged. Set it while turning encryption on (deploy
	// the receiver first, then give webhookd the public key), and unset
	// it afterwards: the signature still proves where a plaintext body
	// came from, but not that nobody on the way read it.
	AllowPlaintext bool
}

// Decrypter decrypts the compact JWE bodies of webhookd's deliveries. It is
// safe for concurrent use, and satisfies receiver.Decrypter.
type Decrypter struct {
	keys           []decryptionKey
	allowPlaintext bool
}

// decryptionKey is one private key with what picks it for a JWE.
type decryptionKey struct {
	id  string
	alg jose.KeyAlgorithm
	key crypto.PrivateKey
}

// New returns a Decrypter for cfg, refusing public, symmetric or
// unaccepted keys with an error that names the key by position.
func New(cfg Config) (*Decrypter, error) {
	if len(cfg.Keys) == 0 {
		return nil, errors.New("jwe: Config.Keys needs at least one private key")
	}
	d := &Decrypter{allowPlaintext: cfg.AllowPlaintext}
	for i, k := range cfg.Keys {
		dk, err := newDecryptionKey(k)
		if err != nil {
			return nil, fmt.Errorf("jwe: Config.Keys[%d]: %w", i, err)
		}
		d.keys = append(d.keys, dk)
	}
	return d, nil
}

// newDecryptionKey unwraps a JWK and checks that key is a private key of
// an accepted kind.
func newDecryptionKey(key crypto.PrivateKey) (decryptionKey, error) {
	var id string
	switch k := key.(type) {
	case jose.JSONWebKey:
		id, key = k.KeyID, k.Key
	case *jose.JSONWebKey:
		id, key = k.KeyID, k.Key
	}
	if _, ok := key.(privateKey); !ok {
		if _, err := Algorithm(key); err != nil {
			return decryptionKey{}, err
		}
		return decryptionKey{}, fmt.Errorf("%w: a public key; decrypting needs the private key", ErrKeyNotAccepted)
	}
	alg, err := Algorithm(key)
	if err != nil {
		return decryptionKey{}, err
	}
	return decryptionKey{id: id, alg: alg, key: key}, nil
}

// Decrypt returns the plaintext of body, a compact JWE made by webhookd's
// rules with the public half of one of the keys. Call it only on a body
// whose signature verified (see the package documentation for why).
func (d *Decrypter) Decrypt(body []byte) ([]byte, error) {
	if d.allowPlaintext && bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("{")) {
		return body, nil
	}
	h, err := readHeader(body)
	if err != nil {
		return nil, err
	}
	obj, err := jose.ParseEncryptedCompact(string(bytes.TrimSpace(body)),
		[]jose.KeyAlgorithm{RSAOAEP256, ECDHESA256KW}, []jose.ContentEncryption{ContentEncryption})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	for _, k := range d.candidates(h) {
		if plain, err := obj.Decrypt(k.key); err == nil {
			return plain, nil
		}
	}
	return nil, fmt.Errorf("%w: encrypted to another key, or altered (alg %s, kid %.40q)", ErrUndecryptable, h.Alg, h.Kid)
}

// candidates are the keys that can unwrap a JWE with header h: those of its
// algorithm, the one its kid names first.
func (d *Decrypter) candidates(h header) []decryptionKey {
	var named, others []decryptionKey
	for _, k := range d.keys {
		switch {
		case k.alg != jose.KeyAlgorithm(h.Alg):
		case h.Kid != "" && k.id == h.Kid:
			named = append(named, k)
		default:
			others = append(others, k)
		}
	}
	return append(named, others...)
}

// privateKey is what private keys have and public keys lack.
type privateKey interface{ Public() crypto.PublicKey }

// header is the part of a JWE's protected header the rules look at.
type header struct {
	Alg  string          `json:"alg"`
	Enc  string          `json:"enc"`
	Kid  string          `json:"kid"`
	Zip  string          `json:"zip"`
	Crit json.RawMessage `json:"crit"`
}

// readHeader decodes body's protected header and refuses what the rules do
// not allow, before go-jose parses the rest: its own checks would refuse
// the same, but without saying which rule.
func readHeader(body []byte) (header, error) {
	first, _, ok := strings.Cut(string(bytes.TrimSpace(body)), ".")
	if !ok {
		return header{}, ErrMalformed
	}
	raw, err := base64.RawURLEncoding.DecodeString(first)
	if err != nil {
		return header{}, fmt.Errorf("%w: protected header: %w", ErrMalformed, err)
	}
	var h header
	if err := json.Unmarshal(raw, &h); err != nil {
		return header{}, fmt.Errorf("%w: protected header: %w", ErrMalformed, err)
	}
	switch {
	case h.Alg != string(RSAOAEP256) && h.Alg != string(ECDHESA256KW):
		return header{}, fmt.Errorf("%w: alg %.40q, only %s and %s are accepted", ErrAlgorithmRefused, h.Alg, RSAOAEP256, ECDHESA256KW)
	case h.Enc != string(ContentEncryption):
		return header{}, fmt.Errorf("%w: enc %.40q, only %s is accepted", ErrAlgorithmRefused, h.Enc, ContentEncryption)
	case h.Zip != "":
		return header{}, fmt.Errorf("%w: compressed content (zip %.40q)", ErrAlgorithmRefused, h.Zip)
	case len(h.Crit) > 0:
		return header{}, fmt.Errorf("%w: critical header extensions", ErrAlgorithmRefused)
	}
	return h, nil
}
