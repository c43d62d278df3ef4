package admin

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher/publish"
)

// TestReadEnvelope: the envelope's payload and date read as encoding/json
// reads them, from the envelopes webhookd writes and from bodies only
// encoding/json takes (a key twice, text that is not UTF-8).
func TestReadEnvelope(t *testing.T) {
	written, err := publish.Envelope(uuid.New(), "payout.paid", "2026-05-01",
		json.RawMessage("{\n \"a\": [1, \"<\\u2028>\"],\n \"b\": {\"c\": null}\n}"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, body string
		ok         bool
	}{
		{"as published", string(written), true},
		{"a tombstone", `{"id":"x","type":"t","api_version":"v","payload":{},"date":"2026-01-01T00:00:00.000Z","erased":true}`, true},
		{"spaced out", " { \"payload\" : [ 1 ] , \"date\" : \"d\" } ", true},
		{"without a date", `{"payload":{"a":1}}`, true},
		{"a key twice", `{"payload":1,"payload":2,"date":"d"}`, true},
		{"not UTF-8", "{\"payload\":\"\xff\",\"date\":\"d\"}", true},
		{"not an object", `[1]`, false},
		{"not JSON", `{"payload":`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := readEnvelope([]byte(tc.body))
			var want envelope
			wantOK := json.Unmarshal([]byte(tc.body), &want) == nil
			if ok != tc.ok || wantOK != tc.ok {
				t.Fatalf("read %v, encoding/json %v, want %v", ok, wantOK, tc.ok)
			}
			if ok && !reflect.DeepEqual(got, want) {
				t.Fatalf("read %+v, encoding/json %+v", got, want)
			}
		})
	}
}
