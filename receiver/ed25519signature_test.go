package receiver_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/receiver"
)

// TestEd25519SignatureMatchesTheReferenceVectors: both reference
// implementations' vectors, one with a 64-byte key and one with a seed.
func TestEd25519SignatureMatchesTheReferenceVectors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, key, want string }{
		{"Svix server, 64-byte key", vectorPrivateKey, vectorEd25519},
		{"Standard Webhooks Go library, seed", swLibraryPrivateKey, swLibraryEd25519},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := receiver.Ed25519Signature(vectorMsgID, strconv.Itoa(vectorTimestamp), []byte(vectorPayload), mustPrivateKey(t, tt.key))
			if got != tt.want {
				t.Errorf("Ed25519Signature = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestEd25519SignatureAgreesWithCryptoEd25519 signs by hand, with
// crypto/ed25519 over the specification's "{id}.{timestamp}.{body}", and
// checks both that the values are equal (Ed25519 is deterministic) and that
// crypto/ed25519 verifies the package's value with the public key alone.
func TestEd25519SignatureAgreesWithCryptoEd25519(t *testing.T) {
	t.Parallel()
	priv := mustPrivateKey(t, vectorPrivateKey)
	pub := ed25519.PublicKey(mustPublicKey(t, vectorPublicKey))
	tests := []struct{ name, id, ts, body string }{
		{"reference content", vectorMsgID, strconv.Itoa(vectorTimestamp), vectorPayload},
		{"empty body", vectorMsgID, strconv.Itoa(vectorTimestamp), ""},
		{"dots in id and body", "a.b", "0", ".c."},
		{"utf-8 and a large body", "evt_ü", "1700000000", strings.Repeat("héllo ", 50_000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			content := []byte(tt.id + "." + tt.ts + "." + tt.body)
			want := "v1a," + base64.StdEncoding.EncodeToString(ed25519.Sign(ed25519.PrivateKey(priv), content))
			got := receiver.Ed25519Signature(tt.id, tt.ts, []byte(tt.body), priv)
			if got != want {
				t.Fatalf("Ed25519Signature = %q, want %q", got, want)
			}
			sig, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(got, "v1a,"))
			if err != nil || !ed25519.Verify(pub, content, sig) {
				t.Fatalf("crypto/ed25519 does not verify %q (%v)", got, err)
			}
		})
	}
}

func TestEd25519SignatureWithSeveralKeys(t *testing.T) {
	t.Parallel()
	current := mustPrivateKey(t, vectorPrivateKey)
	_, other, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	previous := receiver.PrivateKey(other)
	ts, body := strconv.Itoa(vectorTimestamp), []byte(vectorPayload)
	one := func(k receiver.PrivateKey) string { return receiver.Ed25519Signature(vectorMsgID, ts, body, k) }
	tests := []struct {
		name string
		keys []receiver.PrivateKey
		want string
	}{
		{"no key gives an empty header", nil, ""},
		{"one key, one value", []receiver.PrivateKey{current}, vectorEd25519},
		{"two keys, space-separated in the order given", []receiver.PrivateKey{current, previous}, vectorEd25519 + " " + one(previous)},
		{"order is kept, not sorted", []receiver.PrivateKey{previous, current}, one(previous) + " " + vectorEd25519},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := receiver.Ed25519Signature(vectorMsgID, ts, body, tt.keys...); got != tt.want {
				t.Errorf("Ed25519Signature = %q, want %q", got, tt.want)
			}
		})
	}
}
