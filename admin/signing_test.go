package admin_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/webhookd/webhookd/internal/testfixtures/testpki"
	"github.com/webhookd/webhookd/receiver"
	"github.com/webhookd/webhookd/receiver/jwe"
)

// signed is how a subscription's deliveries are signed and encrypted, as a
// client decodes its read.
type signed struct {
	ID                string   `json:"id"`
	Secret            string   `json:"secret"`
	SignatureScheme   string   `json:"signature_scheme"`
	SigningPublicKey  *string  `json:"signing_public_key"`
	SigningPublicKeys []string `json:"signing_public_keys"`
	Encryption        *struct {
		PublicKey  map[string]any `json:"public_key"`
		KeyID      string         `json:"kid"`
		Thumbprint string         `json:"thumbprint"`
		Alg        string         `json:"alg"`
		Enc        string         `json:"enc"`
	} `json:"encryption"`
}

// verifyEd25519 checks every value of a delivery's webhook-signature with
// crypto/ed25519 alone, over "id.timestamp.body", and returns the public
// keys (of keys) that signed, in the header's order: each value must be
// "v1a," and verify with one of them.
func verifyEd25519(t *testing.T, hook receivedHook, keys ...string) []string {
	t.Helper()
	content := []byte(hook.Header.Get("webhook-id") + "." + hook.Header.Get("webhook-timestamp") + ".")
	content = append(content, hook.Body...)
	var signers []string
	for _, v := range strings.Fields(hook.Header.Get("webhook-signature")) {
		b64, ok := strings.CutPrefix(v, "v1a,")
		if !ok {
			t.Fatalf("signature value %q is not v1a", v)
		}
		sig, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			t.Fatalf("signature value %q: %v", v, err)
		}
		found := ""
		for _, k := range keys {
			pub, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(k, "whpk_"))
			if err != nil || len(pub) != ed25519.PublicKeySize {
				t.Fatalf("public key %q: %v", k, err)
			}
			if ed25519.Verify(ed25519.PublicKey(pub), content, sig) {
				found = k
			}
		}
		if found == "" {
			t.Fatalf("signature value %q verifies with none of %v", v, keys)
		}
		signers = append(signers, found)
	}
	return signers
}

// verifyWithReceiver checks a delivery with package receiver's Verifier
// holding the public keys.
func verifyWithReceiver(t *testing.T, hook receivedHook, keys ...string) {
	t.Helper()
	v, err := receiver.NewVerifier(receiver.VerifierConfig{PublicKeys: keys})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(hook.Header, hook.Body); err != nil {
		t.Fatalf("receiver refuses the delivery: %v", err)
	}
}

