package jwe_test

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
)

// envelope is a delivery body before encryption.
const envelope = `{"id":"0195d1f4-9c1e-7c55-a1f2-3b4c5d6e7f80","type":"payout.paid","api_version":"2026-05-01","payload":{"id":"po_1","type":"payout","status":"paid"},"date":"2026-11-25T03:00:00.123Z"}`

// keys are a merchant's two kinds of key pair.
type keys struct {
	rsa *rsa.PrivateKey
	ec  *ecdsa.PrivateKey
}

func newKeys(t testing.TB) keys {
	t.Helper()
	r, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	e, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return keys{rsa: r, ec: e}
}

// encrypt makes a compact JWE with go-jose, as webhookd or anyone else
// could: the tests do not depend on package signer.
func encrypt(t testing.TB, alg jose.KeyAlgorithm, enc jose.ContentEncryption, key any, kid string, opts *jose.EncrypterOptions) []byte {
	t.Helper()
	e, err := jose.NewEncrypter(enc, jose.Recipient{Algorithm: alg, Key: key, KeyID: kid}, opts)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := e.Encrypt([]byte(envelope))
	if err != nil {
		t.Fatal(err)
	}
	s, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return []byte(s)
}

func newDecrypter(t testing.TB, cfg jwe.Config) *jwe.Decrypter {
	t.Helper()
	d, err := jwe.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDecryptRoundTrip(t *testing.T) {
	t.Parallel()
	k := newKeys(t)
	other := newKeys(t)
	for _, tc := range []struct {
		name string
		keys []crypto.PrivateKey
		body []byte
	}{
		{"RSA-OAEP-256", []crypto.PrivateKey{k.rsa}, encrypt(t, jwe.RSAOAEP256, jose.A256GCM, &k.rsa.PublicKey, "", nil)},
		{"ECDH-ES+A256KW", []crypto.PrivateKey{k.ec}, encrypt(t, jwe.ECDHESA256KW, jose.A256GCM, &k.ec.PublicKey, "", nil)},
		{"kid names the second key", []crypto.PrivateKey{
			jose.JSONWebKey{Key: other.rsa, KeyID: "old"}, &jose.JSONWebKey{Key: k.rsa, KeyID: "new"},
		}, encrypt(t, jwe.RSAOAEP256, jose.A256GCM, &k.rsa.PublicKey, "new", nil)},
		{"no kid, second key", []crypto.PrivateKey{other.ec, k.ec}, encrypt(t, jwe.ECDHESA256KW, jose.A256GCM, &k.ec.PublicKey, "", nil)},
		{"unknown kid, some key", []crypto.PrivateKey{other.rsa, k.rsa}, encrypt(t, jwe.RSAOAEP256, jose.A256GCM, &k.rsa.PublicKey, "lost", nil)},
		{"both kinds of key", []crypto.PrivateKey{k.rsa, k.ec}, encrypt(t, jwe.ECDHESA256KW, jose.A256GCM, &k.ec.PublicKey, "", nil)},
		{"trailing newline", []crypto.PrivateKey{k.ec}, append(encrypt(t, jwe.ECDHESA256KW, jose.A256GCM, &k.ec.PublicKey, "", nil), '\n')},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			plain, err := newDecrypter(t, jwe.Config{Keys: tc.keys}).Decrypt(tc.body)
			if err != nil || string(plain) != envelope {
				t.Fatalf("Decrypt = %q, %v", plain, err)
			}
		})
	}
}

