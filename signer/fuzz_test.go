package signer_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/webhookd/webhookd/signer"
)

// FuzzVerify feeds arbitrary id, timestamp and signature headers to Verify.
// It must never panic, and must accept only when one of the "v1," values is
// exactly the signature this package would produce for those inputs.
func FuzzVerify(f *testing.F) {
	key := mustKey(f, vectorSecret)
	now := time.Unix(vectorTS, 0)
	good := signer.Sign(vectorID, now, []byte(vectorBody), key)
	ts := strconv.Itoa(vectorTS)
	seeds := []struct{ id, ts, sig, body string }{
		{vectorID, ts, good, vectorBody},
		{vectorID, ts, "v1a,xyz v2,abc " + good, vectorBody},
		{vectorID, ts, good + " " + good, vectorBody},
		{vectorID, ts, "v1,", vectorBody},
		{vectorID, ts, ",,, ,  v1", vectorBody},
		{vectorID, ts, "v1," + good, vectorBody},
		{vectorID, "0" + ts, good, vectorBody},
		{vectorID, "+" + ts, good, vectorBody},
		{vectorID, "-1", good, vectorBody},
		{vectorID, "9223372036854775807", good, vectorBody},
		{vectorID, "", good, vectorBody},
		{"", ts, good, vectorBody},
		{vectorID, ts, good, ""},
		{"a.b", ts, good, "c"},
		{vectorID, ts, "\x00\xff v1,\xfe", "\x00"},
	}
	for _, s := range seeds {
		f.Add(s.id, s.ts, s.sig, []byte(s.body))
	}
	v := signer.Verifier{Keys: []signer.Key{key}}
	f.Fuzz(func(t *testing.T, id, timestamp, signature string, body []byte) {
		err := v.VerifyValues(id, timestamp, signature, body, now)
		if err != nil {
			return
		}
		// Accepted: the inputs must be canonical and carry the real signature.
		n, perr := strconv.ParseInt(timestamp, 10, 64)
		if perr != nil || strconv.FormatInt(n, 10) != timestamp {
			t.Fatalf("accepted non-canonical timestamp %q", timestamp)
		}
		if d := now.Sub(time.Unix(n, 0)); d > signer.DefaultTolerance || d < -signer.DefaultTolerance {
			t.Fatalf("accepted timestamp %q outside the tolerance", timestamp)
		}
		want := signer.Sign(id, time.Unix(n, 0), body, key)
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
// timestamp parsing decides: Verify must accept exactly the canonical
// decimal Unix seconds (no sign, no leading zero, no space) within the
// tolerance, and refuse everything else with ErrInvalidTimestamp or
// ErrTimestampOutOfRange.
func FuzzVerifyTimestamp(f *testing.F) {
	key := mustKey(f, vectorSecret)
	now := time.Unix(vectorTS, 0)
	for _, ts := range []string{
		strconv.Itoa(vectorTS), strconv.Itoa(vectorTS + 300), strconv.Itoa(vectorTS - 301), "0" + strconv.Itoa(vectorTS),
		"+" + strconv.Itoa(vectorTS), " " + strconv.Itoa(vectorTS), strconv.Itoa(vectorTS) + ".0", "1.614265330e9",
		"0", "-0", "", "999999999999999", "9999999999999999", "9223372036854775808", "0x6037a0f2", "١٦١٤٢٦٥٣٣٠",
	} {
		f.Add(ts)
	}
	v := signer.Verifier{Keys: []signer.Key{key}}
	f.Fuzz(func(t *testing.T, timestamp string) {
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(vectorID + "." + timestamp + "." + vectorBody))
		sig := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
		err := v.VerifyValues(vectorID, timestamp, sig, []byte(vectorBody), now)

		n, perr := strconv.ParseInt(timestamp, 10, 64)
		canonical := perr == nil && n >= 0 && strconv.FormatInt(n, 10) == timestamp
		inside := canonical && now.Sub(time.Unix(n, 0)).Abs() <= signer.DefaultTolerance
		switch {
		case timestamp == "":
			if !errors.Is(err, signer.ErrMissingHeader) {
				t.Fatalf("empty timestamp: %v", err)
			}
		case inside:
			if err != nil {
				t.Fatalf("refused canonical timestamp %q: %v", timestamp, err)
			}
		case canonical:
			if !errors.Is(err, signer.ErrTimestampOutOfRange) && !errors.Is(err, signer.ErrInvalidTimestamp) {
				t.Fatalf("timestamp %q outside the tolerance: %v", timestamp, err)
			}
		default:
			if !errors.Is(err, signer.ErrInvalidTimestamp) {
				t.Fatalf("non-canonical timestamp %q: %v, want ErrInvalidTimestamp", timestamp, err)
			}
		}
	})
}