// TestEd25519DeliveriesVerifiedAndRotated: an ed25519 subscription shows
// its whpk_ public key at create, in every read and in the secret route,
// never its private key; each delivery (the first attempt, a test event,
// a redelivery, the endpoint check) carries one v1a signature verified by
// crypto/ed25519 over id.timestamp.body and by package receiver; after a
// rotation the read shows both keys and deliveries carry both signatures;
// the scheme cannot be changed by an update.
func TestEd25519DeliveriesVerifiedAndRotated(t *testing.T) {
	t.Parallel()
	h, _ := newPipelineHarness(t)
	key := h.merchant("m1")
	rcv := newHookReceiver(t, http.StatusNoContent)

	created := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
		Body: map[string]any{"url": rcv.URL, "events": []string{"*"}, "signature_scheme": "ed25519"}})
	if created.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.Status, created.Body)
	}
	sub := decode[signed](t, created)
	first := sub.Secret
	if !strings.HasPrefix(first, "whpk_") || sub.SignatureScheme != "ed25519" || sub.SigningPublicKey == nil ||
		*sub.SigningPublicKey != first || !slices.Equal(sub.SigningPublicKeys, []string{first}) {
		t.Fatalf("create shows %s", created.Body)
	}
	private := h.activeSecrets(sub.ID)
	if len(private) != 1 || !strings.HasPrefix(private[0], "whsk_") {
		t.Fatalf("stored secrets: %d, want one whsk_ key", len(private))
	}

	ev := h.publish("m1", "payout.paid", `{"id":"po_1"}`)
	d := h.deliveriesOf(key, ev.ID)[0]
	if got := h.waitDelivery(key, d.ID, "settled", settled); got.Status != "succeeded" {
		t.Fatalf("delivery: %+v", got)
	}
	hooks := rcv.requests()
	if signers := verifyEd25519(t, hooks[0], first); len(signers) != 1 {
		t.Fatalf("%d signatures, want 1", len(signers))
	}
	verifyWithReceiver(t, hooks[0], first)

	test := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID + "/send_test_event", Key: key})
	if test.Status != http.StatusAccepted {
		t.Fatalf("send_test_event: %d %s", test.Status, test.Body)
	}
	h.waitDelivery(key, decode[delivery](t, test).ID, "settled", settled)
	if r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_deliveries/" + d.ID + "/redeliver", Key: key}); r.Status != http.StatusAccepted {
		t.Fatalf("redeliver: %d %s", r.Status, r.Body)
	}
	h.waitDelivery(key, d.ID, "redelivered", hasAttempts(2))
	hooks = rcv.requests()
	if len(hooks) != 3 {
		t.Fatalf("%d requests, want the delivery, the test event and the redelivery", len(hooks))
	}
	for _, hook := range hooks[1:] {
		verifyEd25519(t, hook, first)
		verifyWithReceiver(t, hook, first)
	}

	// The check: package receiver's endpoint accepts the valid one and
	// refuses a v1a signature of a key it does not hold, and the stale one.
	verifier, err := receiver.NewVerifier(receiver.VerifierConfig{PublicKeys: []string{first}})
	if err != nil {
		t.Fatal(err)
	}
	checked := httptest.NewServer(mustReceiver(t, receiver.Config{Verifier: verifier}))
	t.Cleanup(checked.Close)
	if r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key,
		Body: map[string]any{"url": checked.URL}}); r.Status != http.StatusOK {
		t.Fatalf("point at the receiver: %d %s", r.Status, r.Body)
	}
	check := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID + "/check", Key: key})
	result := decode[struct {
		VerifiesSignatures bool `json:"verifies_signatures"`
	}](t, check)
	if check.Status != http.StatusOK || !result.VerifiesSignatures {
		t.Fatalf("check of an ed25519 receiver: %d %s", check.Status, check.Body)
	}
	if r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key,
		Body: map[string]any{"url": rcv.URL}}); r.Status != http.StatusOK {
		t.Fatalf("point back: %d %s", r.Status, r.Body)
	}

	// Rotation: a new key pair; both keys sign during the overlap.
	rotated := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID + "/rotate_secret", Key: key})
	if rotated.Status != http.StatusOK {
		t.Fatalf("rotate: %d %s", rotated.Status, rotated.Body)
	}
	after := decode[signed](t, rotated)
	second := after.Secret
	if !strings.HasPrefix(second, "whpk_") || second == first || !slices.Equal(after.SigningPublicKeys, []string{second, first}) ||
		*after.SigningPublicKey != second {
		t.Fatalf("rotate shows %s", rotated.Body)
	}
	read := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key})
	if got := decode[signed](t, read); !slices.Equal(got.SigningPublicKeys, []string{second, first}) || got.Secret != "" {
		t.Fatalf("read after rotation: %s", read.Body)
	}
	ev = h.publish("m1", "payout.paid", `{"id":"po_2"}`)
	h.waitDelivery(key, h.deliveriesOf(key, ev.ID)[0].ID, "settled", settled)
	hooks = rcv.requests()
	last := hooks[len(hooks)-1]
	if signers := verifyEd25519(t, last, first, second); !slices.Equal(signers, []string{second, first}) {
		t.Fatalf("after rotation signed by %v, want the new key then the old", signers)
	}
	verifyWithReceiver(t, last, first)
	verifyWithReceiver(t, last, second)

	revealed := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + sub.ID + "/secret", Key: key})
	if got := decode[struct {
		Secret string `json:"secret"`
	}](t, revealed); revealed.Status != http.StatusOK || got.Secret != second {
		t.Fatalf("secret route: %d %s", revealed.Status, revealed.Body)
	}

	for _, tc := range []struct {
		scheme string
		status int
	}{{"ed25519", http.StatusOK}, {"hmac_sha256", http.StatusBadRequest}} {
		r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key,
			Body: map[string]any{"signature_scheme": tc.scheme}})
		if r.Status != tc.status {
			t.Fatalf("update to %s: %d %s", tc.scheme, r.Status, r.Body)
		}
		if tc.status == http.StatusBadRequest {
			if m := expectError(t, r, tc.status, "parameter_invalid"); m["param"] != "signature_scheme" {
				t.Fatalf("update to %s names %v", tc.scheme, m["param"])
			}
		}
	}
}