// The refusals: what an attacker, a misconfigured sender or a damaged
// message could bring.
func TestDecryptRefuses(t *testing.T) {
	t.Parallel()
	k := newKeys(t)
	other := newKeys(t)
	good := encrypt(t, jwe.ECDHESA256KW, jose.A256GCM, &k.ec.PublicKey, "", nil)
	parts := strings.Split(string(good), ".")
	b64 := base64.RawURLEncoding.EncodeToString
	withHeader := func(h string) []byte {
		return []byte(b64([]byte(h)) + "." + strings.Join(parts[1:], "."))
	}
	tampered := func(i int) []byte {
		p := append([]string(nil), parts...)
		raw, err := base64.RawURLEncoding.DecodeString(p[i])
		if err != nil {
			t.Fatal(err)
		}
		raw[len(raw)/2] ^= 1
		p[i] = b64(raw)
		return []byte(strings.Join(p, "."))
	}
	for _, tc := range []struct {
		name string
		body []byte
		want error
	}{
		{"alg none", withHeader(`{"alg":"none","enc":"A256GCM"}`), jwe.ErrAlgorithmRefused},
		{"RSA1_5", encrypt(t, jose.RSA1_5, jose.A256GCM, &k.rsa.PublicKey, "", nil), jwe.ErrAlgorithmRefused},
		{"RSA-OAEP with SHA-1", encrypt(t, jose.RSA_OAEP, jose.A256GCM, &k.rsa.PublicKey, "", nil), jwe.ErrAlgorithmRefused},
		{"direct ECDH-ES, no key wrap", encrypt(t, jose.ECDH_ES, jose.A256GCM, &k.ec.PublicKey, "", nil), jwe.ErrAlgorithmRefused},
		{"ECDH-ES with a 128-bit wrap", encrypt(t, jose.ECDH_ES_A128KW, jose.A256GCM, &k.ec.PublicKey, "", nil), jwe.ErrAlgorithmRefused},
		{"direct symmetric key", encrypt(t, jose.DIRECT, jose.A256GCM, make([]byte, 32), "", nil), jwe.ErrAlgorithmRefused},
		{"A128GCM content", encrypt(t, jwe.ECDHESA256KW, jose.A128GCM, &k.ec.PublicKey, "", nil), jwe.ErrAlgorithmRefused},
		{"CBC-HMAC content", encrypt(t, jwe.RSAOAEP256, jose.A256CBC_HS512, &k.rsa.PublicKey, "", nil), jwe.ErrAlgorithmRefused},
		{"compressed", encrypt(t, jwe.ECDHESA256KW, jose.A256GCM, &k.ec.PublicKey, "", &jose.EncrypterOptions{Compression: jose.DEFLATE}), jwe.ErrAlgorithmRefused},
		{"critical extension", encrypt(t, jwe.ECDHESA256KW, jose.A256GCM, &k.ec.PublicKey, "", (&jose.EncrypterOptions{}).WithHeader("crit", []string{"exp"})), jwe.ErrAlgorithmRefused},
		{"tampered ciphertext", tampered(3), jwe.ErrUndecryptable},
		{"tampered tag", tampered(4), jwe.ErrUndecryptable},
		{"tampered iv", tampered(2), jwe.ErrUndecryptable},
		{"header changed after encryption", withHeader(`{"alg":"ECDH-ES+A256KW","enc":"A256GCM","kid":"x","epk":` + epk(t, good) + `}`), jwe.ErrUndecryptable},
		{"encrypted to another key", encrypt(t, jwe.ECDHESA256KW, jose.A256GCM, &other.ec.PublicKey, "", nil), jwe.ErrUndecryptable},
		{"RSA, but only an EC key here", encrypt(t, jwe.RSAOAEP256, jose.A256GCM, &k.rsa.PublicKey, "", nil), jwe.ErrUndecryptable},
		{"plaintext JSON", []byte(envelope), jwe.ErrMalformed},
		{"empty", nil, jwe.ErrMalformed},
		{"header not base64", []byte("!!." + strings.Join(parts[1:], ".")), jwe.ErrMalformed},
		{"header not JSON", withHeader(`alg`), jwe.ErrMalformed},
		{"four parts", []byte(strings.Join(parts[:4], ".")), jwe.ErrMalformed},
		{"JSON serialization", []byte(`{"protected":"` + parts[0] + `","ciphertext":"` + parts[3] + `"}`), jwe.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			plain, err := newDecrypter(t, jwe.Config{Keys: []crypto.PrivateKey{k.ec}}).Decrypt(tc.body)
			if !errors.Is(err, tc.want) || plain != nil {
				t.Fatalf("Decrypt = %q, %v; want %v", plain, err, tc.want)
			}
		})
	}
}

// epk returns the ephemeral public key member of an ECDH-ES JWE's header.
func epk(t testing.TB, body []byte) string {
	t.Helper()
	first, _, _ := strings.Cut(string(body), ".")
	raw, err := base64.RawURLEncoding.DecodeString(first)
	if err != nil {
		t.Fatal(err)
	}
	var h struct{ EPK json.RawMessage }
	if err := json.Unmarshal(raw, &h); err != nil || h.EPK == nil {
		t.Fatalf("header %s: %v", raw, err)
	}
	return string(h.EPK)
}

