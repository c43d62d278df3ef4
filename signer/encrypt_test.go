package signer_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/webhookd/webhookd/receiver/jwe"
	"github.com/webhookd/webhookd/signer"
)

// envelope is a delivery body as the dispatcher builds it.
const envelope = `{"id":"0195d1f4-9c1e-7c55-a1f2-3b4c5d6e7f80","type":"payout.paid","api_version":"2026-05-01","payload":{"id":"po_1","type":"payout","status":"paid"},"date":"2026-11-25T03:00:00.123Z"}`

// keyPair is a merchant's key pair, and the public JWK it gives webhookd,
// written by go-jose rather than by the code under test.
type keyPair struct {
	name    string
	private any
	jwk     []byte
	alg     jose.KeyAlgorithm
}

func newKeyPairs(t testing.TB) []keyPair {
	t.Helper()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return []keyPair{
		{"RSA-OAEP-256", rsaKey, publicJWK(t, &rsaKey.PublicKey, "rsa-2026-11", ""), jose.RSA_OAEP_256},
		{"ECDH-ES+A256KW", ecKey, publicJWK(t, &ecKey.PublicKey, "ec-2026-11", ""), jose.ECDH_ES_A256KW},
	}
}

// publicJWK marshals pub as a JWK with go-jose.
func publicJWK(t testing.TB, pub any, kid, alg string) []byte {
	t.Helper()
	b, err := json.Marshal(jose.JSONWebKey{Key: pub, KeyID: kid, Algorithm: alg})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEncryptRoundTrip(t *testing.T) {
	t.Parallel()
	for _, kp := range newKeyPairs(t) {
		t.Run(kp.name, func(t *testing.T) {
			t.Parallel()
			key, err := signer.ParseEncryptionKey(kp.jwk)
			if err != nil {
				t.Fatalf("ParseEncryptionKey: %v", err)
			}
			if key.Algorithm() != string(kp.alg) {
				t.Errorf("Algorithm() = %q, want %q", key.Algorithm(), kp.alg)
			}
			body, err := key.Encrypt([]byte(envelope))
			if err != nil {
				t.Fatalf("Encrypt: %v", err)
			}
			if strings.Contains(string(body), "payout") || strings.Count(string(body), ".") != 4 {
				t.Fatalf("body is not a compact JWE hiding the envelope: %s", body)
			}

			// go-jose directly: the body is a standard JWE, with the
			// algorithms and kid webhookd promises in its header.
			obj, err := jose.ParseEncryptedCompact(string(body), []jose.KeyAlgorithm{kp.alg}, []jose.ContentEncryption{jose.A256GCM})
			if err != nil {
				t.Fatalf("go-jose parse: %v", err)
			}
			if obj.Header.KeyID != key.KeyID() || obj.Header.Algorithm != string(kp.alg) {
				t.Errorf("header kid %q alg %q, want %q %q", obj.Header.KeyID, obj.Header.Algorithm, key.KeyID(), kp.alg)
			}
			plain, err := obj.Decrypt(kp.private)
			if err != nil || string(plain) != envelope {
				t.Fatalf("go-jose decrypt = %q, %v", plain, err)
			}

			// And the receiver's package.
			d, err := jwe.New(jwe.Config{Keys: []crypto.PrivateKey{kp.private}})
			if err != nil {
				t.Fatal(err)
			}
			plain, err = d.Decrypt(body)
			if err != nil || string(plain) != envelope {
				t.Fatalf("jwe.Decrypt = %q, %v", plain, err)
			}

			// Each body gets a fresh content key: two encryptions differ.
			again, err := key.Encrypt([]byte(envelope))
			if err != nil || string(again) == string(body) {
				t.Errorf("second Encrypt = %v, same body %v", err, string(again) == string(body))
			}
		})
	}
}

func TestEncryptionKeyReads(t *testing.T) {
	t.Parallel()
	for _, kp := range newKeyPairs(t) {
		key, err := signer.ParseEncryptionKey(kp.jwk)
		if err != nil {
			t.Fatal(err)
		}
		stored, err := json.Marshal(key)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(stored, &m); err != nil {
			t.Fatal(err)
		}
		if m["alg"] != string(kp.alg) || m["use"] != "enc" || m["kid"] != key.KeyID() || m["d"] != nil {
			t.Errorf("%s: stored JWK %s", kp.name, stored)
		}
		again, err := signer.ParseEncryptionKey(stored)
		if err != nil {
			t.Fatalf("%s: stored JWK does not parse again: %v", kp.name, err)
		}
		if again.Thumbprint() != key.Thumbprint() || len(key.Thumbprint()) != 43 {
			t.Errorf("%s: thumbprints %q and %q", kp.name, key.Thumbprint(), again.Thumbprint())
		}
	}
}

func TestParseEncryptionKeyAccepts(t *testing.T) {
	t.Parallel()
	rsaKey := newKeyPairs(t)[0].private.(*rsa.PrivateKey)
	var cases []struct {
		name string
		jwk  []byte
		alg  string
	}
	add := func(name string, jwk []byte, alg string) {
		cases = append(cases, struct {
			name string
			jwk  []byte
			alg  string
		}{name, jwk, alg})
	}
	add("RSA without alg", publicJWK(t, &rsaKey.PublicKey, "", ""), "RSA-OAEP-256")
	add("RSA with its alg", publicJWK(t, &rsaKey.PublicKey, "", "RSA-OAEP-256"), "RSA-OAEP-256")
	for _, curve := range []elliptic.Curve{elliptic.P256(), elliptic.P384(), elliptic.P521()} {
		k, err := ecdsa.GenerateKey(curve, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		add(curve.Params().Name, publicJWK(t, &k.PublicKey, "", "ECDH-ES+A256KW"), "ECDH-ES+A256KW")
	}
	for _, tc := range cases {
		key, err := signer.ParseEncryptionKey(tc.jwk)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if key.Algorithm() != tc.alg || key.KeyID() != "" {
			t.Errorf("%s: alg %q kid %q, want %q and none", tc.name, key.Algorithm(), key.KeyID(), tc.alg)
		}
		if _, err := key.Encrypt([]byte(envelope)); err != nil {
			t.Errorf("%s: Encrypt: %v", tc.name, err)
		}
	}
}

func TestParseEncryptionKeyRefuses(t *testing.T) {
	t.Parallel()
	kps := newKeyPairs(t)
	rsaKey, ecKey := kps[0].private.(*rsa.PrivateKey), kps[1].private.(*ecdsa.PrivateKey)
	p224, err := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	// go-jose will not write a P-224 JWK.
	p224Point, err := p224.PublicKey.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	p224JWK := []byte(`{"kty":"EC","crv":"P-224","x":"` + b64(p224Point[1:29]) + `","y":"` + b64(p224Point[29:]) + `"}`)
	// A 1024-bit modulus: only its size matters to the parser.
	small := &rsa.PublicKey{N: new(big.Int).SetBit(big.NewInt(1), 1023, 1), E: 65537}
	large := &rsa.PublicKey{N: new(big.Int).SetBit(big.NewInt(1), 8191, 1), E: 65537}
	privateRSA, err := json.Marshal(jose.JSONWebKey{Key: rsaKey, KeyID: "k"})
	if err != nil {
		t.Fatal(err)
	}
	privateEC, err := json.Marshal(jose.JSONWebKey{Key: ecKey})
	if err != nil {
		t.Fatal(err)
	}
	withMember := func(jwk []byte, name, value string) []byte {
		var m map[string]any
		if err := json.Unmarshal(jwk, &m); err != nil {
			t.Fatal(err)
		}
		m[name] = value
		b, _ := json.Marshal(m)
		return b
	}
	for _, tc := range []struct {
		name string
		jwk  []byte
		says string
	}{
		{"RSA private key", privateRSA, `a private key (member "d")`},
		{"EC private key", privateEC, `a private key (member "d")`},
		{"symmetric key", []byte(`{"kty":"oct","k":"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow"}`), "a symmetric key"},
		{"RSA key of 1024 bits", publicJWK(t, small, "", ""), "RSA key of 1024 bits; from 2048 to 4096 bits are accepted"},
		{"EC key on P-224", p224JWK, `EC curve "P-224"; only P-256, P-384 and P-521 are accepted`},
		{"RSA key of 8192 bits", publicJWK(t, large, "", ""), "RSA key larger than 4096 bits"},
		{"RSA key with an EC algorithm", publicJWK(t, &rsaKey.PublicKey, "", "ECDH-ES+A256KW"), `alg "ECDH-ES+A256KW"; an RSA key is used with RSA-OAEP-256`},
		{"RSA key with RSA1_5", publicJWK(t, &rsaKey.PublicKey, "", "RSA1_5"), `alg "RSA1_5"`},
		{"EC key with direct ECDH-ES", publicJWK(t, &ecKey.PublicKey, "", "ECDH-ES"), `alg "ECDH-ES"; an EC key is used with ECDH-ES+A256KW`},
		{"alg none", publicJWK(t, &ecKey.PublicKey, "", "none"), `alg "none"`},
		{"signing key", withMember(kps[1].jwk, "use", "sig"), `use "sig"`},
		{"Ed25519 key", []byte(`{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}`), `kty "OKP"`},
		{"no kty", []byte(`{"n":"AQAB","e":"AQAB"}`), `kty ""`},
		{"EC point off the curve", withMember(kps[1].jwk, "y", base64.RawURLEncoding.EncodeToString(make([]byte, 32))), "invalid"},
		{"not JSON", []byte(`-----BEGIN PUBLIC KEY-----`), "not a JWK object"},
		{"a JSON array", []byte(`[]`), "not a JWK object"},
		{"too large", []byte(`{"kty":"RSA","x5c":["` + strings.Repeat("A", signer.MaxEncryptionKeyBytes) + `"]}`), "larger than 16384 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := signer.ParseEncryptionKey(tc.jwk)
			if !errors.Is(err, signer.ErrInvalidEncryptionKey) {
				t.Fatalf("err = %v, want ErrInvalidEncryptionKey", err)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("err = %q, want it to say %q", err, tc.says)
			}
		})
	}
}

// The message of a refused private key goes back to the API caller: it
// must not quote the key.
func TestParseEncryptionKeyErrorQuotesNoKeyMaterial(t *testing.T) {
	t.Parallel()
	rsaKey := newKeyPairs(t)[0].private.(*rsa.PrivateKey)
	jwk, err := json.Marshal(jose.JSONWebKey{Key: rsaKey})
	if err != nil {
		t.Fatal(err)
	}
	_, err = signer.ParseEncryptionKey(jwk)
	d := base64.RawURLEncoding.EncodeToString(rsaKey.D.Bytes())
	if err == nil || strings.Contains(err.Error(), d[:16]) {
		t.Fatalf("err = %v", err)
	}
}

// FuzzParseEncryptionKey feeds the parser what an API caller could send:
// it either refuses with ErrInvalidEncryptionKey or returns a public key of
// an accepted kind that survives being stored and read back.
func FuzzParseEncryptionKey(f *testing.F) {
	kps := newKeyPairs(f)
	for _, kp := range kps {
		f.Add(kp.jwk)
		private, err := json.Marshal(jose.JSONWebKey{Key: kp.private})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(private)
	}
	for _, s := range []string{
		`{"kty":"oct","k":"AAAA"}`, `{"kty":"EC","crv":"P-256","x":"","y":""}`, `{"kty":"RSA","n":"AQAB","e":"AQAB"}`,
		`{"kty":"RSA","n":"AQAB","e":"AAAAAAAAAAAB"}`, `{"kty":"EC","crv":"P-256"}`, `{"kty":"RSA","x5c":["AAAA"]}`,
		`null`, `{}`, `[]`, `"RSA"`, `{"kty":"RSA","use":"enc","alg":"RSA-OAEP-256","n":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, jwk []byte) {
		key, err := signer.ParseEncryptionKey(jwk)
		if err != nil {
			if !errors.Is(err, signer.ErrInvalidEncryptionKey) {
				t.Fatalf("err = %v, not ErrInvalidEncryptionKey", err)
			}
			return
		}
		if alg := key.Algorithm(); alg != "RSA-OAEP-256" && alg != "ECDH-ES+A256KW" {
			t.Fatalf("accepted a key for alg %q", alg)
		}
		stored, err := json.Marshal(key)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		var members map[string]any
		if err := json.Unmarshal(stored, &members); err != nil {
			t.Fatal(err)
		}
		for _, private := range []string{"d", "p", "q", "dp", "dq", "qi", "k"} {
			if _, ok := members[private]; ok {
				t.Fatalf("stored JWK has private member %q: %s", private, stored)
			}
		}
		again, err := signer.ParseEncryptionKey(stored)
		if err != nil || again.Thumbprint() != key.Thumbprint() {
			t.Fatalf("stored JWK %s reads back as %v, %v", stored, again, err)
		}
	})
}