// mustReceiver is package receiver's handler for cfg, its events
// acknowledged.
func mustReceiver(t *testing.T, cfg receiver.Config) *receiver.Receiver {
	t.Helper()
	if cfg.Handler == nil {
		cfg.Handler = receiver.HandlerFunc(func(ctx context.Context, ev *receiver.Event) error { return nil })
	}
	rc, err := receiver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// encryptionKeyPair is a merchant's key pair for encrypted payloads: the
// private key, and the public JWK given to webhookd.
type encryptionKeyPair struct {
	private crypto.PrivateKey
	jwk     map[string]any
}

func newEncryptionKeyPair(t *testing.T, kind string) encryptionKeyPair {
	t.Helper()
	var priv crypto.PrivateKey
	var pub any
	switch kind {
	case "RSA-2048":
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		priv, pub = k, &k.PublicKey
	case "P-256", "P-384":
		curve := elliptic.P256()
		if kind == "P-384" {
			curve = elliptic.P384()
		}
		k, err := ecdsa.GenerateKey(curve, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		priv, pub = k, &k.PublicKey
	default:
		t.Fatalf("no key pair %s", kind)
	}
	return encryptionKeyPair{private: priv, jwk: jwkOf(t, jose.JSONWebKey{Key: pub, KeyID: "key-" + kind})}
}

// jwkOf is k as a JSON object.
func jwkOf(t *testing.T, k jose.JSONWebKey) map[string]any {
	t.Helper()
	b, err := k.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestEncryptedDeliveries: a subscription with an encryption key gets each
// delivery's body as the compact JWE of the envelope (application/jose),
// signed as sent; go-jose decrypts it with the merchant's private key, and
// package receiver with receiver/jwe verifies then decrypts it; the event
// read still shows the plaintext; the read shows the public JWK, its kid,
// thumbprint and algorithms; null removes it.
func TestEncryptedDeliveries(t *testing.T) {
	t.Parallel()
	h, _ := newPipelineHarness(t)
	for _, tc := range []struct {
		kind, scheme, alg string
	}{
		{"RSA-2048", "hmac_sha256", "RSA-OAEP-256"},
		{"P-256", "ed25519", "ECDH-ES+A256KW"},
		{"P-384", "hmac_sha256", "ECDH-ES+A256KW"},
	} {
		t.Run(tc.kind+"/"+tc.scheme, func(t *testing.T) {
			h := h.with(t)
			merchant := "m-" + tc.kind // each case's events reach its subscription only
			key := h.merchant(merchant)
			pair := newEncryptionKeyPair(t, tc.kind)
			rcv := newHookReceiver(t, http.StatusNoContent)
			created := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
				Body: map[string]any{"url": rcv.URL, "events": []string{"payout.paid"}, "signature_scheme": tc.scheme,
					"encryption": map[string]any{"public_key": pair.jwk}}})
			if created.Status != http.StatusCreated {
				t.Fatalf("create: %d %s", created.Status, created.Body)
			}
			sub := decode[signed](t, created)
			if e := sub.Encryption; e == nil || e.KeyID != "key-"+tc.kind || e.Alg != tc.alg || e.Enc != "A256GCM" ||
				e.Thumbprint == "" || e.PublicKey["kty"] != pair.jwk["kty"] || e.PublicKey["d"] != nil {
				t.Fatalf("create shows encryption %s", created.Body)
			}
			verifier := verifierOf(t, sub)

			ev := h.publish(merchant, "payout.paid", `{"id":"po_`+tc.kind+`"}`)
			if got := h.waitDelivery(key, h.deliveriesOf(key, ev.ID)[0].ID, "settled", settled); got.Status != "succeeded" {
				t.Fatalf("delivery: %+v", got)
			}
			hook := rcv.requests()[0]
			if ct := hook.Header.Get("Content-Type"); ct != "application/jose" {
				t.Fatalf("content-type %q", ct)
			}
			// The payload's id, quoted: a quote is no character of base64url, so
			// a ciphertext cannot hold it by chance (po_ alone once did).
			if n := bytes.Count(hook.Body, []byte(".")); n != 4 || bytes.Contains(hook.Body, []byte(`"po_`)) {
				t.Fatalf("body is not a compact JWE: %.200s", hook.Body)
			}
			// The signature covers the body as sent.
			if err := verifier.Verify(hook.Header, hook.Body); err != nil {
				t.Fatalf("signature over the JWE: %v", err)
			}

			// go-jose directly.
			obj, err := jose.ParseEncrypted(string(hook.Body), []jose.KeyAlgorithm{jose.KeyAlgorithm(tc.alg)},
				[]jose.ContentEncryption{jose.A256GCM})
			if err != nil {
				t.Fatal(err)
			}
			if obj.Header.KeyID != "key-"+tc.kind {
				t.Fatalf("JWE kid %q", obj.Header.KeyID)
			}
			plain, err := obj.Decrypt(pair.private)
			if err != nil {
				t.Fatal(err)
			}
			var envelope struct {
				ID      string          `json:"id"`
				Payload json.RawMessage `json:"payload"`
			}
			if err := json.Unmarshal(plain, &envelope); err != nil || envelope.ID != ev.ID ||
				!bytes.Contains(envelope.Payload, []byte(`"po_`+tc.kind+`"`)) {
				t.Fatalf("decrypted envelope %s (%v)", plain, err)
			}

			// Package receiver with receiver/jwe.
			dec, err := jwe.New(jwe.Config{Keys: []crypto.PrivateKey{pair.private}})
			if err != nil {
				t.Fatal(err)
			}
			var handled *receiver.Event
			rc := mustReceiver(t, receiver.Config{Verifier: verifier, Decrypter: dec,
				Handler: receiver.HandlerFunc(func(_ context.Context, ev *receiver.Event) error { handled = ev; return nil })})
			req := httptest.NewRequest(http.MethodPost, "/hooks", bytes.NewReader(hook.Body))
			req.Header = hook.Header.Clone()
			w := httptest.NewRecorder()
			rc.ServeHTTP(w, req)
			if w.Code != http.StatusOK || handled == nil || handled.ID != ev.ID || !bytes.Contains(handled.Payload, []byte("po_")) {
				t.Fatalf("package receiver: %d %s, event %+v", w.Code, w.Body, handled)
			}

			// The event read shows the plaintext.
			read := h.do(request{Method: http.MethodGet, Path: "/v1/events/" + ev.ID, Key: key})
			if read.Status != http.StatusOK || !bytes.Contains(read.Body, []byte(`"po_`+tc.kind+`"`)) {
				t.Fatalf("event read: %d %s", read.Status, read.Body)
			}

			removed := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key, Body: `{"encryption":null}`})
			if got := decode[signed](t, removed); removed.Status != http.StatusOK || got.Encryption != nil {
				t.Fatalf("after removal: %d %s", removed.Status, removed.Body)
			}
			ev = h.publish(merchant, "payout.paid", `{"id":"po_clear"}`)
			h.waitDelivery(key, h.deliveriesOf(key, ev.ID)[0].ID, "settled", settled)
			clear := rcv.requests()[1]
			if clear.Header.Get("Content-Type") != "application/json" || !bytes.Contains(clear.Body, []byte("po_clear")) {
				t.Fatalf("after removal: %s %.200s", clear.Header.Get("Content-Type"), clear.Body)
			}
			if err := verifier.Verify(clear.Header, clear.Body); err != nil {
				t.Fatalf("signature after removal: %v", err)
			}
		})
	}
}

