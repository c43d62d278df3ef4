package receiver_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/receiver"
)

func mustPrivateKey(t testing.TB, s string) receiver.PrivateKey {
	t.Helper()
	k, err := receiver.ParsePrivateKey(s)
	if err != nil {
		t.Fatalf("ParsePrivateKey: %v", err)
	}
	return k
}

func TestParsePrivateKey(t *testing.T) {
	t.Parallel()
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(vectorPrivateKey, "whsk_"))
	if err != nil {
		t.Fatal(err)
	}
	spliced := append([]byte(nil), raw...)
	spliced[40] ^= 1 // the public half no longer matches the seed
	enc := func(b []byte) string { return "whsk_" + base64.StdEncoding.EncodeToString(b) }
	tests := []struct {
		name    string
		in      string
		wantErr string // substring of the error; "" means valid
	}{
		{"reference private key", vectorPrivateKey, ""},
		{"missing prefix", strings.TrimPrefix(vectorPrivateKey, "whsk_"), `missing "whsk_" prefix`},
		{"an HMAC secret", vectorSecret, `missing "whsk_" prefix`},
		{"the public key", vectorPublicKey, `missing "whsk_" prefix`},
		{"empty string", "", `missing "whsk_" prefix`},
		{"prefix only", "whsk_", "0 bytes, want 64"},
		{"the 32-byte seed alone, as the Standard Webhooks Go library reads it", enc(raw[:32]), ""},
		{"the library's test key, a seed", swLibraryPrivateKey, ""},
		{"one byte short", enc(raw[:63]), "63 bytes, want 64"},
		{"one byte long", enc(append(append([]byte(nil), raw...), 0)), "65 bytes, want 64"},
		{"one byte more than a seed", enc(raw[:33]), "33 bytes, want 64 (or a 32-byte seed)"},
		{"public half does not match the seed", enc(spliced), "does not match"},
		{"not base64", "whsk_not*base64!", "not standard base64"},
		{"missing padding", strings.TrimSuffix(vectorPrivateKey, "=="), "not standard base64"},
		{"non-zero unused bits (a second spelling of the key)", strings.TrimSuffix(vectorPrivateKey, "g==") + "h==", "not standard base64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key, err := receiver.ParsePrivateKey(tt.in)
			if tt.wantErr == "" {
				if err != nil || len(key) != ed25519.PrivateKeySize {
					t.Fatalf("ParsePrivateKey = %d bytes, %v; want 64 bytes, nil", len(key), err)
				}
				return
			}
			checkRefusal(t, err, receiver.ErrInvalidSecret, tt.wantErr, strings.TrimPrefix(tt.in, "whsk_"))
		})
	}
}

func TestPrivateKeyPublicIsTheReferencePublicKey(t *testing.T) {
	t.Parallel()
	if got := mustPrivateKey(t, vectorPrivateKey).Public().String(); got != vectorPublicKey {
		t.Errorf("Public() = %s, want %s", got, vectorPublicKey)
	}
}

// TestPrivateKeySeedIsTheWholeKey: the seed alone parses to the same key as
// the 64-byte form it starts.
func TestPrivateKeySeedIsTheWholeKey(t *testing.T) {
	t.Parallel()
	full := mustPrivateKey(t, vectorPrivateKey)
	seed := mustPrivateKey(t, "whsk_"+base64.StdEncoding.EncodeToString(full[:ed25519.SeedSize]))
	if string(seed) != string(full) {
		t.Error("the seed parses to another key than the 64-byte form")
	}
}

func TestPrivateKeyIsRedactedWhenPrinted(t *testing.T) {
	t.Parallel()
	k := mustPrivateKey(t, vectorPrivateKey)
	b64 := strings.TrimPrefix(vectorPrivateKey, "whsk_")
	for _, verb := range []string{"%v", "%s", "%x", "%X", "%q", "%#v", "%+v"} {
		got := fmt.Sprintf(verb, k)
		if strings.Contains(got, b64[:8]) || strings.Contains(strings.ToLower(got), fmt.Sprintf("%x", []byte(k)[:4])) {
			t.Errorf("Sprintf(%s, key) = %q leaks the key", verb, got)
		}
	}
}
