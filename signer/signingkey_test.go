package signer_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/signer"
)

// The Ed25519 vector of the Svix server's tests (the Standard Webhooks
// reference implementation, server/svix-server/src/worker.rs
// test_asymmetric_key_signing): this key signs vectorID, vectorTS and
// vectorBody to vectorEd25519Sig; vectorPublicKey is its public key
// (core/types/mod.rs).
const (
	vectorPrivateKey = "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg=="
	vectorPublicKey  = "whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4="
	vectorEd25519Sig = "v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg=="
)

func mustSigningKey(t testing.TB, secret string) signer.SigningKey {
	t.Helper()
	k, err := signer.ParseSigningKey(secret)
	if err != nil {
		t.Fatalf("ParseSigningKey: %v", err)
	}
	return k
}

func TestParseSigningKey(t *testing.T) {
	tests := []struct {
		name       string
		in         string
		wantScheme signer.Scheme
		wantErr    string // substring of the error; "" means valid
	}{
		{"HMAC secret", vectorSecret, signer.SchemeHMACSHA256, ""},
		{"Ed25519 private key", vectorPrivateKey, signer.SchemeEd25519, ""},
		{"no known prefix", "plain-text", "", `neither "whsec_" nor "whsk_"`},
		{"empty", "", "", `neither "whsec_" nor "whsk_"`},
		{"a public key is not a signing key", vectorPublicKey, "", `neither "whsec_" nor "whsk_"`},
		{"empty HMAC key", "whsec_", "", "empty key"},
		{"Ed25519 seed alone", "whsk_" + strings.Repeat("A", 43) + "=", signer.SchemeEd25519, ""},
		{"Ed25519 key of 48 bytes", "whsk_" + strings.Repeat("A", 64), "", "48 bytes, want 64"},
		{"Ed25519 key not base64", "whsk_not*base64!", "", "not standard base64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := signer.ParseSigningKey(tt.in)
			if tt.wantErr == "" {
				if err != nil || k.Scheme() != tt.wantScheme {
					t.Fatalf("ParseSigningKey = %v, %v; want a %s key", k, err, tt.wantScheme)
				}
				return
			}
			if !errors.Is(err, signer.ErrInvalidSecret) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ParseSigningKey error = %v; want ErrInvalidSecret mentioning %q", err, tt.wantErr)
			}
		})
	}
}

func TestSigningKeyIsRedactedWhenPrinted(t *testing.T) {
	for _, secret := range []string{vectorSecret, vectorPrivateKey} {
		k := mustSigningKey(t, secret)
		raw := secret[strings.Index(secret, "_")+1:]
		for _, verb := range []string{"%v", "%s", "%x", "%q", "%#v", "%+v"} {
			if got := fmt.Sprintf(verb, k); strings.Contains(got, raw[:8]) || strings.Contains(got, fmt.Sprintf("%x", raw[:4])) {
				t.Errorf("Sprintf(%s, key) = %q leaks the key", verb, got)
			}
		}
	}
}

// TestSignWith: one value per key in the order given, each of its key's
// scheme; with HMAC keys only, byte for byte what Sign gives.
func TestSignWith(t *testing.T) {
	hmac, ed := mustSigningKey(t, vectorSecret), mustSigningKey(t, vectorPrivateKey)
	second := mustSigningKey(t, secondSecret)
	ts := time.Unix(vectorTS, 0)
	body := []byte(vectorBody)
	tests := []struct {
		name string
		keys []signer.SigningKey
		want string
	}{
		{"no key", nil, ""},
		{"HMAC: the Standard Webhooks vector", []signer.SigningKey{hmac}, vectorSig},
		{"Ed25519: the Svix server's vector", []signer.SigningKey{ed}, vectorEd25519Sig},
		{"two HMAC keys: exactly Sign", []signer.SigningKey{hmac, second},
			signer.Sign(vectorID, ts, body, mustKey(t, vectorSecret), mustKey(t, secondSecret))},
		{"HMAC key wrapped by HMACSigningKey", []signer.SigningKey{signer.HMACSigningKey(mustKey(t, vectorSecret))}, vectorSig},
		{"Ed25519 then HMAC, in that order", []signer.SigningKey{ed, hmac}, vectorEd25519Sig + " " + vectorSig},
		{"HMAC then Ed25519", []signer.SigningKey{hmac, ed}, vectorSig + " " + vectorEd25519Sig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := signer.SignWith(vectorID, ts, body, tt.keys...); got != tt.want {
				t.Errorf("SignWith = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSetHeadersWith(t *testing.T) {
	h := http.Header{}
	signer.SetHeadersWith(h, vectorID, time.Unix(vectorTS, 0), []byte(vectorBody), mustSigningKey(t, vectorPrivateKey))
	checkVectorHeaders(t, h, vectorEd25519Sig)
}

func TestSigningKeys(t *testing.T) {
	keys, err := signer.SigningKeys([]signer.Secret{{ID: 1, Value: vectorPrivateKey}, {ID: 2, Value: vectorSecret}})
	if err != nil || len(keys) != 2 || keys[0].Scheme() != signer.SchemeEd25519 || keys[1].Scheme() != signer.SchemeHMACSHA256 {
		t.Fatalf("SigningKeys = %v, %v; want the Ed25519 key then the HMAC key", keys, err)
	}
	_, err = signer.SigningKeys([]signer.Secret{{ID: 7, Value: "whsk_AAAA"}})
	if !errors.Is(err, signer.ErrInvalidSecret) || !strings.Contains(err.Error(), "secret 7") {
		t.Errorf("SigningKeys with a bad key: %v; want ErrInvalidSecret naming secret 7", err)
	}
}