// verifierOf is package receiver's Verifier for a subscription as created:
// its whsec_ secret or its whpk_ public key.
func verifierOf(t *testing.T, sub signed) *receiver.Verifier {
	t.Helper()
	cfg := receiver.VerifierConfig{Secrets: []string{sub.Secret}}
	if sub.SignatureScheme == "ed25519" {
		cfg = receiver.VerifierConfig{PublicKeys: []string{sub.Secret}}
	}
	v, err := receiver.NewVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSigningFieldsRefused: each malformed signature_scheme or encryption
// is refused with parameter_invalid (parameter_missing when absent) naming
// the field, on create and on update, and a refusal never quotes private
// key material.
func TestSigningFieldsRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m1")
	rsaSmall, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, edPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	privateJWK := jwkOf(t, jose.JSONWebKey{Key: ec})
	publicJWK := jwkOf(t, jose.JSONWebKey{Key: &ec.PublicKey})
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for name, value := range publicJWK {
			m[name] = value
		}
		m[k] = v
		return m
	}
	existing := h.createSubscription(key, map[string]any{"url": "https://example.com/h", "events": []string{"*"}})
	const pk = "encryption.public_key"
	for _, tc := range []struct {
		name   string
		field  string
		value  any
		param  string
		code   string // "" for parameter_invalid
		update bool   // also refused by an update (signature_scheme's unknown values are)
	}{
		{"unknown scheme", "signature_scheme", "rsa_sha256", "signature_scheme", "", true},
		{"scheme not a string", "signature_scheme", 1, "signature_scheme", "", true},
		{"encryption not an object", "encryption", "jwk", "encryption", "", true},
		{"encryption unknown field", "encryption", map[string]any{"public_key": publicJWK, "private_key": privateJWK}, "encryption", "", true},
		{"encryption camelCase field on /v1", "encryption", map[string]any{"publicKey": publicJWK}, "encryption", "", true},
		{"no public key", "encryption", map[string]any{}, pk, "parameter_missing", true},
		{"public key not an object", "encryption", map[string]any{"public_key": "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE"}, pk, "", true},
		{"private EC key", "encryption", map[string]any{"public_key": privateJWK}, pk, "", true},
		{"private RSA key", "encryption", map[string]any{"public_key": jwkOf(t, jose.JSONWebKey{Key: rsaSmall})}, pk, "", true},
		{"symmetric key", "encryption", map[string]any{"public_key": map[string]any{"kty": "oct", "k": "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}}, pk, "", true},
		{"RSA of 1024 bits", "encryption", map[string]any{"public_key": jwkOf(t, jose.JSONWebKey{Key: &rsaSmall.PublicKey})}, pk, "", true},
		{"Ed25519 key", "encryption", map[string]any{"public_key": jwkOf(t, jose.JSONWebKey{Key: edPriv.Public()})}, pk, "", true},
		{"unknown curve", "encryption", map[string]any{"public_key": with("crv", "P-192")}, pk, "", true},
		{"point not on the curve", "encryption", map[string]any{"public_key": with("x", "AAAA")}, pk, "", true},
		{"alg of another key", "encryption", map[string]any{"public_key": with("alg", "RSA-OAEP-256")}, pk, "", true},
		{"use sig", "encryption", map[string]any{"public_key": with("use", "sig")}, pk, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := h.with(t)
			code := tc.code
			if code == "" {
				code = "parameter_invalid"
			}
			bodies := []request{{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
				Body: map[string]any{"url": "https://example.com/h", "events": []string{"*"}, tc.field: tc.value}}}
			if tc.update {
				bodies = append(bodies, request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + existing.ID, Key: key,
					Body: map[string]any{tc.field: tc.value}})
			}
			for _, req := range bodies {
				r := h.do(req)
				m := expectError(t, r, http.StatusBadRequest, code)
				if m["param"] != tc.param {
					t.Fatalf("%s: param %v, want %s (%v)", req.Path, m["param"], tc.param, m["message"])
				}
				if d, ok := privateJWK["d"].(string); ok && bytes.Contains(r.Body, []byte(d)) {
					t.Fatalf("the refusal quotes the private key: %s", r.Body)
				}
			}
		})
	}
}

