package receiver_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/receiver"
)

// signV1a signs by hand, with crypto/ed25519 over the specification's
// content, so that the Verifier is checked against an implementation it
// does not share code with.
func signV1a(priv ed25519.PrivateKey, id, ts, body string) string {
	return "v1a," + base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte(id+"."+ts+"."+body)))
}

// newKeyPair returns a fresh key pair as the "whpk_" text and the raw
// private key.
func newKeyPair(t testing.TB) (string, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return receiver.PublicKey(pub).String(), priv
}

// TestVerifyEd25519 is the "v1a" half of the rules: a public key accepts
// its own signature and nothing else; a version the Verifier holds no key
// for is ignored, not an error; with secrets and public keys both, any
// match accepts.
func TestVerifyEd25519(t *testing.T) {
	t.Parallel()
	now := time.Unix(vectorTimestamp, 0)
	ts := strconv.Itoa(vectorTimestamp)
	refPriv := ed25519.PrivateKey(mustPrivateKey(t, vectorPrivateKey))
	oldPub, oldPriv := newKeyPair(t)
	strangerPub, _ := newKeyPair(t)
	v1a := signV1a(refPriv, vectorMsgID, ts, vectorPayload)
	if v1a != vectorEd25519 {
		t.Fatalf("hand-made signature %q differs from the reference %q", v1a, vectorEd25519)
	}
	v1aOld := signV1a(oldPriv, vectorMsgID, ts, vectorPayload)
	tests := []struct {
		name       string
		secrets    []string
		publicKeys []string
		now        time.Time
		id, sig    string
		body       string
		want       error
	}{
		{"reference vector", nil, []string{vectorPublicKey}, now, vectorMsgID, v1a, vectorPayload, nil},
		{"key with surrounding newline", nil, []string{vectorPublicKey + "\n"}, now, vectorMsgID, v1a, vectorPayload, nil},
		{"rotation: old key, two signatures", nil, []string{oldPub}, now, vectorMsgID, v1a + " " + v1aOld, vectorPayload, nil},
		{"rotation: new key, two signatures", nil, []string{vectorPublicKey}, now, vectorMsgID, v1a + " " + v1aOld, vectorPayload, nil},
		{"rotation: both keys, one signature", nil, []string{oldPub, vectorPublicKey}, now, vectorMsgID, v1a, vectorPayload, nil},
		{"unrelated key", nil, []string{strangerPub}, now, vectorMsgID, v1a, vectorPayload, receiver.ErrNoMatchingSignature},
		{"body changed", nil, []string{vectorPublicKey}, now, vectorMsgID, v1a, vectorPayload + " ", receiver.ErrNoMatchingSignature},
		{"other id", nil, []string{vectorPublicKey}, now, "msg_other", v1a, vectorPayload, receiver.ErrNoMatchingSignature},
		{"v1 values ignored without a secret", nil, []string{vectorPublicKey}, now, vectorMsgID, vectorSignature, vectorPayload, receiver.ErrNoMatchingSignature},
		{"v1a values ignored without a public key", []string{vectorSecret}, nil, now, vectorMsgID, v1a, vectorPayload, receiver.ErrNoMatchingSignature},
		{"v1a signature under the v1 tag", nil, []string{vectorPublicKey}, now, vectorMsgID, "v1," + strings.TrimPrefix(v1a, "v1a,"), vectorPayload, receiver.ErrNoMatchingSignature},
		{"mixed header, public key only", nil, []string{vectorPublicKey}, now, vectorMsgID, vectorSignature + " " + v1a, vectorPayload, nil},
		{"mixed header, secret only", []string{vectorSecret}, nil, now, vectorMsgID, vectorSignature + " " + v1a, vectorPayload, nil},
		{"secret and public key, only the v1a matches", []string{secondSecret}, []string{vectorPublicKey}, now, vectorMsgID, vectorSignature + " " + v1a, vectorPayload, nil},
		{"secret and public key, only the v1 matches", []string{vectorSecret}, []string{strangerPub}, now, vectorMsgID, vectorSignature + " " + v1a, vectorPayload, nil},
		{"malformed v1a values skipped", nil, []string{vectorPublicKey}, now, vectorMsgID,
			"v1a, v1a,*** v1a,AAAA " + v1a[:len(v1a)-4] + " " + v1a + "AAAA " + v1a, vectorPayload, nil},
		{"malformed v1a values only", nil, []string{vectorPublicKey}, now, vectorMsgID, "v1a, v1a,*** " + v1a[:len(v1a)-1] + "!", vectorPayload, receiver.ErrNoMatchingSignature},
		{"too old, signature valid", nil, []string{vectorPublicKey}, now.Add(5*time.Minute + time.Second), vectorMsgID, v1a, vectorPayload, receiver.ErrTimestampTooOld},
		{"too new, signature valid", nil, []string{vectorPublicKey}, now.Add(-5*time.Minute - time.Second), vectorMsgID, v1a, vectorPayload, receiver.ErrTimestampTooNew},
		{"missing signature", nil, []string{vectorPublicKey}, now, vectorMsgID, "", vectorPayload, receiver.ErrMissingHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v, err := receiver.NewVerifier(receiver.VerifierConfig{Secrets: tt.secrets, PublicKeys: tt.publicKeys, Now: at(tt.now)})
			if err != nil {
				t.Fatal(err)
			}
			err = v.Verify(vectorHeader(tt.id, ts, tt.sig), []byte(tt.body))
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestNewVerifierRefusesBadPublicKeys, with the error naming which key.
func TestNewVerifierRefusesBadPublicKeys(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name       string
		publicKeys []string
		want       string
	}{
		{"no prefix", []string{strings.TrimPrefix(vectorPublicKey, "whpk_")}, "public key #1"},
		{"the private key by mistake", []string{vectorPrivateKey}, "public key #1"},
		{"wrong length", []string{"whpk_AAAA"}, "public key #1"},
		{"second one bad", []string{vectorPublicKey, "whpk_not*base64!"}, "public key #2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := receiver.NewVerifier(receiver.VerifierConfig{Secrets: []string{vectorSecret}, PublicKeys: tt.publicKeys})
			if !errors.Is(err, receiver.ErrInvalidPublicKey) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewVerifier = %v, want ErrInvalidPublicKey naming %q", err, tt.want)
			}
			if strings.Contains(err.Error(), strings.TrimPrefix(vectorPrivateKey, "whsk_")[:8]) {
				t.Errorf("error %q quotes the private key", err)
			}
		})
	}
	if _, err := receiver.NewVerifier(receiver.VerifierConfig{}); !errors.Is(err, receiver.ErrInvalidSecret) {
		t.Errorf("NewVerifier with neither secrets nor public keys = %v, want ErrInvalidSecret", err)
	}
	if _, err := receiver.NewVerifier(receiver.VerifierConfig{PublicKeys: []string{vectorPublicKey}}); err != nil {
		t.Errorf("NewVerifier with a public key alone = %v", err)
	}
}