func TestAllowPlaintext(t *testing.T) {
	t.Parallel()
	k := newKeys(t)
	d := newDecrypter(t, jwe.Config{Keys: []crypto.PrivateKey{k.ec}, AllowPlaintext: true})
	for _, body := range [][]byte{[]byte(envelope), []byte("\n  " + envelope)} {
		if plain, err := d.Decrypt(body); err != nil || string(plain) != string(body) {
			t.Errorf("Decrypt(plaintext) = %q, %v", plain, err)
		}
	}
	if plain, err := d.Decrypt(encrypt(t, jwe.ECDHESA256KW, jose.A256GCM, &k.ec.PublicKey, "", nil)); err != nil || string(plain) != envelope {
		t.Errorf("Decrypt(JWE) = %q, %v", plain, err)
	}
	if _, err := d.Decrypt(encrypt(t, jose.ECDH_ES, jose.A256GCM, &k.ec.PublicKey, "", nil)); !errors.Is(err, jwe.ErrAlgorithmRefused) {
		t.Errorf("Decrypt(direct ECDH-ES) = %v: plaintext mode must not relax the rules for JWEs", err)
	}
}

func TestNewRefusesKeys(t *testing.T) {
	t.Parallel()
	k := newKeys(t)
	for _, tc := range []struct {
		name string
		keys []crypto.PrivateKey
		says string
	}{
		{"no key", nil, "at least one private key"},
		{"RSA public key given as private", []crypto.PrivateKey{&k.rsa.PublicKey}, "Keys[0]: key not accepted: a public key"},
		{"EC public key given as private", []crypto.PrivateKey{k.ec, &k.ec.PublicKey}, "Keys[1]: key not accepted: a public key"},
		{"public JWK", []crypto.PrivateKey{jose.JSONWebKey{Key: &k.ec.PublicKey, KeyID: "k"}}, "a public key"},
		{"oct key", []crypto.PrivateKey{make([]byte, 32)}, "a symmetric key"},
		{"oct JWK", []crypto.PrivateKey{&jose.JSONWebKey{Key: make([]byte, 32)}}, "a symmetric key"},
		{"small RSA key", []crypto.PrivateKey{&rsa.PrivateKey{PublicKey: rsa.PublicKey{N: new(big.Int).Rsh(k.rsa.N, 1024), E: 65537}}}, "RSA key of"},
		{"string", []crypto.PrivateKey{"-----BEGIN PRIVATE KEY-----"}, "key type string"},
	} {
		_, err := jwe.New(jwe.Config{Keys: tc.keys})
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: err = %v, want it to say %q", tc.name, err, tc.says)
		}
	}
}

// FuzzDecrypt: whatever a body holds, Decrypt returns the plaintext of a
// JWE made to its key or one of the package's three errors.
func FuzzDecrypt(f *testing.F) {
	k := newKeys(f)
	good := encrypt(f, jwe.ECDHESA256KW, jose.A256GCM, &k.ec.PublicKey, "kid", nil)
	f.Add(good)
	f.Add(encrypt(f, jwe.RSAOAEP256, jose.A256GCM, &k.rsa.PublicKey, "", nil))
	f.Add(encrypt(f, jose.ECDH_ES, jose.A256GCM, &k.ec.PublicKey, "", nil))
	f.Add([]byte(envelope))
	f.Add([]byte("...."))
	f.Add([]byte("eyJhbGciOiJub25lIn0...."))
	d := newDecrypter(f, jwe.Config{Keys: []crypto.PrivateKey{k.ec, k.rsa}})
	f.Fuzz(func(t *testing.T, body []byte) {
		plain, err := d.Decrypt(body)
		switch {
		case err == nil && string(plain) != envelope:
			t.Fatalf("decrypted %q", plain)
		case err != nil && !errors.Is(err, jwe.ErrMalformed) && !errors.Is(err, jwe.ErrAlgorithmRefused) && !errors.Is(err, jwe.ErrUndecryptable):
			t.Fatalf("err = %v", err)
		}
	})
}