// TestLegacySigningFields: the legacy surface takes signatureScheme and
// encryption.publicKey, and shows them in camelCase.
func TestLegacySigningFields(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m1")
	pair := newEncryptionKeyPair(t, "P-256")
	r := h.legacy("create", key, "", map[string]any{"url": "https://example.com/h", "events": []string{"*"},
		"signatureScheme": "ed25519", "encryption": map[string]any{"publicKey": pair.jwk}})
	if r.Status != http.StatusOK {
		t.Fatalf("legacy create: %d %s", r.Status, r.Body)
	}
	shown := decode[struct {
		ID                string         `json:"id"`
		Secret            string         `json:"secret"`
		SignatureScheme   string         `json:"signatureScheme"`
		SigningPublicKey  string         `json:"signingPublicKey"`
		SigningPublicKeys []string       `json:"signingPublicKeys"`
		Encryption        map[string]any `json:"encryption"`
	}](t, r)
	if shown.SignatureScheme != "ed25519" || !strings.HasPrefix(shown.Secret, "whpk_") || shown.SigningPublicKey != shown.Secret ||
		len(shown.SigningPublicKeys) != 1 || shown.Encryption["publicKey"] == nil || shown.Encryption["alg"] != "ECDH-ES+A256KW" {
		t.Fatalf("legacy create shows %s", r.Body)
	}
	r = h.legacy("update", key, "", map[string]any{"id": shown.ID, "encryption": map[string]any{"public_key": pair.jwk}})
	if r.Status != http.StatusBadRequest {
		t.Fatalf("legacy update in snake_case: %d %s", r.Status, r.Body)
	}
	r = h.legacy("update", key, "", map[string]any{"id": shown.ID, "encryption": nil, "signatureScheme": "ed25519"})
	if r.Status != http.StatusOK || !bytes.Contains(r.Body, []byte(`"encryption":null`)) {
		t.Fatalf("legacy update removing it: %d %s", r.Status, r.Body)
	}
	if got := decode[signed](t, h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + shown.ID, Key: key})); got.Encryption != nil || got.SignatureScheme != "ed25519" {
		t.Fatalf("/v1 read after the legacy update: %+v", got)
	}
}

