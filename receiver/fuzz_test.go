package receiver_test

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/receiver"
)

// FuzzVerify feeds arbitrary id, timestamp and signature headers to
// VerifyValues. It must never panic, and must accept only when one of the
// "v1," values is exactly the signature Signature produces for those inputs.
func FuzzVerify(f *testing.F) {
	key := mustKey(f, vectorSecret)
	now := time.Unix(vectorTimestamp, 0)
	ts := strconv.Itoa(vectorTimestamp)
	good := receiver.Signature(vectorMsgID, ts, []byte(vectorPayload), key)
	seeds := []struct{ id, ts, sig, body string }{
		{vectorMsgID, ts, good, vectorPayload},
		{vectorMsgID, ts, "v1a,xyz v2,abc " + good, vectorPayload},
		{vectorMsgID, ts, good + " " + good, vectorPayload},
		{vectorMsgID, ts, "v1,", vectorPayload},
		{vectorMsgID, ts, ",,, ,  v1", vectorPayload},
		{vectorMsgID, ts, "v1," + good, vectorPayload},
		{vectorMsgID, "0" + ts, good, vectorPayload},
		{vectorMsgID, "+" + ts, good, vectorPayload},
		{vectorMsgID, "-1", good, vectorPayload},
		{vectorMsgID, "9223372036854775807", good, vectorPayload},
		{vectorMsgID, "", good, vectorPayload},
		{"", ts, good, vectorPayload},
		{vectorMsgID, ts, good, ""},
		{"a.b", ts, good, "c"},
		{vectorMsgID, ts, "\x00\xff v1,\xfe", "\x00"},
	}
	for _, s := range seeds {
		f.Add(s.id, s.ts, s.sig, []byte(s.body))
	}
	v := newVerifier(f, now, vectorSecret)
	f.Fuzz(func(t *testing.T, id, timestamp, signature string, body []byte) {
		err := v.VerifyValues(id, timestamp, signature, body)
		if err != nil {
			return
		}
		// Accepted: the inputs must be canonical and carry the real signature.
		n, perr := strconv.ParseInt(timestamp, 10, 64)
		if perr != nil || strconv.FormatInt(n, 10) != timestamp {
			t.Fatalf("accepted non-canonical timestamp %q", timestamp)
		}
		if d := now.Sub(time.Unix(n, 0)); d > receiver.DefaultTolerance || d < -receiver.DefaultTolerance {
			t.Fatalf("accepted timestamp %q outside the tolerance", timestamp)
		}
		want := receiver.Signature(id, timestamp, body, key)
		found := false
		for rest := signature; rest != ""; {
			var field string
			field, rest, _ = cut(rest, ' ')
			if field == want {
				found = true
			}
		}
		if !found {
			t.Fatalf("accepted signature %q without the expected value %q", signature, want)
		}
	})
}

// cut is strings.Cut written out, so that the oracle does not share the
// verifier's code.
func cut(s string, sep byte) (before, after string, found bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// FuzzVerifyTimestamp feeds arbitrary webhook-timestamp headers, each with
// a signature that is right for exactly that header text, so that only the
// timestamp parsing decides: VerifyValues must accept exactly the canonical
// decimal Unix seconds (no sign, no leading zero, no space) within the
// tolerance, and refuse everything else with ErrInvalidTimestamp,
// ErrTimestampTooOld or ErrTimestampTooNew.
func FuzzVerifyTimestamp(f *testing.F) {
	key := mustKey(f, vectorSecret)
	now := time.Unix(vectorTimestamp, 0)
	for _, ts := range []string{
		strconv.Itoa(vectorTimestamp), strconv.Itoa(vectorTimestamp + 300), strconv.Itoa(vectorTimestamp - 301), "0" + strconv.Itoa(vectorTimestamp),
		"+" + strconv.Itoa(vectorTimestamp), " " + strconv.Itoa(vectorTimestamp), strconv.Itoa(vectorTimestamp) + ".0", "1.614265330e9",
		"0", "-0", "", "999999999999999", "9999999999999999", "9223372036854775808", "0x6037a0f2", "١٦١٤٢٦٥٣٣٠",
	} {
		f.Add(ts)
	}
	v := newVerifier(f, now, vectorSecret)
	f.Fuzz(func(t *testing.T, timestamp string) {
		// The oracle signs by hand rather than with Signature.
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(vectorMsgID + "." + timestamp + "." + vectorPayload))
		sig := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
		err := v.VerifyValues(vectorMsgID, timestamp, sig, []byte(vectorPayload))

		n, perr := strconv.ParseInt(timestamp, 10, 64)
		canonical := perr == nil && n >= 0 && strconv.FormatInt(n, 10) == timestamp
		inside := canonical && now.Sub(time.Unix(n, 0)).Abs() <= receiver.DefaultTolerance
		switch {
		case timestamp == "":
			if !errors.Is(err, receiver.ErrMissingHeader) {
				t.Fatalf("empty timestamp: %v", err)
			}
		case inside:
			if err != nil {
				t.Fatalf("refused canonical timestamp %q: %v", timestamp, err)
			}
		case canonical:
			if !errors.Is(err, receiver.ErrTimestampTooOld) && !errors.Is(err, receiver.ErrTimestampTooNew) && !errors.Is(err, receiver.ErrInvalidTimestamp) {
				t.Fatalf("timestamp %q outside the tolerance: %v", timestamp, err)
			}
		default:
			if !errors.Is(err, receiver.ErrInvalidTimestamp) {
				t.Fatalf("non-canonical timestamp %q: %v, want ErrInvalidTimestamp", timestamp, err)
			}
		}
	})
}

