package admin

import (
	"reflect"
	"testing"
)

// onePassTargets are the request types decodeJSONOnePass reads.
var onePassTargets = []func() any{
	func() any { return new(ingestRequest) },
	func() any { return new(ingestBatchRequest) },
}

// sameAsDecodeBody fails t unless decodeOnePass decides body as decodeBody
// does, for each ingest request type: the same error, or the same value.
func sameAsDecodeBody(t *testing.T, body []byte) {
	t.Helper()
	for _, target := range onePassTargets {
		fast, slow := target(), target()
		fastErr, slowErr := decodeOnePass(body, fast), decodeBody(body, slow)
		if !reflect.DeepEqual(fastErr, slowErr) {
			t.Fatalf("%T of %q: one pass answers %v, decodeBody %v", fast, body, fastErr, slowErr)
		}
		if slowErr == nil && !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%T of %q: one pass decodes %+v, decodeBody %+v", fast, body, fast, slow)
		}
	}
}

// TestDecodeOnePassAsDecodeBody: the ingest endpoints' one-pass decoder
// accepts what decodeBody accepts, into the same value, and refuses what
// it refuses, with the same error, whichever of its rules the body breaks.
func TestDecodeOnePassAsDecodeBody(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"a full event", `{"id":"0195d1f4-9c1e-7c55-a1f2-3b4c5d6e7f80","merchant_id":"m_1","type":"payout.paid","payload":{"a":[1,{"b":null}]},"api_version":"2026-01-01","deliver_at":"2026-12-01T00:00:00Z"}`},
		{"whitespace around and inside", " \n{ \"merchant_id\" : \"m\" , \"payload\" : { \"a\" : 1 } }\n "},
		{"a pretty payload kept as sent", "{\"payload\":{\n  \"a\": [1, 2]\n}}"},
		{"null fields", `{"id":null,"merchant_id":null,"payload":null}`},
		{"a payload that is not an object", `{"payload":[1,"x"]}`},
		{"empty strings", `{"id":"","api_version":""}`},
		{"an empty object", `{}`},
		{"a key in another case", `{"Merchant_id":"m"}`},
		{"an unknown key", `{"merchant":"m"}`},
		{"a key twice", `{"type":"a","type":"b"}`},
		{"a payload key twice", `{"payload":{"a":1,"a":2}}`},
		{"a wrong type", `{"type":1}`},
		{"two objects", `{} {}`},
		{"trailing garbage", `{"type":"a"}x`},
		{"not an object", `["x"]`},
		{"null", `null`},
		{"empty", ``},
		{"truncated", `{"type":"a"`},
		{"invalid UTF-8 in a value", "{\"type\":\"\xff\"}"},
		{"invalid UTF-8 in a key", "{\"\xff\":1}"},
		{"invalid UTF-8 in the payload", "{\"payload\":{\"a\":\"\xc3\"}}"},
		{"a NUL in a value", `{"merchant_id":"\u0000"}`},
		{"a NUL deep in the payload", `{"payload":{"a":{"b":["\u0000"]}}}`},
		{"a NUL in a payload key", `{"payload":{"\u0000":1}}`},
		{"a lone surrogate", `{"payload":{"a":"\ud800"}}`},
		{"a surrogate pair", `{"payload":{"a":"\ud83d\ude00"}}`},
		{"an escaped key", `{"merchant\u005fid":"m"}`},
		{"HTML in strings", `{"type":"<a&b>","payload":{"h":"<script>"}}`},
		{"a batch", `{"events":[{"merchant_id":"m","type":"t","payload":{}},{"merchant_id":"n","type":"t","payload":{"x":1}}]}`},
		{"a batch with a key in another case", `{"events":[{"merchant_id":"m"},{"Type":"t"}]}`},
		{"a batch with an unknown key", `{"events":[{"merchant_id":"m","extra":1}]}`},
		{"a batch of numbers", `{"events":[1]}`},
		{"a null batch", `{"events":null}`},
		{"a batch key twice", `{"events":[],"events":[{}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) { sameAsDecodeBody(t, []byte(tc.body)) })
	}
}

// FuzzDecodeOnePass holds the one-pass decoder to decodeBody on arbitrary
// bodies: the same answer and, when accepted, the same value.
func FuzzDecodeOnePass(f *testing.F) {
	for _, s := range []string{
		`{"id":"x","merchant_id":"m","type":"t","payload":{"a":[1,{"b":null}]},"api_version":"v"}`,
		`{"events":[{"merchant_id":"m","type":"payout.paid","payload":{}},{"Type":1}]}`,
		`{"payload":null}`, `{"payload":{"a":"\ud800"}}`, "{\"payload\":{\"a\":\"\xc3\"}}",
		`{"type":"a","type":"b"}`, `{"MERCHANT_ID":"m"}`, `{} {}`, `{"events":[{}],"events":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) { sameAsDecodeBody(t, body) })
}
