package signer_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/receiver"
	"github.com/webhookd/webhookd/signer"
)

func mustKeyPair(t testing.TB) (privateKey, publicKey string) {
	t.Helper()
	priv, pub, err := signer.NewSigningKeyPair()
	if err != nil {
		t.Fatalf("NewSigningKeyPair: %v", err)
	}
	return priv, pub
}

// TestNewSigningKeyPair checks the pair's format by hand and that
// crypto/ed25519, given only the public key's bytes, verifies what the
// private key signs over the specification's content.
func TestNewSigningKeyPair(t *testing.T) {
	priv, pub := mustKeyPair(t)
	priv2, pub2 := mustKeyPair(t)
	if priv == priv2 || pub == pub2 {
		t.Fatal("two NewSigningKeyPair calls returned the same key")
	}
	rawPriv, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(priv, "whsk_"))
	if !strings.HasPrefix(priv, "whsk_") || err != nil || len(rawPriv) != ed25519.PrivateKeySize {
		t.Fatalf("private key: prefix %v, %d bytes, %v; want whsk_ and 64 bytes", strings.HasPrefix(priv, "whsk_"), len(rawPriv), err)
	}
	rawPub, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(pub, "whpk_"))
	if !strings.HasPrefix(pub, "whpk_") || err != nil || len(rawPub) != ed25519.PublicKeySize {
		t.Fatalf("public key: prefix %v, %d bytes, %v; want whpk_ and 32 bytes", strings.HasPrefix(pub, "whpk_"), len(rawPub), err)
	}
	if got, err := signer.PublicKeyOf(priv); err != nil || got != pub {
		t.Errorf("PublicKeyOf = %q, %v; want %q", got, err, pub)
	}

	ts := time.Unix(1795000000, 0)
	body := []byte(`{"id":"evt_1"}`)
	sig := signer.SignWith("evt_1", ts, body, mustSigningKey(t, priv))
	rawSig, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(sig, "v1a,"))
	if err != nil || !ed25519.Verify(rawPub, []byte("evt_1.1795000000."+string(body)), rawSig) {
		t.Fatalf("crypto/ed25519 does not verify %q with the public key (%v)", sig, err)
	}
}

func TestPublicKeyOf(t *testing.T) {
	if got, err := signer.PublicKeyOf(vectorPrivateKey); err != nil || got != vectorPublicKey {
		t.Errorf("PublicKeyOf(reference key) = %q, %v; want %q", got, err, vectorPublicKey)
	}
	for _, bad := range []string{vectorSecret, vectorPublicKey, "whsk_AAAA", ""} {
		if _, err := signer.PublicKeyOf(bad); !errors.Is(err, signer.ErrInvalidSecret) {
			t.Errorf("PublicKeyOf(%q) = %v, want ErrInvalidSecret", bad, err)
		}
	}
}

func TestNewSigningSecret(t *testing.T) {
	for _, scheme := range []signer.Scheme{signer.SchemeHMACSHA256, signer.SchemeEd25519} {
		t.Run(string(scheme), func(t *testing.T) {
			s, err := signer.NewSigningSecret(scheme)
			if err != nil {
				t.Fatal(err)
			}
			if got := mustSigningKey(t, s).Scheme(); got != scheme {
				t.Errorf("NewSigningSecret(%s) makes a %s key", scheme, got)
			}
		})
	}
	if _, err := signer.NewSigningSecret("rsa"); !errors.Is(err, signer.ErrUnknownScheme) {
		t.Errorf("NewSigningSecret(rsa) = %v, want ErrUnknownScheme", err)
	}
}

// TestSignedWithAKeyPairVerifiesInReceiver: what a pair's private key
// signs, package receiver accepts with the public key alone, and refuses
// with another pair's.
func TestSignedWithAKeyPairVerifiesInReceiver(t *testing.T) {
	priv, pub := mustKeyPair(t)
	_, otherPub := mustKeyPair(t)
	now := time.Unix(1795000000, 0)
	body := []byte(`{"id":"evt_1"}`)
	h := make(map[string][]string)
	signer.SetHeadersWith(h, "evt_1", now, body, mustSigningKey(t, priv))
	for _, tt := range []struct {
		name      string
		publicKey string
		want      error
	}{
		{"the pair's public key", pub, nil},
		{"another pair's public key", otherPub, receiver.ErrNoMatchingSignature},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, err := receiver.NewVerifier(receiver.VerifierConfig{PublicKeys: []string{tt.publicKey}, Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			if err := v.Verify(h, body); !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
				t.Errorf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}
