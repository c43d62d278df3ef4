package signer_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/webhookd/webhookd/receiver"
	"github.com/webhookd/webhookd/receiver/jwe"
	"github.com/webhookd/webhookd/signer"
)

// Signing a delivery: the header value carries one signature per active key.
func ExampleSign() {
	key, err := signer.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		panic(err)
	}
	sig := signer.Sign("msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`), key)
	fmt.Println(sig)
	// Output: v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=
}

// Signing a request as the engine does: package receiver, where the rules
// live, verifies it.
func ExampleSetHeaders() {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	key, err := signer.ParseSecret(secret)
	if err != nil {
		panic(err)
	}
	signedAt := time.Unix(1614265330, 0)
	body := []byte(`{"test": 2432232314}`)
	req := httptest.NewRequest(http.MethodPost, "/webhooks", bytes.NewReader(body))
	signer.SetHeaders(req.Header, "msg_p5jXN8AQM9LWM0D4loKWxJek", signedAt, body, key)
	fmt.Println(req.Header.Get(signer.HeaderSignature))

	v, err := receiver.NewVerifier(receiver.VerifierConfig{
		Secrets: []string{secret},
		Now:     func() time.Time { return signedAt.Add(time.Minute) }, // a real receiver leaves the clock nil
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(v.Verify(req.Header, body))
	// Output:
	// v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=
	// <nil>
}

// Rotating a secret: the store inserts Rotation.New and applies every Expiry
// in one transaction; Active then yields the keys to sign with.
func ExampleRotate() {
	t0 := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	secrets := []signer.Secret{{ID: 1, Value: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", CreatedAt: t0}}

	now := t0.Add(time.Hour)
	r, err := signer.Rotate(secrets, now, "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD")
	if err != nil {
		panic(err)
	}
	for _, e := range r.Expire {
		fmt.Printf("secret %d expires at %s\n", e.ID, e.ExpiresAt.Format(time.RFC3339))
	}
	secrets = r.Apply(secrets, 2)
	for _, s := range signer.Active(secrets, now) {
		fmt.Printf("active: secret %d\n", s.ID)
	}
	// Output:
	// secret 1 expires at 2026-05-02T10:00:00Z
	// active: secret 2
	// active: secret 1
}

// Encrypting a delivery as the engine does for a subscription with
// encryption: encrypt the envelope to the merchant's public JWK, send the
// JWE with content-type application/jose, and sign the JWE, the body as
// sent. The merchant's receiver verifies, then decrypts (package
// receiver/jwe).
func ExampleEncryptionKey_Encrypt() {
	// The merchant's key pair; webhookd only ever sees the public JWK.
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	publicJWK, err := jwe.PublicJWK(priv, "2026-11")
	if err != nil {
		panic(err)
	}

	encryptTo, err := signer.ParseEncryptionKey(publicJWK) // at subscription create
	if err != nil {
		panic(err) // 400 parameter_invalid, encryption.public_key
	}
	fmt.Println(encryptTo.Algorithm(), encryptTo.KeyID())

	envelope := []byte(`{"id":"msg_p5jXN8AQM9LWM0D4loKWxJek","type":"ping.test"}`)
	body, err := encryptTo.Encrypt(envelope) // at each attempt
	if err != nil {
		panic(err)
	}
	key, err := signer.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		panic(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/webhooks", bytes.NewReader(body))
	req.Header.Set("Content-Type", signer.ContentTypeJWE)
	signer.SetHeaders(req.Header, "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Now(), body, key)

	// The merchant's side.
	v, err := receiver.NewVerifier(receiver.VerifierConfig{Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}})
	if err != nil {
		panic(err)
	}
	d, err := jwe.New(jwe.Config{Keys: []crypto.PrivateKey{priv}})
	if err != nil {
		panic(err)
	}
	fmt.Println(v.Verify(req.Header, body))
	plain, err := d.Decrypt(body)
	fmt.Println(string(plain), err)
	// Output:
	// ECDH-ES+A256KW 2026-11
	// <nil>
	// {"id":"msg_p5jXN8AQM9LWM0D4loKWxJek","type":"ping.test"} <nil>
}

// Signing with an Ed25519 key, a subscription's "whsk_" secret when its
// signature_scheme is ed25519: the value is "v1a," and the merchant
// verifies with the public key, which PublicKeyOf derives.
func ExampleSignWith() {
	const secret = "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg=="
	key, err := signer.ParseSigningKey(secret)
	if err != nil {
		panic(err)
	}
	fmt.Println(key)
	fmt.Println(signer.SignWith("msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`), key))
	fmt.Println(signer.PublicKeyOf(secret))
	// Output:
	// SigningKey(ed25519, redacted)
	// v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg==
	// whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4= <nil>
}

// A new ed25519 subscription: the private key is stored (sealed) like a
// "whsec_" secret; the public key is what the merchant is shown.
func ExampleNewSigningKeyPair() {
	privateKey, publicKey, err := signer.NewSigningKeyPair()
	if err != nil {
		panic(err)
	}
	scheme, _ := signer.SchemeOf(privateKey)
	fmt.Println(scheme, publicKey[:len(signer.PublicKeyPrefix)])
	// Output: ed25519 whpk_
}
