package signer_test

import (
	"encoding/base64"
	"errors"
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

func TestSignUsesWholeSecondsOnly(t *testing.T) {
	k := mustKey(t, vectorSecret)
	got := signer.Sign(vectorID, time.Unix(vectorTS, 999_999_999), []byte(vectorBody), k)
	if got != vectorSig {
		t.Errorf("Sign with sub-second timestamp = %q, want %q", got, vectorSig)
	}
}

func TestSetHeaders(t *testing.T) {
	k := mustKey(t, vectorSecret)
	h := http.Header{}
	signer.SetHeaders(h, vectorID, time.Unix(vectorTS, 0), []byte(vectorBody), k)
	checkVectorHeaders(t, h, vectorSig)
}

// checkVectorHeaders checks the three headers of the vector's delivery,
// signed to signature.
func checkVectorHeaders(t *testing.T, h http.Header, signature string) {
	t.Helper()
	want := map[string]string{
		"webhook-id":        vectorID,
		"webhook-timestamp": strconv.Itoa(vectorTS),
		"webhook-signature": signature,
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

// TestInteropReferenceSignaturesEqualOurs: the reference libraries sign
// exactly as Sign does. That they verify with package receiver is
// receiver's TestVerifyAgreesWithSigners.
func TestInteropReferenceSignaturesEqualOurs(t *testing.T) {
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
	for _, s := range signers {
		t.Run(s.name, func(t *testing.T) {
			sig, err := s.sign(id, now, body)
			if err != nil {
				t.Fatal(err)
			}
			if want := signer.Sign(id, now, body, mustKey(t, secret)); sig != want {
				t.Errorf("%s signed %q, we sign %q", s.name, sig, want)
			}
		})
	}
}
