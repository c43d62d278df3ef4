package signer_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/webhookd/webhookd/receiver"
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
