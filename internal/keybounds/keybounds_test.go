package keybounds_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"testing"

	"github.com/webhookd/webhookd/internal/keybounds"
)

// TestCheck: RSA from 2048 to 4096 bits, EC on the three NIST curves and
// Ed25519 are accepted, public or private; anything else is refused with
// the rule it breaks.
func TestCheck(t *testing.T) {
	t.Parallel()
	rsa2048, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsa1024, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	p521, _ := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	p224, _ := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	for _, tc := range []struct {
		name string
		key  any
		code string // "" accepted
	}{
		{"RSA 2048 private", rsa2048, ""},
		{"RSA 2048 public", &rsa2048.PublicKey, ""},
		{"RSA 4608", oversized(t).Public(), keybounds.CodeKeySize},
		{"RSA 4608 private", oversized(t), keybounds.CodeKeySize},
		{"RSA 1024", rsa1024, keybounds.CodeKeySize},
		{"P-521", p521, ""},
		{"P-224", &p224.PublicKey, keybounds.CodeKeyType},
		{"Ed25519", ed, ""},
		{"Ed25519 public", ed.Public(), ""},
		{"a symmetric key", []byte("k"), keybounds.CodeKeyType},
		{"nil", nil, keybounds.CodeKeyType},
	} {
		err := keybounds.Check(tc.key)
		if tc.code == "" {
			if err != nil {
				t.Errorf("%s: Check = %v, want accepted", tc.name, err)
			}
			continue
		}
		var e *keybounds.Error
		if !errors.As(err, &e) || e.Code != tc.code || !errors.Is(err, keybounds.ErrKeyNotAccepted) {
			t.Errorf("%s: Check = %v, want a refusal %s", tc.name, err, tc.code)
		}
	}
}

// TestCheckChain: at most five certificates, each key bounded.
func TestCheckChain(t *testing.T) {
	t.Parallel()
	block, _ := pem.Decode(read(t, "testdata/rsa4608.crt"))
	big, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	small := &x509.Certificate{PublicKey: p256.Public()}
	six := []*x509.Certificate{small, small, small, small, small, small}
	for _, tc := range []struct {
		name  string
		chain []*x509.Certificate
		code  string
	}{
		{"one", six[:1], ""},
		{"five", six[:5], ""},
		{"six", six, keybounds.CodeChainTooLong},
		{"an oversized key second", []*x509.Certificate{small, big}, keybounds.CodeKeySize},
	} {
		err := keybounds.CheckChain(tc.chain)
		var e *keybounds.Error
		if (tc.code == "" && err != nil) || (tc.code != "" && (!errors.As(err, &e) || e.Code != tc.code)) {
			t.Errorf("%s: CheckChain = %v, want %q", tc.name, err, tc.code)
		}
	}
}

// oversized is the 4,608-bit RSA key of testdata (made once with openssl:
// generating one takes seconds).
func oversized(t *testing.T) crypto.Signer {
	t.Helper()
	block, _ := pem.Decode(read(t, "testdata/rsa4608.pem"))
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return k.(crypto.Signer)
}

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
