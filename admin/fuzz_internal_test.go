package admin

import (
	"bytes"
	"crypto/hmac"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
)

// The fuzz targets of this file hold the pure decoders of the API (bodies,
// cursors, list filters) to their contracts, without a database: they run
// far more inputs than the handler fuzz targets of fuzz_test.go.

// fuzzNow is the clock of the pure pager.
var fuzzNow = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// newPurePager is the pager a Server builds, on a fixed clock: it needs
// no store or Redis.
func newPurePager() pager {
	return pager{masterKey: bytes.Repeat([]byte{7}, 32), cursorTTL: defaultCursorTTL,
		clock: clock.Func(func() time.Time { return fuzzNow })}
}

// asAPIError checks that err is a 400 of spec 7 with one of codes, naming
// a parameter when the code is about one, and returns it.
func asAPIError(t *testing.T, err error, codes ...string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("refusal is not an API error: %v", err)
	}
	if e.Status != http.StatusBadRequest || e.Category != catInvalidRequest || !slices.Contains(codes, e.Code) {
		t.Fatalf("refusal %d %s %s, want 400 invalid_request_error with one of %v", e.Status, e.Category, e.Code, codes)
	}
	if e.Code != "validation_error" && (e.Param == nil || *e.Param == "") {
		t.Fatalf("%s without param: %s", e.Code, e.Message)
	}
	return e
}

// jsonNames are the json names of struct type t's fields.
func jsonNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		names = append(names, name)
	}
	return names
}

// FuzzDecodeBody feeds arbitrary bytes to the body decoder as each body
// type of the API: a refusal is a 400 validation_error or parameter_invalid
// naming the field; an acceptance is one UTF-8 JSON object whose keys are
// the type's json names exactly, holding no key or string, however deep,
// that a Postgres text or jsonb value cannot (a NUL, a lone surrogate).
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{
		`{"url":"https://example.com/h","events":["*"],"description":null,"metadata":{"k":"v"}}`,
		`{"URL":"x"}`, `{"url":1}`, `{"metadata":{"a":1}}`, "{\"url\":\"\xff\"}", "{\"\xff\":1}",
		`{"events":[{"merchant_id":"m","type":"payout.paid","payload":{}},{"Type":1}]}`, `{"events":[1]}`,
		`{"id":"x","merchant_id":"m","type":"t","payload":{"a":[1,{"b":null}]},"api_version":"v"}`,
		`null`, `[]`, `{} {}`, `{`, ``, `{"since":"2026-01-01T00:00:00Z","scopes":["a"]}`,
		`{"description":"\u0000","metadata":{"\u0000":"\u0000"}}`, "{\"merchant_id\":\"\x00\xff\"}",
		`{"url":"x","url":"y"}`,
		`{"merchant_id":"m","type":"t","payload":{"a":{"b":["\u0000"]}}}`, `{"payload":{"\u0000":1}}`,
		"{\"payload\":{\"a\":\"\xc3\"}}", `{"payload":{"a":"\ud800"}}`, `{"payload":{"a":"\\u0000\ud83d\ude00"}}`,
		`{"events":[{"payload":{}},{"payload":{"a":"\udc00"}}]}`, `{"headers":{"X-A":"\u0000"},"ordering":{"key":"\u0000"}}`,
	} {
		f.Add([]byte(s))
	}
	targets := []func() any{
		func() any { return new(subscriptionInput) },
		func() any { return new(subscriptionPatch) },
		func() any { return new(ingestRequest) },
		func() any {
			return new(struct {
				Events []ingestRequest `json:"events"`
			})
		},
		func() any { return new(portalSessionRequest) },
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, target := range targets {
			v := target()
			if err := decodeBody(body, v); err != nil {
				asAPIError(t, err, "validation_error", "parameter_invalid")
				continue
			}
			if !utf8.Valid(body) || !json.Valid(body) || bytes.TrimSpace(body)[0] != '{' {
				t.Fatalf("accepted %q as %T", body, v)
			}
			if f := invalid.FindText(body); f != nil {
				t.Fatalf("accepted %q as %T, holding %s at %v", body, v, f.Rule, f.Path)
			}
			var keys map[string]json.RawMessage
			if err := json.Unmarshal(body, &keys); err != nil {
				t.Fatalf("accepted %q, not an object: %v", body, err)
			}
			names := jsonNames(reflect.TypeOf(v).Elem())
			for k := range keys {
				if !slices.Contains(names, k) {
					t.Fatalf("accepted key %q as %T (fields %v)", k, v, names)
				}
			}
		}
	})
}

// fuzzListPath is the list that the pure fuzz targets page through.
const fuzzListPath = "/v1/x"

// requestWithQuery is a GET of fuzzListPath whose query string is raw.
func requestWithQuery(raw string) *http.Request {
	return &http.Request{Method: http.MethodGet, URL: &url.URL{Path: fuzzListPath, RawQuery: raw}}
}

