package deliver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/receiver"
	"github.com/webhookd/webhookd/signer"
)

// TestSendSigningSchemesAndEncryption: the sender signs with keys of
// either scheme (one value each, in order) and, given an encryption key,
// sends the JWE of the body as application/jose, signed as sent.
func TestSendSigningSchemesAndEncryption(t *testing.T) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwk, err := jose.JSONWebKey{Key: &ec.PublicKey, KeyID: "k1"}.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	enc, err := signer.ParseEncryptionKey(jwk)
	if err != nil {
		t.Fatal(err)
	}
	private, public, err := signer.NewSigningKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	secret, err := signer.NewSigningSecret(signer.SchemeHMACSHA256)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := signer.SigningKeys([]signer.Secret{{Value: private}, {Value: secret}})
	if err != nil {
		t.Fatal(err)
	}
	type received struct {
		header http.Header
		body   []byte
	}
	got := make(chan received, 1)
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- received{r.Header.Clone(), b}
	}))
	defer endpoint.Close()
	snd, err := NewSender(SenderConfig{Timeout: 2 * time.Second, AllowHTTP: true, AllowPrivate: true,
		MaxConns: 4, MaxConnsPerHost: 1, Version: "test"}, clock.System{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"evt_1","type":"payout.paid"}`)
	for _, tc := range []struct {
		name        string
		sig         Signing
		contentType string
	}{
		{"clear", Signing{Keys: keys}, "application/json"},
		{"encrypted", Signing{Keys: keys, Encryption: enc}, "application/jose"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := snd.Send(context.Background(), Request{Target: endpoint.URL, EventID: "evt_1", Body: body, Signing: tc.sig})
			if err != nil || !res.OK() {
				t.Fatalf("send = %v, %v", res.ErrCode, err)
			}
			r := <-got
			if ct := r.header.Get("Content-Type"); ct != tc.contentType {
				t.Fatalf("content-type %q, want %q", ct, tc.contentType)
			}
			values := strings.Fields(r.header.Get("Webhook-Signature"))
			if len(values) != 2 || !strings.HasPrefix(values[0], "v1a,") || !strings.HasPrefix(values[1], "v1,") {
				t.Fatalf("signature %q, want a v1a then a v1 value", r.header.Get("Webhook-Signature"))
			}
			for _, cfg := range []receiver.VerifierConfig{{PublicKeys: []string{public}}, {Secrets: []string{secret}}} {
				v, err := receiver.NewVerifier(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if err := v.Verify(r.header, r.body); err != nil {
					t.Fatalf("verify the body as sent: %v", err)
				}
			}
			plain := r.body
			if tc.sig.Encryption != nil {
				obj, err := jose.ParseEncrypted(string(r.body), []jose.KeyAlgorithm{jose.ECDH_ES_A256KW}, []jose.ContentEncryption{jose.A256GCM})
				if err != nil {
					t.Fatal(err)
				}
				if plain, err = obj.Decrypt(ec); err != nil {
					t.Fatal(err)
				}
			}
			if string(plain) != string(body) {
				t.Fatalf("body %s, want %s", plain, body)
			}
		})
	}
}
