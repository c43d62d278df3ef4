package signer_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	svix "github.com/svix/svix-webhooks/go"

	"github.com/webhookd/webhookd/signer"
)

// Published Standard Webhooks test vector, used verbatim by the reference
// libraries of standard-webhooks and svix (Go, JS, Python, Java, Kotlin, and
// the svix server's own worker tests).
const (
	vectorSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTS     = 1614265330
	vectorBody   = `{"test": 2432232314}`
	vectorSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

// secondSecret is the other secret found in the reference libraries' tests.
const secondSecret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"

func mustKey(t testing.TB, secret string) signer.Key {
	t.Helper()
	k, err := signer.ParseSecret(secret)
	if err != nil {
		t.Fatalf("ParseSecret: %v", err)
	}
	return k
}

func mustSecret(t testing.TB) string {
	t.Helper()
	s, err := signer.NewSecret()
	if err != nil {
		t.Fatalf("NewSecret: %v", err)
	}
	return s
}

func TestSignMatchesKnownVectors(t *testing.T) {
	tests := []struct {
		name   string
		secret string
		id     string
		ts     int64
		body   string
		want   string
	}{
		{"published standard webhooks vector", vectorSecret, vectorID, vectorTS, vectorBody, vectorSig},
		// The cases below were computed independently with
		// `openssl dgst -sha256 -mac HMAC`, which also reproduces the vector above.
		{"empty body", vectorSecret, vectorID, vectorTS, "", "v1,v48jdbgvh29KJz2Qc+ghw8G6vG3nAKnujWBg8oM/62A="},
		{"second reference secret", secondSecret, "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk", 1700000000,
			`{"email":"test@example.com","username":"test_user"}`, "v1,NQdEbZKMXpv35zXGx8ugzf9/G9pQ+9FcOV1rDJueVyE="},
		{"utf-8 id and body, timestamp zero", secondSecret, "evt_ü", 0, "héllo", "v1,ltjdvHp/B91/7h+FgpADWkpow2kF60u0TkLdXMWYetM="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := signer.Sign(tt.id, time.Unix(tt.ts, 0), []byte(tt.body), mustKey(t, tt.secret))
			if got != tt.want {
				t.Errorf("Sign = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSignUsesWholeSecondsOnly(t *testing.T) {
	k := mustKey(t, vectorSecret)
	got := signer.Sign(vectorID, time.Unix(vectorTS, 999_999_999), []byte(vectorBody), k)
	if got != vectorSig {
		t.Errorf("Sign with sub-second timestamp = %q, want %q", got, vectorSig)
	}
}

func TestSignWithSeveralKeys(t *testing.T) {
	current, previous := mustKey(t, vectorSecret), mustKey(t, secondSecret)
	ts, body := time.Unix(vectorTS, 0), []byte(vectorBody)
	one := func(k signer.Key) string { return signer.Sign(vectorID, ts, body, k) }

	tests := []struct {
		name string
		keys []signer.Key
		want string
	}{
		{"no key gives an empty header", nil, ""},
		{"one key, one value", []signer.Key{current}, one(current)},
		{"two keys, space-separated in the order given", []signer.Key{current, previous}, one(current) + " " + one(previous)},
		{"order is kept, not sorted", []signer.Key{previous, current}, one(previous) + " " + one(current)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := signer.Sign(vectorID, ts, body, tt.keys...); got != tt.want {
				t.Errorf("Sign = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSetHeaders(t *testing.T) {
	k := mustKey(t, vectorSecret)
	h := http.Header{}
	signer.SetHeaders(h, vectorID, time.Unix(vectorTS, 0), []byte(vectorBody), k)
	want := map[string]string{
		"webhook-id":        vectorID,
		"webhook-timestamp": strconv.Itoa(vectorTS),
		"webhook-signature": vectorSig,
	}
	for name, v := range want {
		if got := h.Get(name); got != v {
			t.Errorf("header %s = %q, want %q", name, got, v)
		}
	}
}

func TestNewSecret(t *testing.T) {
	a, b := mustSecret(t), mustSecret(t)
	if a == b {
		t.Fatal("two NewSecret calls returned the same secret")
	}
	for _, s := range []string{a, b} {
		raw, ok := strings.CutPrefix(s, signer.SecretPrefix)
		if !ok {
			t.Fatalf("secret lacks the %q prefix", signer.SecretPrefix)
		}
		key, err := base64.StdEncoding.DecodeString(raw)
		if err != nil || len(key) != signer.KeySize {
			t.Fatalf("secret key: %d bytes, err %v; want %d bytes", len(key), err, signer.KeySize)
		}
		parsed := mustKey(t, s)
		if string(parsed) != string(key) {
			t.Error("ParseSecret(NewSecret()) does not return the generated key")
		}
	}
}

func TestParseSecret(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantLen int    // when valid
		wantErr string // substring of the error; "" means valid
	}{
		{"new 32-byte secret", "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 32)), 32, ""},
		{"24-byte reference secret", vectorSecret, 24, ""},
		{"missing prefix", strings.TrimPrefix(vectorSecret, "whsec_"), 0, `missing "whsec_" prefix`},
		{"other prefix", "sk_live_abc", 0, `missing "whsec_" prefix`},
		{"empty string", "", 0, `missing "whsec_" prefix`},
		{"prefix only", "whsec_", 0, "empty key"},
		{"not base64", "whsec_not*base64!", 0, "not standard base64"},
		{"url-safe alphabet", "whsec_ab-_ab-_", 0, "not standard base64"},
		{"missing padding", "whsec_YWJj" + "ZA", 0, "not standard base64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, err := signer.ParseSecret(tt.in)
			if tt.wantErr == "" {
				if err != nil || len(key) != tt.wantLen {
					t.Fatalf("ParseSecret = %d bytes, %v; want %d bytes, nil", len(key), err, tt.wantLen)
				}
				return
			}
			if !errors.Is(err, signer.ErrInvalidSecret) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ParseSecret error = %v; want ErrInvalidSecret mentioning %q", err, tt.wantErr)
			}
			if raw := strings.TrimPrefix(tt.in, "whsec_"); len(raw) > 3 && strings.Contains(err.Error(), raw) {
				t.Errorf("error %q quotes the secret", err)
			}
		})
	}
}

func TestKeyIsRedactedWhenPrinted(t *testing.T) {
	k := signer.Key("super-secret-key")
	for _, verb := range []string{"%v", "%s", "%x", "%q", "%#v", "%+v"} {
		if got := fmt.Sprintf(verb, k); strings.Contains(got, "super") || strings.Contains(got, "7375706572") {
			t.Errorf("Sprintf(%s, key) = %q leaks the key", verb, got)
		}
	}
}

func TestKeys(t *testing.T) {
	keys, err := signer.Keys([]signer.Secret{{ID: 1, Value: vectorSecret}, {ID: 2, Value: secondSecret}})
	if err != nil || len(keys) != 2 || string(keys[0]) != string(mustKey(t, vectorSecret)) {
		t.Fatalf("Keys = %d keys, %v; want both keys in order", len(keys), err)
	}
	_, err = signer.Keys([]signer.Secret{{ID: 7, Value: "nope"}})
	if !errors.Is(err, signer.ErrInvalidSecret) || !strings.Contains(err.Error(), "secret 7") {
		t.Errorf("Keys with a bad secret: %v; want ErrInvalidSecret naming secret 7", err)
	}
}

// headersFor builds the three headers as a sender would put them on the wire.
func headersFor(id string, ts time.Time, sig string) http.Header {
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	h.Set("webhook-signature", sig)
	return h
}

// The reference libraries read the wall clock, so these round trips sign at time.Now().
func TestInteropOurSignaturesVerifyInReferenceLibraries(t *testing.T) {
	current, previous := mustSecret(t), mustSecret(t)
	now := time.Now()
	body := []byte(`{"id":"evt_1","type":"payout.settled","payload":{"amount":"12.50"}}`)
	id := "0195d1f4-9c1e-7c55-a1f2-3b4c5d6e7f80"

	verifiers := []struct {
		name   string
		verify func(secret string, h http.Header) error
	}{
		{"standard-webhooks", func(secret string, h http.Header) error {
			wh, err := standardwebhooks.NewWebhook(secret)
			if err != nil {
				return err
			}
			return wh.Verify(body, h)
		}},
		{"svix", func(secret string, h http.Header) error {
			wh, err := svix.NewWebhook(secret)
			if err != nil {
				return err
			}
			return wh.Verify(body, h)
		}},
	}
	cases := []struct {
		name     string
		signWith []string
		verifier string
	}{
		{"single secret", []string{current}, current},
		{"rotation: receiver still on the previous secret", []string{current, previous}, previous},
		{"rotation: receiver already on the new secret", []string{current, previous}, current},
	}
	for _, v := range verifiers {
		for _, c := range cases {
			t.Run(v.name+"/"+c.name, func(t *testing.T) {
				keys := make([]signer.Key, len(c.signWith))
				for i, s := range c.signWith {
					keys[i] = mustKey(t, s)
				}
				h := http.Header{}
				signer.SetHeaders(h, id, now, body, keys...)
				if err := v.verify(c.verifier, h); err != nil {
					t.Fatalf("%s rejected our signature: %v", v.name, err)
				}
				other := mustSecret(t)
				if err := v.verify(other, h); err == nil {
					t.Fatalf("%s accepted our signature under an unrelated secret", v.name)
				}
			})
		}
	}
}

func TestInteropReferenceSignaturesVerifyWithOurs(t *testing.T) {
	secret := mustSecret(t)
	now := time.Now()
	body := []byte(`{"hello":"world"}`)
	id := "msg_interop"

	std, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	sx, err := svix.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	signers := []struct {
		name string
		sign func(string, time.Time, []byte) (string, error)
	}{
		{"standard-webhooks", std.Sign},
		{"svix", sx.Sign},
	}
	v, err := signer.NewVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range signers {
		t.Run(s.name, func(t *testing.T) {
			sig, err := s.sign(id, now, body)
			if err != nil {
				t.Fatal(err)
			}
			if want := signer.Sign(id, now, body, mustKey(t, secret)); sig != want {
				t.Errorf("%s signed %q, we sign %q", s.name, sig, want)
			}
			if err := v.Verify(headersFor(id, now, sig), body, now); err != nil {
				t.Errorf("Verify rejected a %s signature: %v", s.name, err)
			}
		})
	}
}