// TestVerifyEd25519RefusesASecondSpelling: the last character of a "v1a"
// value carries four unused bits; a value differing there decodes to the
// same signature under lenient base64, but only the canonical text counts,
// as for "v1" values, which are compared as text.
func TestVerifyEd25519RefusesASecondSpelling(t *testing.T) {
	t.Parallel()
	respelled := strings.TrimSuffix(vectorEd25519, "Ag==") + "Ah=="
	v, err := receiver.NewVerifier(receiver.VerifierConfig{PublicKeys: []string{vectorPublicKey}, Now: at(time.Unix(vectorTimestamp, 0))})
	if err != nil {
		t.Fatal(err)
	}
	err = v.VerifyValues(vectorMsgID, strconv.Itoa(vectorTimestamp), respelled, []byte(vectorPayload))
	if !errors.Is(err, receiver.ErrNoMatchingSignature) {
		t.Fatalf("Verify = %v, want ErrNoMatchingSignature", err)
	}
}

// TestReceiverAcceptsEd25519 sends deliveries over HTTP to a Receiver
// whose Verifier holds a public key alone: a "v1a" signature by its
// private key is handled; the HMAC signature the endpoint helper sends, and
// a "v1a" signature by another key, are answered 401 without running the
// handler.
func TestReceiverAcceptsEd25519(t *testing.T) {
	t.Parallel()
	pub, priv := newKeyPair(t)
	_, strangerPriv := newKeyPair(t)
	now := time.Unix(1795000000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	body := envelope("e1")
	signedBy := func(k ed25519.PrivateKey) func(http.Header) {
		return func(h http.Header) { h.Set(receiver.HeaderSignature, signV1a(k, "e1", ts, string(body))) }
	}
	tests := []struct {
		name    string
		edit    func(http.Header)
		status  int
		answer  string
		handled bool
	}{
		{"v1a by the private key", signedBy(priv), 200, "ok", true},
		{"v1 only, no secret held", func(http.Header) {}, 401, "no matching signature", false},
		{"v1a by another key", signedBy(strangerPriv), 401, "no matching signature", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEndpoint(t, func(c *receiver.Config) {
				v, err := receiver.NewVerifier(receiver.VerifierConfig{PublicKeys: []string{pub}, Now: at(now)})
				if err != nil {
					t.Fatal(err)
				}
				c.Verifier = v
			})
			status, answer := e.post(t, "e1", now, body, tt.edit)
			if status != tt.status || answer != tt.answer {
				t.Fatalf("answer %d %q, want %d %q", status, answer, tt.status, tt.answer)
			}
			if got := len(e.got()); (got == 1) != tt.handled || got > 1 {
				t.Fatalf("handler ran %d times, want handled %v", got, tt.handled)
			}
		})
	}
}