// FuzzVerifyEd25519 is FuzzVerify for "v1a": a Verifier holding the
// reference public key must never panic, and must accept only when one of
// the "v1a," values is exactly the signature crypto/ed25519 makes with the
// private key over the specification's content. Ed25519 signing is
// deterministic, and forging another valid signature without the private
// key is what the scheme rules out.
func FuzzVerifyEd25519(f *testing.F) {
	priv := ed25519.PrivateKey(mustPrivateKey(f, vectorPrivateKey))
	now := time.Unix(vectorTimestamp, 0)
	ts := strconv.Itoa(vectorTimestamp)
	good := signV1a(priv, vectorMsgID, ts, vectorPayload)
	for _, s := range []struct{ id, ts, sig, body string }{
		{vectorMsgID, ts, good, vectorPayload},
		{vectorMsgID, ts, vectorSignature + " v2,abc " + good, vectorPayload},
		{vectorMsgID, ts, "v1a,", vectorPayload},
		{vectorMsgID, ts, "v1a," + good, vectorPayload},
		{vectorMsgID, ts, good[:len(good)-2] + "==", vectorPayload},
		{vectorMsgID, ts, "v1a,////////////////////////////////////////////////////////////////////////////////////w==", vectorPayload},
		{vectorMsgID, ts, good, ""},
		{"a.b", ts, good, "c"},
		{vectorMsgID, ts, "\x00\xff v1a,\xfe", "\x00"},
	} {
		f.Add(s.id, s.ts, s.sig, []byte(s.body))
	}
	v, err := receiver.NewVerifier(receiver.VerifierConfig{PublicKeys: []string{vectorPublicKey}, Now: at(now)})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, id, timestamp, signature string, body []byte) {
		if v.VerifyValues(id, timestamp, signature, body) != nil {
			return
		}
		want := signV1a(priv, id, timestamp, string(body))
		for rest := signature; rest != ""; {
			var field string
			field, rest, _ = cut(rest, ' ')
			if field == want {
				return
			}
		}
		t.Fatalf("accepted signature %q without the expected value %q", signature, want)
	})
}

// FuzzParsePublicKey: ParsePublicKey never panics, and what it accepts is
// exactly "whpk_" and the canonical base64 of 32 bytes, which String
// writes back unchanged.
func FuzzParsePublicKey(f *testing.F) {
	for _, s := range []string{vectorPublicKey, vectorPrivateKey, vectorSecret, "whpk_", "whpk_AAAA", "whpk_" + vectorPublicKey[5:len(vectorPublicKey)-1], "whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir5="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := receiver.ParsePublicKey(s)
		if err != nil {
			if !errors.Is(err, receiver.ErrInvalidPublicKey) {
				t.Fatalf("error %v does not match ErrInvalidPublicKey", err)
			}
			return
		}
		if len(k) != ed25519.PublicKeySize || k.String() != s {
			t.Fatalf("accepted %q as %d bytes printing %q", s, len(k), k.String())
		}
	})
}

// FuzzParsePrivateKey: ParsePrivateKey never panics, never quotes its
// input in an error, and what it accepts is a 64-byte key whose public half
// is the one its seed derives.
func FuzzParsePrivateKey(f *testing.F) {
	for _, s := range []string{vectorPrivateKey, vectorPublicKey, vectorSecret, "whsk_", "whsk_AAAA", vectorPrivateKey[:len(vectorPrivateKey)-2]} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := receiver.ParsePrivateKey(s)
		if err != nil {
			if !errors.Is(err, receiver.ErrInvalidSecret) {
				t.Fatalf("error %v does not match ErrInvalidSecret", err)
			}
			if raw := s[min(len(s), 5):]; len(raw) > 8 && strings.Contains(err.Error(), raw) {
				t.Fatalf("error %q quotes the key", err)
			}
			return
		}
		if len(k) != ed25519.PrivateKeySize {
			t.Fatalf("accepted %d bytes", len(k))
		}
		if derived := ed25519.NewKeyFromSeed(k[:ed25519.SeedSize]); string(derived) != string(k) {
			t.Fatal("accepted a key whose public half does not match its seed")
		}
	})
}