// FuzzCursor feeds arbitrary cursors and queries to the page reader: a
// refusal is invalid_cursor, cursor_mismatch or a bad limit, each naming
// its parameter; a cursor it takes is one this server signed.
func FuzzCursor(f *testing.F) {
	s := newPurePager()
	good := s.encodeCursor(store.Cursor{CreatedAt: fuzzNow, ID: uuid.NewString()}, fuzzListPath, url.Values{"status": {"failed"}})
	for _, seed := range []struct{ cursor, query string }{
		{good, "status=failed"}, {good, "status=pending"}, {good, "limit=100&status=failed"}, {good, ""},
		{"", "limit=0"}, {"", "limit=-1"}, {"", "limit=99999999999999999999"}, {"", "limit=%ff"},
		{"e30.", ""}, {".", ""}, {"%%%", ""}, {strings.Replace(good, ".", "x.", 1), "status=failed"},
		{"\x00", "status=\x00"}, {"\xff.\xfe", "limit=\xff"}, {good, "status=failed&status=failed"},
	} {
		f.Add(seed.cursor, seed.query)
	}
	f.Fuzz(func(t *testing.T, cursor, query string) {
		q, _ := url.ParseQuery(query)
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		p, err := s.page(requestWithQuery(q.Encode()))
		if err != nil {
			e := asAPIError(t, err, "invalid_cursor", "cursor_mismatch", "parameter_invalid")
			if want := map[string]string{"parameter_invalid": "limit"}[e.Code]; want != "" && *e.Param != want ||
				e.Code != "parameter_invalid" && *e.Param != "cursor" {
				t.Fatalf("%s names %q", e.Code, *e.Param)
			}
			return
		}
		if p.Limit < 1 || p.Limit > maxLimit {
			t.Fatalf("limit %d accepted", p.Limit)
		}
		if p.After == nil {
			if cursor != "" {
				t.Fatalf("cursor %q ignored", cursor)
			}
			return
		}
		enc, sig, _ := strings.Cut(cursor, ".")
		payload, _ := base64.RawURLEncoding.DecodeString(enc)
		mac, _ := base64.RawURLEncoding.DecodeString(sig)
		if !hmac.Equal(mac, s.signCursor(payload)) {
			t.Fatalf("took cursor %q that this server did not sign", cursor)
		}
	})
}

// FuzzCursorRoundTrip: a cursor this server issues is read back as the
// same position, with the same filters, until it expires.
func FuzzCursorRoundTrip(f *testing.F) {
	s := newPurePager()
	f.Add(fuzzNow.UnixMicro(), uuid.NewString(), "status=failed&event_id=x")
	f.Add(int64(-1), "", "")
	f.Add(int64(1<<62), "\xff", "a=1&a=2&limit=3")
	f.Fuzz(func(t *testing.T, micros int64, id, query string) {
		if !utf8.ValidString(id) {
			return // ids are UUIDs; JSON cannot carry invalid UTF-8 unchanged
		}
		q, _ := url.ParseQuery(query)
		q.Del("cursor")
		c := s.encodeCursor(store.Cursor{CreatedAt: time.UnixMicro(micros), ID: id}, fuzzListPath, q)
		q.Set("cursor", c)
		p, err := s.page(requestWithQuery(q.Encode()))
		if err != nil {
			if e := asAPIError(t, err, "parameter_invalid"); *e.Param != "limit" {
				t.Fatalf("own cursor refused: %v", err)
			}
			return
		}
		if p.After == nil || p.After.CreatedAt.UnixMicro() != micros || p.After.ID != id {
			t.Fatalf("cursor read back as %+v, want %d %q", p.After, micros, id)
		}
	})
}

// FuzzDeliveryFilter feeds arbitrary query strings to the delivery list's
// filters (status, created_at.gte, event_id, subscription_id): a refusal
// names the filter at fault; an accepted filter holds what was asked.
func FuzzDeliveryFilter(f *testing.F) {
	for _, q := range []string{
		"status=failed&created_at.gte=2026-05-01T00:00:00Z&event_id=0190a000-0000-7000-8000-000000000000",
		"status=lost", "status=%ff", "created_at.gte=yesterday", "created_at.gte=2026-05-01T00:00:00%2B02:00",
		"event_id=nope", "subscription_id={0190a000-0000-7000-8000-000000000000}", "subscription_id=urn:uuid:0190a000-0000-7000-8000-000000000000",
		"event_id=%ff%fe", "status=failed&status=lost", "status=%00", "event_id=%00", "status=failed&status=pending",
	} {
		f.Add(q)
	}
	filters := []string{"status", "created_at.gte", "event_id", "subscription_id"}
	f.Fuzz(func(t *testing.T, query string) {
		r := requestWithQuery(query)
		got, err := deliveryFilter(r)
		if err != nil {
			if e := asAPIError(t, err, "parameter_invalid"); !slices.Contains(filters, *e.Param) {
				t.Fatalf("refusal names %q", *e.Param)
			}
			return
		}
		q := r.URL.Query()
		if string(got.Status) != q.Get("status") || got.Status != "" && !deliveryStatuses[got.Status] {
			t.Fatalf("status %q accepted for %q", got.Status, q.Get("status"))
		}
		if v := q.Get("created_at.gte"); (v == "") != (got.CreatedGTE == nil) ||
			got.CreatedGTE != nil && got.CreatedGTE.Format(time.RFC3339Nano) == "" {
			t.Fatalf("created_at.gte %v for %q", got.CreatedGTE, v)
		}
		for name, id := range map[string]*uuid.UUID{"event_id": got.EventID, "subscription_id": got.SubscriptionID} {
			v := q.Get(name)
			if (v == "") != (id == nil) || id != nil && uuid.MustParse(v) != *id {
				t.Fatalf("%s %v for %q", name, id, v)
			}
		}
	})
}
