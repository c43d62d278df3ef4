package receiver_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/receiver"
)

// secondSecret is the other secret found in the reference libraries' tests.
const secondSecret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"

func mustKey(t testing.TB, secret string) receiver.Key {
	t.Helper()
	k, err := receiver.ParseSecret(secret)
	if err != nil {
		t.Fatalf("ParseSecret: %v", err)
	}
	return k
}

func TestParseSecret(t *testing.T) {
	t.Parallel()
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
		{"surrounding space (NewVerifier trims it, ParseSecret does not)", " " + vectorSecret, 0, `missing "whsec_" prefix`},
		{"prefix only", "whsec_", 0, "empty key"},
		{"not base64", "whsec_not*base64!", 0, "not standard base64"},
		{"url-safe alphabet", "whsec_ab-_ab-_", 0, "not standard base64"},
		{"missing padding", "whsec_YWJj" + "ZA", 0, "not standard base64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, err := receiver.ParseSecret(tt.in)
			if tt.wantErr == "" {
				if err != nil || len(key) != tt.wantLen {
					t.Fatalf("ParseSecret = %d bytes, %v; want %d bytes, nil", len(key), err, tt.wantLen)
				}
				return
			}
			checkRefusal(t, err, receiver.ErrInvalidSecret, tt.wantErr, strings.TrimPrefix(tt.in, "whsec_"))
		})
	}
}

// checkRefusal fails t unless err matches sentinel and mentions want, and
// fails it if err quotes raw, the key material of the refused input.
func checkRefusal(t *testing.T, err, sentinel error, want, raw string) {
	t.Helper()
	if !errors.Is(err, sentinel) || !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %v; want %v mentioning %q", err, sentinel, want)
	}
	if len(raw) > 3 && strings.Contains(err.Error(), raw) {
		t.Errorf("error %q quotes the key", err)
	}
}

func TestKeyIsRedactedWhenPrinted(t *testing.T) {
	t.Parallel()
	k := receiver.Key("super-secret-key")
	for _, verb := range []string{"%v", "%s", "%x", "%q", "%#v", "%+v"} {
		if got := fmt.Sprintf(verb, k); strings.Contains(got, "super") || strings.Contains(got, "7375706572") {
			t.Errorf("Sprintf(%s, key) = %q leaks the key", verb, got)
		}
	}
}
