package receiver_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	svix "github.com/svix/svix-webhooks/go"

	"github.com/webhookd/webhookd/receiver"
	"github.com/webhookd/webhookd/signer"
)

// The test vector of the Standard Webhooks Go library
// (libraries/go/webhook_test.go, TestWebhookSign and newTestPayload).
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorMsgID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTimestamp = 1614265330
	vectorPayload   = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	// vectorWrong is the library's "invalid signature" value.
	vectorWrong = "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="
)

// at returns a clock stopped at t.
func at(t time.Time) func() time.Time { return func() time.Time { return t } }

func newVerifier(t testing.TB, now time.Time, secrets ...string) *receiver.Verifier {
	t.Helper()
	v, err := receiver.NewVerifier(receiver.VerifierConfig{Secrets: secrets, Now: at(now)})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func vectorHeader(id, ts, sig string) http.Header {
	h := http.Header{}
	for k, v := range map[string]string{receiver.HeaderID: id, receiver.HeaderTimestamp: ts, receiver.HeaderSignature: sig} {
		if v != "" {
			h.Set(k, v)
		}
	}
	return h
}

// TestStandardWebhooksVectors runs the library's own cases, with the clock
// pinned instead of signing at time.Now, and checks that the library agrees
// with every verdict.
func TestStandardWebhooksVectors(t *testing.T) {
	t.Parallel()
	signed := time.Unix(vectorTimestamp, 0)
	ts := strconv.Itoa(vectorTimestamp)
	tests := []struct {
		name   string
		now    time.Time
		header http.Header
		want   error
	}{
		{"valid signature is valid", signed, vectorHeader(vectorMsgID, ts, vectorSignature), nil},
		{"missing id", signed, vectorHeader("", ts, vectorSignature), receiver.ErrMissingHeader},
		{"missing timestamp", signed, vectorHeader(vectorMsgID, "", vectorSignature), receiver.ErrMissingHeader},
		{"missing signature", signed, vectorHeader(vectorMsgID, ts, ""), receiver.ErrMissingHeader},
		{"invalid signature", signed, vectorHeader(vectorMsgID, ts, vectorWrong), receiver.ErrNoMatchingSignature},
		{"partial signature", signed, vectorHeader(vectorMsgID, ts, "v1,"), receiver.ErrNoMatchingSignature},
		{"old timestamp", signed.Add(5*time.Minute + time.Second), vectorHeader(vectorMsgID, ts, vectorSignature), receiver.ErrTimestampTooOld},
		{"new timestamp", signed.Add(-5*time.Minute - time.Second), vectorHeader(vectorMsgID, ts, vectorSignature), receiver.ErrTimestampTooNew},
		{"valid multi sig", signed, vectorHeader(vectorMsgID, ts,
			vectorWrong+" v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= "+vectorSignature+" "+vectorWrong), nil},
		{"other id", signed, vectorHeader("msg_other", ts, vectorSignature), receiver.ErrNoMatchingSignature},
		{"other timestamp", signed, vectorHeader(vectorMsgID, strconv.Itoa(vectorTimestamp+1), vectorSignature), receiver.ErrNoMatchingSignature},
	}
	wh, err := standardwebhooks.NewWebhook(vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := newVerifier(t, tt.now, vectorSecret).Verify(tt.header, []byte(vectorPayload))
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
			// The library checks against time.Now, so it can only be
			// asked about the cases whose clock is the signing time.
			if tt.now.Equal(signed) {
				libErr := wh.VerifyIgnoringTimestamp([]byte(vectorPayload), tt.header)
				if (libErr == nil) != (err == nil) {
					t.Errorf("library says %v, we say %v", libErr, err)
				}
			}
		})
	}
}

// TestVerifyAgreesWithSigners verifies deliveries signed by the Standard
// Webhooks library, by svix's and by webhookd's own signer, now.
func TestVerifyAgreesWithSigners(t *testing.T) {
	t.Parallel()
	secret, err := signer.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	key, err := signer.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	body := []byte(`{"id":"e1","type":"payout.paid","api_version":"2026-05-01","payload":{"id":"po_1"},"date":"2026-11-23T09:14:05.123Z"}`)
	libSig, err := wh.Sign("e1", now, body)
	if err != nil {
		t.Fatal(err)
	}
	sx, err := svix.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	svixSig, err := sx.Sign("e1", now, body)
	if err != nil {
		t.Fatal(err)
	}
	ours := http.Header{}
	signer.SetHeaders(ours, "e1", now, body, key)
	lib := vectorHeader("e1", strconv.FormatInt(now.Unix(), 10), libSig)
	svixHeader := vectorHeader("e1", strconv.FormatInt(now.Unix(), 10), svixSig)

	v, err := receiver.NewVerifier(receiver.VerifierConfig{Secrets: []string{secret}}) // the real clock
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]http.Header{"library": lib, "svix library": svixHeader, "signer": ours} {
		if err := v.Verify(h, body); err != nil {
			t.Errorf("signed by the %s: %v", name, err)
		}
		if err := wh.Verify(body, h); err != nil {
			t.Errorf("signed by the %s: the library refuses it: %v", name, err)
		}
		if err := v.Verify(h, append(body[:len(body):len(body)], ' ')); !errors.Is(err, receiver.ErrNoMatchingSignature) {
			t.Errorf("signed by the %s, body changed: %v", name, err)
		}
	}
}

