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
	rsa2048, rsa1024 := rsaKey(t, 2048), rsaKey(t, 1024)
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

// TestParsePrivateKeyPEM: one PEM private key in any of the three
// encodings, bounded by Check; a larger one is refused before it is
// parsed; anything else is ErrNotPEM or ErrUnparsable.
func TestParsePrivateKeyPEM(t *testing.T) {
	t.Parallel()
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	sec1, _ := x509.MarshalECPrivateKey(p384)
	rsa2048, rsa1024 := rsaKey(t, 2048), rsaKey(t, 1024)
	encode := func(typ string, der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}) }
	huge := encode("RSA PRIVATE KEY", make([]byte, 60<<10))
	for _, tc := range []struct {
		name string
		pem  []byte
		want error // nil accepted
		code string
	}{
		{"SEC 1 P-384", encode("EC PRIVATE KEY", sec1), nil, ""},
		{"PKCS #1 RSA 2048", encode("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsa2048)), nil, ""},
		{"PKCS #8 RSA 4608", read(t, "testdata/rsa4608.pem"), keybounds.ErrKeyNotAccepted, keybounds.CodeKeySize},
		{"PKCS #1 RSA 1024", encode("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsa1024)), keybounds.ErrKeyNotAccepted, keybounds.CodeKeySize},
		{"60 KiB of DER", huge, keybounds.ErrKeyNotAccepted, keybounds.CodeKeySize},
		{"a certificate", read(t, "testdata/rsa4608.crt"), keybounds.ErrNotPEM, ""},
		{"two keys", append(encode("EC PRIVATE KEY", sec1), encode("EC PRIVATE KEY", sec1)...), keybounds.ErrNotPEM, ""},
		{"not PEM", []byte("MIIEvQIBADANBg"), keybounds.ErrNotPEM, ""},
		{"garbage DER", encode("PRIVATE KEY", []byte{0x30, 0x03, 0x02, 0x01, 0x00}), keybounds.ErrUnparsable, ""},
	} {
		_, err := keybounds.ParsePrivateKeyPEM(tc.pem)
		var e *keybounds.Error
		switch {
		case tc.want == nil && err != nil, tc.want != nil && !errors.Is(err, tc.want),
			tc.code != "" && (!errors.As(err, &e) || e.Code != tc.code):
			t.Errorf("%s: ParsePrivateKeyPEM = %v, want %v %s", tc.name, err, tc.want, tc.code)
		}
	}
}

// rsaKey is a new RSA key of bits.
func rsaKey(t *testing.T, bits int) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
