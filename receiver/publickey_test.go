package receiver_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/receiver"
)

// The Ed25519 key pair of the Svix server's tests (the Standard Webhooks
// reference implementation, server/svix-server/src/worker.rs
// test_asymmetric_key_signing and core/types/mod.rs): the "whsk_" key
// signs vectorMsgID, vectorTimestamp and vectorPayload to vectorEd25519,
// and vectorPublicKey is its public key.
const (
	vectorPrivateKey = "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg=="
	vectorPublicKey  = "whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4="
	vectorEd25519    = "v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg=="
)

// The Ed25519 vector of the Standard Webhooks Go library
// (libraries/go/webhook_asymmetric_test.go, TestAsymmetricWebhookSign, on
// its main branch; no released version has Ed25519): the key is a 32-byte
// seed, with the "whsk_" prefix the library strips, and signs vectorMsgID,
// vectorTimestamp and vectorPayload to swLibraryEd25519.
const (
	swLibraryPrivateKey = "whsk_VEVTVFNJR05JTkdLRVlET05PVFVTRVRISVNGT1JBTlk="
	swLibraryEd25519    = "v1a,tQ9V2XOqn7jL/DQenEFpqIugdBVtiMmER5mhSkXBNwM0mkATuDe6KYYUuxqtaiHeYGb7KaaBRdM5WqyeFiL8Ag=="
)

func mustPublicKey(t testing.TB, s string) receiver.PublicKey {
	t.Helper()
	k, err := receiver.ParsePublicKey(s)
	if err != nil {
		t.Fatalf("ParsePublicKey: %v", err)
	}
	return k
}

func TestParsePublicKey(t *testing.T) {
	t.Parallel()
	b64 := func(n int) string { return base64.StdEncoding.EncodeToString(make([]byte, n)) }
	tests := []struct {
		name    string
		in      string
		wantErr string // substring of the error; "" means valid
	}{
		{"reference public key", vectorPublicKey, ""},
		{"32 zero bytes", "whpk_" + b64(32), ""},
		{"missing prefix", strings.TrimPrefix(vectorPublicKey, "whpk_"), `missing "whpk_" prefix`},
		{"a secret pasted instead", vectorSecret, `missing "whpk_" prefix`},
		{"the private key pasted instead", vectorPrivateKey, `missing "whpk_" prefix`},
		{"empty string", "", `missing "whpk_" prefix`},
		{"surrounding space (NewVerifier trims it, ParsePublicKey does not)", " " + vectorPublicKey, `missing "whpk_" prefix`},
		{"prefix only", "whpk_", "0 bytes, want 32"},
		{"31 bytes", "whpk_" + b64(31), "31 bytes, want 32"},
		{"33 bytes", "whpk_" + b64(33), "33 bytes, want 32"},
		{"64 bytes, a private key's length", "whpk_" + b64(64), "64 bytes, want 32"},
		{"not base64", "whpk_not*base64!", "not standard base64"},
		{"url-safe alphabet", "whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4=" + "-_", "not standard base64"},
		{"missing padding", strings.TrimSuffix(vectorPublicKey, "="), "not standard base64"},
		{"non-zero unused bits (a second spelling of the key)", "whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir5=", "not standard base64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key, err := receiver.ParsePublicKey(tt.in)
			if tt.wantErr == "" {
				if err != nil || key.String() != tt.in {
					t.Fatalf("ParsePublicKey = %v, %v; want the key back", key, err)
				}
				return
			}
			// A public key may be quoted, but a private key pasted in
			// its place must not be.
			checkRefusal(t, err, receiver.ErrInvalidPublicKey, tt.wantErr, strings.TrimPrefix(tt.in, "whsk_"))
		})
	}
}
