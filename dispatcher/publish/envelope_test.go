package publish

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// encodedEnvelope is the envelope as encoding/json writes it whole, the
// reference Envelope's bytes must equal.
func encodedEnvelope(t *testing.T, id uuid.UUID, typ, version string, payload json.RawMessage, at time.Time) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(struct {
		ID         uuid.UUID       `json:"id"`
		Type       string          `json:"type"`
		APIVersion string          `json:"api_version"`
		Payload    json.RawMessage `json:"payload"`
		Date       string          `json:"date"`
	}{id, typ, version, payload, at.UTC().Format("2006-01-02T15:04:05.000Z07:00")})
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// TestEnvelopeBytes: the envelope appended by hand around the compacted
// payload is byte for byte the one encoding/json writes, whatever the
// payload's spacing and characters, the type's and version's, or the
// instant's zone and precision.
func TestEnvelopeBytes(t *testing.T) {
	id := uuid.MustParse("0195d1f4-9c1e-7c55-a1f2-3b4c5d6e7f80")
	at := time.Date(2026, 5, 1, 12, 0, 0, 123456789, time.FixedZone("x", 3600))
	for _, tc := range []struct{ name, typ, version, payload string }{
		{"a compact object", "payout.paid", "2026-05-01", `{"id":"po_1","amount":"1250.00"}`},
		{"a pretty object", "payout.paid", "2026-05-01", "{\n  \"id\": \"po_1\",\n  \"list\": [ 1, 2 ]\n}\n"},
		{"HTML kept unescaped", "a<b>&c", "v<1>", `{"h":"<script>&amp;</script>","u":"\u003c"}`},
		{"quotes and escapes", `t"y\pe`, "v\t1", `{"q":"\"\\\/\b\f\n\r\t","e":"\u00e9\ud83d\ude00"}`},
		{"unicode as UTF-8", "événement.créé", "2026", `{"k":"日本語","l":"\u2028\u2029"}`},
		{"not an object", "t", "v", `[1, "x", null, true, {"a": {}}]`},
		{"a bare string", "t", "v", `"s"`},
		{"an empty object", "", "", `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Envelope(id, tc.typ, tc.version, json.RawMessage(tc.payload), at)
			if err != nil {
				t.Fatal(err)
			}
			compact, err := compactObject(json.RawMessage(tc.payload))
			if err != nil {
				t.Fatal(err)
			}
			if want := encodedEnvelope(t, id, tc.typ, tc.version, compact, at); !bytes.Equal(got, want) {
				t.Fatalf("envelope\n got %s\nwant %s", got, want)
			}
			if !json.Valid(got) {
				t.Fatalf("envelope is not JSON: %s", got)
			}
		})
	}
}

// TestEnvelopeRefusesWhatIsNotJSON: a payload that does not parse is an
// error, never stored bytes.
func TestEnvelopeRefusesWhatIsNotJSON(t *testing.T) {
	for _, payload := range []string{``, `{`, `{"a":}`, `{} {}`, "{\"a\":\"\x00\"}"} {
		if got, err := Envelope(uuid.New(), "t", "v", json.RawMessage(payload), time.Now()); err == nil {
			t.Fatalf("payload %q made envelope %s", payload, got)
		}
	}
}

// sameAsCompact fails t unless compactObject decides p as json.Compact
// does (on the payload trimmed of space): both refuse it, or both give the
// same bytes. json.Compact is the reference because every stored envelope
// before compactObject used jsontext was made with it: an event published
// twice must store the same bytes.
func sameAsCompact(t *testing.T, p []byte) {
	t.Helper()
	var want bytes.Buffer
	wantErr := json.Compact(&want, bytes.TrimSpace(p))
	got, err := compactObject(p)
	switch {
	case (err == nil) != (wantErr == nil):
		t.Fatalf("compactObject(%q): %v, json.Compact: %v", p, err, wantErr)
	case err == nil && !bytes.Equal(got, want.Bytes()):
		t.Fatalf("compactObject(%q) = %q, json.Compact %q", p, got, want.Bytes())
	}
}

// TestCompactObjectAsCompact: the payload's compaction keeps every string
// and number as sent, drops only the space between tokens, and refuses
// what is not one JSON value.
func TestCompactObjectAsCompact(t *testing.T) {
	for _, p := range []string{
		`{"a":1}`, " {\n \"a\" : [ 1 , 2.50e+3 , -0 ] ,\t\"b\" : { } }\r\n", `"<&>"`, `"\u003c\u2028\/"`,
		`{"a":"\ud800"}`, "{\"a\":\"\xff\"}", `{"a":1,"a":2}`, `[]`, `null`, `1e999`, `-01`, `{} {}`, ``, `{`, `{"a":}`,
		"{\"a\":\"\x00\"}", `[1,]`, `{"a":1,}`, "\"\u2028\"",
	} {
		sameAsCompact(t, []byte(p))
	}
}

// FuzzCompactObject holds compactObject to json.Compact on any payload.
func FuzzCompactObject(f *testing.F) {
	for _, p := range []string{`{"a": [1, {"b": "c d"}]}`, `"\ud800"`, "{\"\xff\": 1}", `{"a":1,"a":2}`, `1.0e-5`} {
		f.Add([]byte(p))
	}
	f.Fuzz(sameAsCompact)
}

// sameAsValid holds validJSON to json.Valid on p: a payload refused as
// "not valid JSON" before is refused so still, and one accepted is.
func sameAsValid(t *testing.T, p []byte) {
	t.Helper()
	if got, want := validJSON(p), json.Valid(p); got != want {
		t.Fatalf("validJSON(%q) = %v, json.Valid %v", p, got, want)
	}
}

// TestValidJSONAsValid: the payload's check accepts exactly what
// json.Valid does: duplicate names, invalid UTF-8 and lone surrogates
// included, one value with space around it, nothing after it.
func TestValidJSONAsValid(t *testing.T) {
	for _, p := range []string{
		`{"a":1}`, " {\n \"a\" : [ 1 , 2.50e+3 , -0 ] ,\t\"b\" : { } }\r\n", `"<&>"`, `"\u003c\u2028\/"`,
		`{"a":"\ud800"}`, "{\"a\":\"\xff\"}", `{"a":1,"a":2}`, `[]`, `null`, `1e999`, `-01`, `{} {}`, ``, `{`, `{"a":}`,
		"{\"a\":\"\x00\"}", `[1,]`, `{"a":1,}`, "\"\u2028\"", `{"a":"\u00"}`, `{"a":"\x"}`, `{"a":01}`, `{"a":.5}`,
		`{"a":1.}`, `{"a":tru}`, "{\"a\":\"\t\"}", `{"a" 1}`, strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	} {
		sameAsValid(t, []byte(p))
	}
}

// FuzzValidJSON holds validJSON to json.Valid on any payload.
func FuzzValidJSON(f *testing.F) {
	for _, p := range []string{`{"a": [1, {"b": "c d"}]}`, `"\ud800"`, "{\"\xff\": 1}", `{"a":1,"a":2}`, `1.0e-5`, `{"a":1} x`} {
		f.Add([]byte(p))
	}
	f.Fuzz(sameAsValid)
}
