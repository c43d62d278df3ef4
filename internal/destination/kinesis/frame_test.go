package kinesis

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/webhookd/webhookd/internal/destination"
)

// TestFrame: a record's data parses back to the body byte for byte and
// the headers in lowercase, whatever characters the body holds.
func TestFrame(t *testing.T) {
	for _, body := range []string{
		`{"id":"evt_1","data":{"note":"<b>&amp;</b>"}}`,
		"{\"text\":\"line\\nbreak\",\"emoji\":\"\U0001F600\",\"sep\":\"\u2028\"}",
		"eyJhbGciOiJSU0EtT0FFUC0yNTYiLCJlbmMiOiJBMjU2R0NNIn0.a.b.c.d", // a compact JWE, the encrypted body
		"raw\ttab \"quoted\" \\ backslash \x7f",
		"",
	} {
		m := destination.Message{Body: []byte(body), ContentType: "application/jose",
			Headers: map[string]string{"Webhook-Id": "msg_1", "webhook-signature": "v1,abc"}}
		data, err := frame(m)
		if err != nil {
			t.Fatalf("frame %q: %v", body, err)
		}
		var f Frame
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatalf("frame of %q does not parse: %v", body, err)
		}
		if f.Body != body {
			t.Errorf("body %q came back as %q", body, f.Body)
		}
		want := map[string]string{"webhook-id": "msg_1", "webhook-signature": "v1,abc", "content-type": "application/jose"}
		if len(f.Headers) != len(want) {
			t.Errorf("headers %v, want %v", f.Headers, want)
		}
		for k, v := range want {
			if f.Headers[k] != v {
				t.Errorf("header %s is %q, want %q", k, f.Headers[k], v)
			}
		}
	}
}

// TestFrameRefusesNonUTF8: a body a JSON string cannot carry byte for
// byte is refused, not changed under its signature.
func TestFrameRefusesNonUTF8(t *testing.T) {
	_, err := frame(destination.Message{Body: []byte{'{', 0xff, '}'}})
	code, said := destination.Classify(err)
	if code != destination.CodeRefused || said != saidNotText {
		t.Errorf("failed as %s: %s, want broker_refused: %s", code, said, saidNotText)
	}
}

// TestPartitionKeyRule: what Kinesis takes as is, and the hash of what
// it does not.
func TestPartitionKeyRule(t *testing.T) {
	hash := func(s string) string { sum := sha256.Sum256([]byte(s)); return hex.EncodeToString(sum[:]) }
	for _, tc := range []struct{ name, key, want string }{
		{"a short key", "payout_42", "payout_42"},
		{"256 characters of two bytes each", strings.Repeat("é", 256), strings.Repeat("é", 256)},
		{"128 characters of two UTF-16 units each", strings.Repeat("\U0001F600", 128), strings.Repeat("\U0001F600", 128)},
		{"129 characters of two UTF-16 units each", strings.Repeat("\U0001F600", 129), hash(strings.Repeat("\U0001F600", 129))},
		{"257 characters", strings.Repeat("k", 257), hash(strings.Repeat("k", 257))},
		{"not UTF-8", "key\xff", hash("key\xff")},
		{"empty", "", hash("")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := partitionKey(tc.key); got != tc.want {
				t.Errorf("partitionKey = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestConfirmed: the answer shows Kinesis's values only in Kinesis's
// form; anything else a compatible endpoint answers is no confirmation.
func TestConfirmed(t *testing.T) {
	for _, tc := range []struct {
		name, seq, shard, answer string
	}{
		{"Kinesis's answer", "49546986683135544286507457936321625675700192471156785154", "shardId-000000000000",
			"confirmed by Kinesis (sequence number 49546986683135544286507457936321625675700192471156785154, shard shardId-000000000000)"},
		{"no sequence number", "", "shardId-000000000000", ""},
		{"no shard", "1", "", ""},
		{"a sequence number with text", "1 <script>", "shardId-000000000000", ""},
		{"a shard with a newline", "1", "shardId-0\nforged", ""},
		{"a sequence number too long", strings.Repeat("9", 129), "shardId-000000000000", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := confirmed(tc.seq, tc.shard)
			if tc.answer != "" {
				if err != nil || got != tc.answer {
					t.Errorf("confirmed = %q, %v; want %q", got, err, tc.answer)
				}
				return
			}
			code, said := destination.Classify(err)
			if code != destination.CodeNotConfirmed || said != saidNoSeq || strings.Contains(said, tc.seq) && tc.seq != "" {
				t.Errorf("failed as %s: %s, want not_confirmed: %s", code, said, saidNoSeq)
			}
		})
	}
}

// TestClassify: Kinesis's answer to a wrong secret key is auth_failed,
// told by its status and code; its other answers keep awsdest's codes.
func TestClassify(t *testing.T) {
	answer := func(status int, code string) error {
		resp := &smithyhttp.Response{Response: &http.Response{StatusCode: status}}
		return &smithy.OperationError{ServiceID: "Kinesis", OperationName: "PutRecord",
			Err: &smithyhttp.ResponseError{Response: resp, Err: &smithy.GenericAPIError{Code: code, Message: "for account 123456789012"}}}
	}
	for _, tc := range []struct {
		code   string
		status int
		want   string
	}{
		{"InvalidSignatureException", 400, destination.CodeAuthFailed},
		{"UnrecognizedClientException", 400, destination.CodeAuthFailed},
		{"AccessDeniedException", 400, destination.CodeAuthFailed},
		{"KMSAccessDeniedException", 400, destination.CodeAuthFailed},
		{"ResourceNotFoundException", 400, destination.CodeRefused},
		{"ProvisionedThroughputExceededException", 400, destination.CodeRefused},
		{"InternalFailure", 500, destination.CodeNotConfirmed},
	} {
		t.Run(tc.code, func(t *testing.T) {
			code, said := destination.Classify(classify(answer(tc.status, tc.code)))
			want := "Kinesis answered HTTP " + strconv.Itoa(tc.status) + " " + tc.code
			if code != tc.want || said != want {
				t.Errorf("classified as %s: %s, want %s: %s", code, said, tc.want, want)
			}
		})
	}
}
