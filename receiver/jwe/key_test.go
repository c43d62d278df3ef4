package jwe_test

import (
	"crypto"
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/webhookd/webhookd/receiver/jwe"
)

// The merchant's side of the key exchange: PublicJWK makes what webhookd
// is given, ParsePrivateJWK reads back what the merchant keeps, and a JWE
// made to the first decrypts with the second.
func TestPublicAndPrivateJWK(t *testing.T) {
	t.Parallel()
	k := newKeys(t)
	for _, tc := range []struct {
		name string
		key  crypto.PrivateKey
		alg  jose.KeyAlgorithm
	}{
		{"RSA", k.rsa, jwe.RSAOAEP256},
		{"EC", k.ec, jwe.ECDHESA256KW},
	} {
		pub, err := jwe.PublicJWK(tc.key, "2026-11")
		if err != nil {
			t.Fatalf("%s: PublicJWK: %v", tc.name, err)
		}
		var members map[string]any
		if err := json.Unmarshal(pub, &members); err != nil {
			t.Fatal(err)
		}
		if members["alg"] != string(tc.alg) || members["use"] != "enc" || members["kid"] != "2026-11" || members["d"] != nil {
			t.Errorf("%s: public JWK %s", tc.name, pub)
		}
		var pubKey jose.JSONWebKey
		if err := pubKey.UnmarshalJSON(pub); err != nil || !pubKey.IsPublic() {
			t.Fatalf("%s: go-jose reads %s as %v, %v", tc.name, pub, pubKey, err)
		}

		private, err := json.Marshal(jose.JSONWebKey{Key: tc.key, KeyID: "2026-11"})
		if err != nil {
			t.Fatal(err)
		}
		jwk, err := jwe.ParsePrivateJWK(private)
		if err != nil {
			t.Fatalf("%s: ParsePrivateJWK: %v", tc.name, err)
		}
		d := newDecrypter(t, jwe.Config{Keys: []crypto.PrivateKey{jwk}})
		plain, err := d.Decrypt(encrypt(t, tc.alg, jose.A256GCM, pubKey.Key, pubKey.KeyID, nil))
		if err != nil || string(plain) != envelope {
			t.Errorf("%s: Decrypt = %q, %v", tc.name, plain, err)
		}

		if _, err := jwe.ParsePrivateJWK(pub); err == nil || !strings.Contains(err.Error(), "a public key") {
			t.Errorf("%s: ParsePrivateJWK(public) = %v", tc.name, err)
		}
		if _, err := jwe.PublicJWK(pubKey.Key, ""); err == nil || !strings.Contains(err.Error(), "a public key") {
			t.Errorf("%s: PublicJWK(public) = %v", tc.name, err)
		}
	}
	for _, bad := range []string{`{"kty":"oct","k":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`, `{"kty":"RSA"}`, `not json`} {
		if _, err := jwe.ParsePrivateJWK([]byte(bad)); err == nil {
			t.Errorf("ParsePrivateJWK(%s) accepted", bad)
		}
	}
}
