package payloadschema_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/payloadschema"
)

// FuzzCheck: whatever object a producer sends, Check never panics, and a
// refusal names a member under payload, by the schema's rule, in a message
// of bounded size that does not repeat a long value sent.
func FuzzCheck(f *testing.F) {
	types := catalogue.New(catalogue.Names()).Entries()
	v, err := payloadschema.New(payloadschema.Config{Mode: payloadschema.Enforce, Types: types})
	if err != nil {
		f.Fatal(err)
	}
	for i, et := range types {
		f.Add(uint8(i), string(et.Example))
	}
	f.Add(uint8(2), `{"amount":[{"a":{"b":[1,2,{"c":null}]}}],"metadata":{"0":1}}`)
	f.Add(uint8(2), `{"destination":{"type":"iban"},"failure":{"code":""}}`)
	f.Fuzz(func(t *testing.T, typ uint8, payload string) {
		if !json.Valid([]byte(payload)) || !strings.HasPrefix(strings.TrimSpace(payload), "{") || !utf8.ValidString(payload) {
			return // the publisher refuses these before the schema
		}
		et := types[int(typ)%len(types)]
		bad := v.Check("m_1", et.Name, json.RawMessage(payload))
		if bad == nil {
			return
		}
		if bad.Rule != payloadschema.Rule || !strings.HasPrefix(bad.Param, "payload") || len(bad.Message) > 2048 {
			t.Fatalf("refusal %+v", bad)
		}
		if long := strings.Repeat("x", 100); strings.Contains(payload, long) && strings.Contains(bad.Message, long) {
			t.Fatalf("the message repeats a long value: %s", bad.Message)
		}
	})
}
