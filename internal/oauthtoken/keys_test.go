package oauthtoken_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"testing"
)

// newKey makes a private key of kind ("rsa2048", "p256", "p384", ...) and
// returns it as PKCS #8 PEM with its public key.
func newKey(t *testing.T, kind string) (pemKey string, public crypto.PublicKey) {
	t.Helper()
	var key crypto.Signer
	var err error
	switch kind {
	case "rsa1024":
		key, err = rsa.GenerateKey(rand.Reader, 1024)
	case "rsa2048":
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	case "p256":
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "p384":
		key, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "p521":
		key, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	default:
		t.Fatalf("no key kind %q", kind)
	}
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), key.Public()
}
