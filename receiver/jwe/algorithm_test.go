package jwe_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/webhookd/webhookd/receiver/jwe"
)

func TestAlgorithm(t *testing.T) {
	t.Parallel()
	keys := newKeys(t)
	ecKey := func(c elliptic.Curve) *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(c, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	p384, p521, p224 := ecKey(elliptic.P384()), ecKey(elliptic.P521()), ecKey(elliptic.P224())
	small := &rsa.PublicKey{N: new(big.Int).SetBit(big.NewInt(1), 2046, 1), E: 65537}
	edPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		key  any
		alg  jose.KeyAlgorithm
		says string // for a refused key
	}{
		{"RSA private key", keys.rsa, jwe.RSAOAEP256, ""},
		{"RSA public key", &keys.rsa.PublicKey, jwe.RSAOAEP256, ""},
		{"P-256 private key", keys.ec, jwe.ECDHESA256KW, ""},
		{"P-256 public key", &keys.ec.PublicKey, jwe.ECDHESA256KW, ""},
		{"P-384", &p384.PublicKey, jwe.ECDHESA256KW, ""},
		{"P-521", p521, jwe.ECDHESA256KW, ""},
		{"RSA of 2047 bits", small, "", "RSA key of 2047 bits, at least 2048 needed"},
		{"P-224", p224, "", "EC curve P-224"},
		{"symmetric", []byte("0123456789abcdef0123456789abcdef"), "", "a symmetric key"},
		{"Ed25519", edPub, "", "key type ed25519.PublicKey"},
		{"nil", nil, "", "key type <nil>"},
	} {
		alg, err := jwe.Algorithm(tc.key)
		if tc.says == "" {
			if err != nil || alg != tc.alg {
				t.Errorf("%s: Algorithm = %q, %v; want %q", tc.name, alg, err, tc.alg)
			}
			continue
		}
		if !errors.Is(err, jwe.ErrKeyNotAccepted) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: err = %v, want ErrKeyNotAccepted saying %q", tc.name, err, tc.says)
		}
	}
}
