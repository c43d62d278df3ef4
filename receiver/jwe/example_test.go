package jwe_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/webhookd/webhookd/receiver"
	"github.com/webhookd/webhookd/receiver/jwe"
)

// An endpoint for a subscription with encryption: the receiver verifies
// the signature over the JWE as sent, then decrypts it with the merchant's
// private key, then decodes and handles the event.
func Example() {
	// In production the key is read from where the endpoint keeps its
	// secrets (x509.ParsePKCS8PrivateKey of a PEM, or ParsePrivateJWK);
	// PublicJWK is what to give webhookd as encryption.public_key.
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := jwe.PublicJWK(priv, "2026-11"); err != nil {
		log.Fatal(err)
	}

	verifier, err := receiver.NewVerifier(receiver.VerifierConfig{Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}})
	if err != nil {
		log.Fatal(err)
	}
	decrypter, err := jwe.New(jwe.Config{Keys: []crypto.PrivateKey{priv}})
	if err != nil {
		log.Fatal(err)
	}
	endpoint, err := receiver.New(receiver.Config{
		Verifier:  verifier,
		Decrypter: decrypter,
		Handler: receiver.HandlerFunc(func(ctx context.Context, ev *receiver.Event) error {
			fmt.Println(ev.Type) // the decrypted envelope
			return nil
		}),
	})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(endpoint) // http.Handle("POST /webhooks/webhookd", endpoint) in production
	defer srv.Close()

	// A delivery as webhookd sends it: the envelope encrypted to the
	// public key, then signed as sent.
	enc, err := jose.NewEncrypter(jwe.ContentEncryption, jose.Recipient{Algorithm: jwe.ECDHESA256KW, Key: &priv.PublicKey, KeyID: "2026-11"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	obj, err := enc.Encrypt([]byte(envelope))
	if err != nil {
		log.Fatal(err)
	}
	body, err := obj.CompactSerialize()
	if err != nil {
		log.Fatal(err)
	}
	key, err := receiver.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		log.Fatal(err)
	}
	ts := receiver.FormatTimestamp(time.Now())
	req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
	if err != nil {
		log.Fatal(err)
	}
	req.Header.Set("content-type", jwe.ContentType)
	req.Header.Set(receiver.HeaderID, eventID)
	req.Header.Set(receiver.HeaderTimestamp, ts)
	req.Header.Set(receiver.HeaderSignature, receiver.Signature(eventID, ts, []byte(body), key))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println(resp.Status)
	// Output:
	// payout.paid
	// 200 OK
}