// TestNoPrivateKeyMaterialShown: subscriptions with every option (ed25519,
// rotated; an encryption key; mtls) deliver, and then neither the logs, nor
// /metrics, nor the OpenAPI document, nor any read (create, get, list,
// rotate, the secret route, the legacy surface) holds a private key: no
// whsk_ key or its base64, no PEM private key, no private JWK member.
func TestNoPrivateKeyMaterialShown(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	h := newLoggedPipeline(t, &logs)
	key := h.merchant("m1")
	serverCA, clientCA := testpki.NewCA(t, "endpoint CA"), testpki.NewCA(t, "client CA")
	rcv := newMTLSReceiver(t, serverCA, clientCA)
	client := clientCA.ValidClient(t, "webhookd-m1")
	pair := newEncryptionKeyPair(t, "RSA-2048")
	privateJWK := jwkOf(t, jose.JSONWebKey{Key: pair.private})

	var reads []response
	created := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
		Body: map[string]any{"url": rcv.url, "events": []string{"*"}, "signature_scheme": "ed25519",
			"encryption":     map[string]any{"public_key": pair.jwk},
			"authentication": map[string]any{"type": "mtls", "client_certificate": client.CertPEM, "client_key": client.KeyPEM, "server_ca": serverCA.PEM}}})
	if created.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.Status, created.Body)
	}
	sub := decode[signed](t, created)
	reads = append(reads, created,
		h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID + "/rotate_secret", Key: key}))
	plain := newHookReceiver(t, http.StatusNoContent)
	legacy := h.legacy("create", key, "", map[string]any{"url": plain.URL, "events": []string{"*"}, "signatureScheme": "ed25519",
		"encryption": map[string]any{"publicKey": pair.jwk}})
	reads = append(reads, legacy, h.legacy("update", key, "", map[string]any{"id": decode[signed](t, legacy).ID, "description": "x"}))

	ev := h.publish("m1", "payout.paid", `{"id":"po_1"}`)
	for _, d := range h.deliveriesOf(key, ev.ID) {
		if got := h.waitDelivery(key, d.ID, "settled", settled); got.Status != "succeeded" {
			t.Fatalf("delivery with every option: %+v", got)
		}
	}
	for _, path := range []string{"/v1/webhook_subscriptions/" + sub.ID, "/v1/webhook_subscriptions",
		"/v1/webhook_subscriptions/" + sub.ID + "/secret"} {
		reads = append(reads, h.do(request{Method: http.MethodGet, Path: path, Key: key}))
	}
	metrics := h.doInternal(request{Method: http.MethodGet, Path: "/metrics"})
	document := h.do(request{Method: http.MethodGet, Path: "/v1/openapi.json"})
	if metrics.Status != http.StatusOK || document.Status != http.StatusOK {
		t.Fatalf("metrics %d, document %d", metrics.Status, document.Status)
	}

	// The private material: every whsk_ key stored, with and without its
	// prefix, the mTLS key, the merchant's private JWK's members.
	secret := []string{"whsk_", "PRIVATE KEY", client.KeyPEM[40:100]}
	for _, id := range []string{sub.ID, decode[signed](t, legacy).ID} {
		for _, s := range h.activeSecrets(id) {
			secret = append(secret, s, strings.TrimPrefix(s, "whsk_")[:40])
		}
	}
	for _, m := range []string{"d", "p", "q", "dp", "dq", "qi"} {
		secret = append(secret, privateJWK[m].(string)[:32])
	}
	places := map[string][]byte{"logs": []byte(logs.String()), "metrics": metrics.Body, "openapi.json": document.Body}
	for i, r := range reads {
		if r.Status >= 300 {
			t.Fatalf("read %d: %d %s", i, r.Status, r.Body)
		}
		places["read "+string(rune('A'+i))] = r.Body
	}
	if len(places["logs"]) == 0 {
		t.Fatal("nothing was logged")
	}
	for name, text := range places {
		for _, s := range secret {
			if bytes.Contains(text, []byte(s)) {
				t.Errorf("%s holds private key material (%.12s…)", name, s)
			}
		}
	}
}

