package subscriptions_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/signer"
)

// TestEd25519Subscription: an ed25519 subscription stores a whsk_ key and
// shows its whpk_ public key (create, rotate, reveal), both public keys
// during a rotation's overlap and only the new one after; its scheme
// cannot be changed by an update.
func TestEd25519Subscription(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg, st := registry(t, subscriptions.Rules{EventTypes: catalogue()}, "m_ed")
	sub, first, err := reg.Create(ctx, "m_ed", subscriptions.Draft{URL: ptr("https://example.com/h"), Events: []string{"*"},
		SignatureScheme: ptr("ed25519")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first, "whpk_") || subscriptions.SignatureScheme(sub) != "ed25519" ||
		!slices.Equal(reg.SigningPublicKeys(sub), []string{first}) {
		t.Fatalf("create: shown %.10s…, scheme %q, keys %v", first, sub.SignatureScheme, reg.SigningPublicKeys(sub))
	}
	stored, err := st.Subscriptions.SigningSecrets(ctx, sub.ID)
	if err != nil || len(stored) != 1 {
		t.Fatalf("stored secrets: %d, %v", len(stored), err)
	}
	sealer, err := signer.NewSealer(masterKey())
	if err != nil {
		t.Fatal(err)
	}
	private, err := sealer.Open(stored[0].Ciphertext)
	if err != nil {
		t.Fatal(err)
	}
	if pub, err := signer.PublicKeyOf(private); err != nil || pub != first {
		t.Fatalf("the stored key's public key is not the one shown (%v)", err)
	}

	rotated, second, err := reg.RotateSecret(ctx, "m_ed", sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if !strings.HasPrefix(second, "whpk_") || !slices.Equal(subscriptions.SigningPublicKeys(rotated, now), []string{second, first}) {
		t.Fatalf("rotate: shown %.10s…, keys %v", second, subscriptions.SigningPublicKeys(rotated, now))
	}
	if got := subscriptions.SigningPublicKeys(rotated, now.Add(signer.RotationOverlap+time.Minute)); !slices.Equal(got, []string{second}) {
		t.Fatalf("after the overlap: keys %v, want the new one alone", got)
	}
	revealed, err := subscriptions.NewSecretRevealer(st.Subscriptions, masterKey(), time.Now).Reveal(ctx, "m_ed", sub.ID)
	if err != nil || revealed.Secret != second || revealed.PreviousExpiresAt == nil {
		t.Fatalf("reveal: %.10s…, %v", revealed.Secret, err)
	}

	if _, err := reg.Update(ctx, "m_ed", sub.ID, subscriptions.Change{SignatureScheme: ptr("ed25519")}); err != nil {
		t.Fatalf("update repeating the scheme: %v", err)
	}
	_, err = reg.Update(ctx, "m_ed", sub.ID, subscriptions.Change{SignatureScheme: ptr("hmac_sha256")})
	wantBroken(t, err, invalid.Error{Param: "signature_scheme", Rule: "signature_scheme_immutable", Message: "cannot be changed"})
	_, err = reg.Update(ctx, "m_ed", sub.ID, subscriptions.Change{SignatureScheme: ptr("rsa")})
	wantBroken(t, err, invalid.Error{Param: "signature_scheme", Rule: "signature_scheme_unknown", Message: "not a signature scheme"})
}

// TestEncryptionKey: a subscription's encryption key is checked (a private
// key is refused naming encryption.public_key), kept as a public JWK, and
// described with its kid, thumbprint and algorithms; an update removes it.
func TestEncryptionKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg, _ := registry(t, subscriptions.Rules{EventTypes: catalogue()}, "m_enc")
	ec, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	private, err := jose.JSONWebKey{Key: ec, KeyID: "k1"}.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	public, err := jose.JSONWebKey{Key: &ec.PublicKey, KeyID: "k1"}.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = reg.Create(ctx, "m_enc", subscriptions.Draft{URL: ptr("https://example.com/h"), Events: []string{"*"}, Encryption: private})
	wantBroken(t, err, invalid.Error{Param: "encryption.public_key", Rule: "encryption_key_invalid", Message: "a private key"})

	sub, _, err := reg.Create(ctx, "m_enc", subscriptions.Draft{URL: ptr("https://example.com/h"), Events: []string{"*"}, Encryption: public})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := subscriptions.EncryptionOf(sub)
	if err != nil || enc == nil {
		t.Fatalf("EncryptionOf: %+v, %v", enc, err)
	}
	if enc.KeyID != "k1" || enc.Algorithm != "ECDH-ES+A256KW" || enc.ContentEncryption != "A256GCM" || enc.Thumbprint == "" ||
		strings.Contains(string(enc.PublicKey), `"d"`) {
		t.Fatalf("encryption %+v (%s)", enc, enc.PublicKey)
	}
	sub, err = reg.Update(ctx, "m_enc", sub.ID, subscriptions.Change{SetEncryption: true})
	if err != nil {
		t.Fatal(err)
	}
	if enc, err := subscriptions.EncryptionOf(sub); err != nil || enc != nil {
		t.Fatalf("after removal: %+v, %v", enc, err)
	}
}