// TestVerifyRotation: during a rotation webhookd sends two signatures; a
// receiver with either secret, or both, accepts; one with neither refuses.
func TestVerifyRotation(t *testing.T) {
	t.Parallel()
	secrets := make([]string, 3)
	keys := make([]signer.Key, 3)
	for i := range secrets {
		var err error
		if secrets[i], err = signer.NewSecret(); err != nil {
			t.Fatal(err)
		}
		if keys[i], err = signer.ParseSecret(secrets[i]); err != nil {
			t.Fatal(err)
		}
	}
	oldSecret, newSecret, otherSecret := secrets[0], secrets[1], secrets[2]
	now := time.Unix(1795000000, 0)
	body := []byte(`{"id":"e1"}`)
	both, onlyNew := http.Header{}, http.Header{}
	signer.SetHeaders(both, "e1", now, body, keys[1], keys[0])
	signer.SetHeaders(onlyNew, "e1", now, body, keys[1])
	tests := []struct {
		name    string
		secrets []string
		header  http.Header
		ok      bool
	}{
		{"old secret, two signatures", []string{oldSecret}, both, true},
		{"new secret, two signatures", []string{newSecret}, both, true},
		{"both secrets, two signatures", []string{oldSecret, newSecret}, both, true},
		{"both secrets, after the overlap", []string{oldSecret, newSecret}, onlyNew, true},
		{"old secret, after the overlap", []string{oldSecret}, onlyNew, false},
		{"unrelated secret", []string{otherSecret}, both, false},
		{"unrelated and old secret", []string{otherSecret, oldSecret}, both, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := newVerifier(t, now, tt.secrets...).Verify(tt.header, body)
			if tt.ok != (err == nil) {
				t.Fatalf("Verify = %v, want ok %v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, receiver.ErrNoMatchingSignature) {
				t.Fatalf("Verify = %v, want ErrNoMatchingSignature", err)
			}
		})
	}
}

// TestVerifyErrors: each kind of failure is its own error, and the typed
// errors say which header and which direction.
func TestVerifyErrors(t *testing.T) {
	t.Parallel()
	now := time.Unix(vectorTimestamp, 0)
	v := newVerifier(t, now, vectorSecret)
	payload := []byte(vectorPayload)
	tests := []struct {
		name string
		ts   string
		want error
	}{
		{"not Unix seconds (all such cases: TestParseTimestamp)", "+" + strconv.Itoa(vectorTimestamp), receiver.ErrInvalidTimestamp},
		{"milliseconds", strconv.Itoa(vectorTimestamp) + "000", receiver.ErrTimestampTooNew},
		{"too long", strings.Repeat("9", 40), receiver.ErrInvalidTimestamp},
		{"exactly 5 minutes old", strconv.Itoa(vectorTimestamp - 300), receiver.ErrNoMatchingSignature},
		{"5 minutes and a second old", strconv.Itoa(vectorTimestamp - 301), receiver.ErrTimestampTooOld},
		{"exactly 5 minutes ahead", strconv.Itoa(vectorTimestamp + 300), receiver.ErrNoMatchingSignature},
		{"5 minutes and a second ahead", strconv.Itoa(vectorTimestamp + 301), receiver.ErrTimestampTooNew},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := v.VerifyValues(vectorMsgID, tt.ts, vectorSignature, payload)
			if !errors.Is(err, tt.want) {
				t.Fatalf("VerifyValues = %v, want %v", err, tt.want)
			}
		})
	}

	var missing *receiver.MissingHeaderError
	if err := v.VerifyValues(vectorMsgID, "", vectorSignature, payload); !errors.As(err, &missing) || missing.Header != receiver.HeaderTimestamp {
		t.Errorf("missing timestamp: %v", err)
	}
	var stale *receiver.TimestampError
	err := v.VerifyValues(vectorMsgID, strconv.Itoa(vectorTimestamp-600), vectorSignature, payload)
	if !errors.As(err, &stale) || stale.Tolerance != receiver.DefaultTolerance || errors.Is(err, receiver.ErrTimestampTooNew) {
		t.Errorf("10 minutes old: %v", err)
	}
	// A header map built by hand with lower-case keys is read too.
	h := http.Header{"webhook-id": {vectorMsgID}, "webhook-timestamp": {strconv.Itoa(vectorTimestamp)}, "webhook-signature": {vectorSignature}}
	if err := v.Verify(h, payload); err != nil {
		t.Errorf("lower-case header map: %v", err)
	}
}