// FuzzSubscriptionSigningBody: create bodies with a signature scheme and
// an encryption key, malformed ones included (private, symmetric, small or
// cut-short keys, wrong types, unknown fields), are answered 201 or a 4xx,
// never a 500.
func FuzzSubscriptionSigningBody(f *testing.F) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	public, err := jose.JSONWebKey{Key: &ec.PublicKey, KeyID: "k1"}.MarshalJSON()
	if err != nil {
		f.Fatal(err)
	}
	private, err := jose.JSONWebKey{Key: ec}.MarshalJSON()
	if err != nil {
		f.Fatal(err)
	}
	// The values are raw JSON, so that a seed may be cut short.
	body := func(scheme, encryption string) string {
		return `{"url":"https://example.com/hook","events":["*"],"signature_scheme":` + scheme + `,"encryption":` + encryption + `}`
	}
	fuzzBody(f, bodyTarget{method: http.MethodPost, path: "/v1/webhook_subscriptions", accepted: checkSubscription,
		seeds: []string{
			body(`"ed25519"`, `{"public_key":`+string(public)+`}`),
			body(`"hmac_sha256"`, `null`),
			body(`"ed25519"`, `{"public_key":`+string(private)+`}`),
			body(`"ed25519"`, `{"public_key":`+string(public[:40])+`"}}`),
			body(`null`, `{"public_key":{"kty":"oct","k":"AAAA"}}`),
			body(`"rsa"`, `{"public_key":{"kty":"RSA","n":"AQAB","e":"AQAB"}}`),
			body(`7`, `{"public_key":{"kty":"EC","crv":"P-256","x":"","y":""},"extra":1}`),
			body(`"ed25519"`, `[]`),
		}})
}