// TestVerifyMissingHeaders: each of the three headers is required, under
// its Standard Webhooks name.
func TestVerifyMissingHeaders(t *testing.T) {
	t.Parallel()
	v := newVerifier(t, time.Unix(vectorTimestamp, 0), vectorSecret)
	ts := strconv.Itoa(vectorTimestamp)
	for _, tt := range []struct {
		name    string
		header  http.Header
		missing string
	}{
		{"no headers at all", http.Header{}, receiver.HeaderID},
		{"empty webhook-signature", http.Header{"Webhook-Id": {vectorMsgID}, "Webhook-Timestamp": {ts}, "Webhook-Signature": {""}}, receiver.HeaderSignature},
		{"svix-* headers only", http.Header{"Svix-Id": {vectorMsgID}, "Svix-Timestamp": {ts}, "Svix-Signature": {vectorSignature}}, receiver.HeaderID},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := v.Verify(tt.header, []byte(vectorPayload))
			var missing *receiver.MissingHeaderError
			if !errors.Is(err, receiver.ErrMissingHeader) || !errors.As(err, &missing) || missing.Header != tt.missing {
				t.Fatalf("Verify = %v, want the missing header %s", err, tt.missing)
			}
		})
	}
}

// TestVerifySignatureHeader: only an exact "v1,<base64>" value, one of
// several space-separated ones, is the signature; the right digest in any
// other form is not.
func TestVerifySignatureHeader(t *testing.T) {
	t.Parallel()
	v := newVerifier(t, time.Unix(vectorTimestamp, 0), vectorSecret)
	digest := vectorSignature[len("v1,"):]
	for _, tt := range []struct {
		name, header string
		ok           bool
	}{
		{"the vector", vectorSignature, true},
		{"after unknown versions and junk", "v1a,AAAA v2," + digest + " junk v1, " + vectorSignature, true},
		{"twice", vectorSignature + " " + vectorSignature, true},
		{"garbage", "not a signature at all", false},
		{"v1 prefix with an empty value", "v1,", false},
		{"digest without version", digest, false},
		{"digest under v2 only", "v2," + digest, false},
		{"digest under V1 (case matters)", "V1," + digest, false},
		{"comma-separated list", "v1,x," + vectorSignature, false},
		{"digest without base64 padding", vectorSignature[:len(vectorSignature)-1], false},
		{"separated by a comma and a space", vectorWrong + ", " + vectorSignature, true},
		{"separated by a tab", vectorWrong + "\t" + vectorSignature, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := v.VerifyValues(vectorMsgID, strconv.Itoa(vectorTimestamp), tt.header, []byte(vectorPayload))
			if tt.ok != (err == nil) || (err != nil && !errors.Is(err, receiver.ErrNoMatchingSignature)) {
				t.Fatalf("VerifyValues = %v, want ok %v or ErrNoMatchingSignature", err, tt.ok)
			}
		})
	}
}

// TestVerifierTolerance: a configured tolerance replaces the default in
// both directions.
func TestVerifierTolerance(t *testing.T) {
	t.Parallel()
	signed := time.Unix(vectorTimestamp, 0)
	for _, tt := range []struct {
		name      string
		tolerance time.Duration
		skew      time.Duration
		want      error
	}{
		{"default, 4 minutes late", 0, 4 * time.Minute, nil},
		{"30 s, 31 s late", 30 * time.Second, 31 * time.Second, receiver.ErrTimestampTooOld},
		{"30 s, 31 s early", 30 * time.Second, -31 * time.Second, receiver.ErrTimestampTooNew},
		{"30 s, 30 s early", 30 * time.Second, -30 * time.Second, nil},
		{"1 h, 59 min late", time.Hour, 59 * time.Minute, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, err := receiver.NewVerifier(receiver.VerifierConfig{Secrets: []string{vectorSecret},
				Tolerance: tt.tolerance, Now: at(signed.Add(tt.skew))})
			if err != nil {
				t.Fatal(err)
			}
			if err := v.VerifyValues(vectorMsgID, strconv.Itoa(vectorTimestamp), vectorSignature, []byte(vectorPayload)); !errors.Is(err, tt.want) {
				t.Fatalf("VerifyValues = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestNewVerifierRefusesBadSecrets, without quoting the secret.
func TestNewVerifierRefusesBadSecrets(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		secrets []string
	}{
		{"none", nil},
		{"no prefix", []string{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}},
		{"empty key", []string{"whsec_"}},
		{"not base64", []string{"whsec_not*base64!"}},
		{"second one bad", []string{vectorSecret, "sk_live_abc"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := receiver.NewVerifier(receiver.VerifierConfig{Secrets: tt.secrets})
			if !errors.Is(err, receiver.ErrInvalidSecret) {
				t.Fatalf("NewVerifier = %v, want ErrInvalidSecret", err)
			}
			for _, s := range tt.secrets {
				if len(s) > 6 && strings.Contains(err.Error(), s[6:]) {
					t.Errorf("error %q quotes the secret", err)
				}
			}
		})
	}
	if _, err := receiver.NewVerifier(receiver.VerifierConfig{Secrets: []string{vectorSecret}, Tolerance: -time.Second}); err == nil {
		t.Error("negative tolerance accepted")
	}
}
