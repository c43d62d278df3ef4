package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/merchants"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/signer"
)

// The fuzz targets of this file send arbitrary request bodies and query
// strings to one route each of a real API (one harness per target) and
// hold every answer to two properties: a refusal is spec 7's error with a
// catalogued code and, where a field is at fault, its param; an accepted
// input round-trips (what is answered and stored is what was sent).

// errorStatus is spec 7's catalogue of the codes webhookd answers, with
// the HTTP status each goes with.
var errorStatus = map[string]int{
	"parameter_invalid": 400, "parameter_missing": 400, "validation_error": 400, "api_version_error": 400,
	"invalid_cursor": 400, "cursor_mismatch": 400, "idempotency_key_required": 400,
	"authentication_required": 401, "permission_denied": 403, "insufficient_scope": 403,
	"resource_not_found": 404, "method_not_allowed": 405, "conflict": 409,
	"idempotency_key_already_used": 409, "request_in_progress": 409, "payload_too_large": 413,
	"rate_limit_exceeded": 429, "internal_error": 500, "upstream_error": 500,
}

// fieldCodes always name the parameter at fault.
var fieldCodes = []string{"parameter_invalid", "parameter_missing", "invalid_cursor", "cursor_mismatch"}

// with is a copy of a started harness that reports to t: a fuzz target
// starts one harness and gives each input its own t.
func (h *harness) with(t *testing.T) *harness {
	c := *h
	c.t = t
	return &c
}

// checkRefusal checks that r is an error answer of its surface and returns
// its code and param (param "" when null). A 5xx is never the answer to
// bad input.
func checkRefusal(t *testing.T, r response, legacy bool) (code, param string) {
	t.Helper()
	noServerError(t, r)
	if legacy {
		var e struct {
			Message, Category *string
			DocURL            *string `json:"docUrl"`
		}
		if err := json.Unmarshal(r.Body, &e); err != nil || e.Message == nil || e.Category == nil || e.DocURL == nil {
			t.Fatalf("legacy refusal %d is not {message, category, docUrl}: %s", r.Status, r.Body)
		}
		_, code, _ = strings.Cut(*e.DocURL, "#")
	} else {
		var m map[string]any
		if err := json.Unmarshal(r.Body, &m); err != nil {
			t.Fatalf("refusal %d is not a JSON object: %s", r.Status, r.Body)
		}
		for _, f := range []string{"category", "code", "message", "param", "doc_url", "correlation_id"} {
			if _, ok := m[f]; !ok {
				t.Fatalf("error body lacks %q: %s", f, r.Body)
			}
		}
		if cid := r.Header.Get("Correlation-Id"); cid == "" || cid != m["correlation_id"] {
			t.Fatalf("Correlation-Id header %q != body correlation_id %v", cid, m["correlation_id"])
		}
		code, _ = m["code"].(string)
		param, _ = m["param"].(string)
		if slices.Contains(fieldCodes, code) && param == "" {
			t.Fatalf("%s without param: %s", code, r.Body)
		}
	}
	if want, ok := errorStatus[code]; !ok || want != r.Status {
		t.Fatalf("status %d with code %q: not spec 7's pairing (%s)", r.Status, code, r.Body)
	}
	return code, param
}

// noServerError fails the test on any 5xx: whatever a client sends, a
// 5xx says the fault is the server's, and every fuzz target holds every
// answer to that.
func noServerError(t *testing.T, r response) {
	t.Helper()
	if r.Status >= 500 {
		t.Fatalf("input answered %d: %s", r.Status, r.Body)
	}
}

// bodyTarget is one route whose request body is fuzzed.
type bodyTarget struct {
	method, path     string // {id} stands for the harness's subscription
	internal, legacy bool
	seeds            []string // {id} stands for the harness's subscription
	// accepted checks a 2xx answer against the body that was sent.
	accepted func(t *testing.T, h *harness, key string, sent []byte, r response)
}

// startFuzzHarness starts a harness with the real pipeline, holding
// merchant m_fuzz, its key with both scopes (returned), and one
// subscription (its id returned). The subscription cap is lifted: a fuzz
// run creates far more than 100, and past the cap every create would be
// refused, leaving the accepted path unexplored.
func startFuzzHarness(f *testing.F) (h *harness, key string, subID string) {
	h = startHarness(f, withIngestPipeline(f), func(c *admin.Config) { c.MaxSubscriptions = math.MaxInt32 })
	key, err := merchants.NewKeyIssuer(h.store.APIKeys, "sandbox", admin.DefaultVersion).Issue(context.Background(), "m_fuzz",
		[]string{admin.ScopeRead, admin.ScopeWrite})
	if err != nil {
		f.Fatal(err)
	}
	sealer, err := signer.NewSealer(h.cfg.MasterKey)
	if err != nil {
		f.Fatal(err)
	}
	sealed, err := sealer.Seal("whsec_" + strings.Repeat("A", 44))
	if err != nil {
		f.Fatal(err)
	}
	// Ordered on a payload field, so that a payload holding text Postgres
	// cannot store, were one accepted, would reach the fan-out's jsonb
	// cast and fail it: a 5xx, which every target refuses.
	orderingKey := "payload.s"
	sub, err := h.store.Subscriptions.CreateSubscription(context.Background(), store.NewSubscription{
		MerchantID: "m_fuzz", URL: "https://example.com/hook", Events: []string{"*"}, OrderingKey: &orderingKey}, sealed)
	if err != nil {
		f.Fatal(err)
	}
	return h, key, sub.ID.String()
}

// fuzzBody runs tgt on its own fuzz harness.
func fuzzBody(f *testing.F, tgt bodyTarget) {
	h, key, subID := startFuzzHarness(f)
	path := strings.ReplaceAll(tgt.path, "{id}", subID)
	for _, s := range tgt.seeds {
		f.Add([]byte(strings.ReplaceAll(s, "{id}", subID)))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		h := h.with(t)
		req := request{Method: tgt.method, Path: path, Body: body}
		var r response
		switch {
		case tgt.internal:
			r = h.doInternal(req)
		case tgt.legacy:
			req.Header = map[string]string{"X-Service-Api-Key": key}
			r = h.do(req)
		default:
			req.Key = key
			r = h.do(req)
		}
		noServerError(t, r)
		if r.Status < 200 || r.Status > 299 {
			checkRefusal(t, r, tgt.legacy)
			return
		}
		trimmed := bytes.TrimSpace(body)
		if !utf8.Valid(body) || len(trimmed) > 0 && trimmed[0] != '{' {
			t.Fatalf("accepted a body that is not a UTF-8 JSON object (%d): %q", r.Status, body)
		}
		if f := invalid.FindText(body); f != nil {
			t.Fatalf("accepted a body holding %s at %v (%d): %q", f.Rule, f.Path, r.Status, body)
		}
		tgt.accepted(t, h, key, body, r)
	})
}

// decodeAs decodes b into a T, failing the test otherwise.
func decodeAs[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if len(bytes.TrimSpace(b)) == 0 {
		return v
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}

// subscriptionFields are the fields a subscription body may set, as both
// surfaces name them.
type subscriptionFields struct {
	URL         *string           `json:"url"`
	Events      []string          `json:"events"`
	Description *string           `json:"description"`
	Metadata    map[string]string `json:"metadata"`
	Status      *string           `json:"status"`
	ID          *string           `json:"id"`
}

// presentFields lists the keys of a JSON object, lower-cased (the decoder
// matches names without regard to case).
func presentFields(t *testing.T, b []byte) map[string]bool {
	t.Helper()
	m := decodeAs[map[string]json.RawMessage](t, b)
	out := make(map[string]bool, len(m))
	for k := range m {
		out[strings.ToLower(k)] = true
	}
	return out
}

// checkSubscription checks that the answer and the stored subscription
// carry every field that the body set.
func checkSubscription(t *testing.T, h *harness, key string, sent []byte, r response) {
	t.Helper()
	in := decodeAs[subscriptionFields](t, sent)
	present := presentFields(t, sent)
	got := decodeAs[subscriptionFields](t, r.Body)
	if got.ID == nil {
		t.Fatalf("answer without id: %s", r.Body)
	}
	stored := decodeAs[subscriptionFields](t, h.do(request{Method: http.MethodGet,
		Path: "/v1/webhook_subscriptions/" + *got.ID, Key: key}).Body)
	for _, sub := range []subscriptionFields{got, stored} {
		if in.URL != nil && (sub.URL == nil || *sub.URL != *in.URL) {
			t.Errorf("url %q, sent %q", deref(sub.URL), *in.URL)
		}
		if in.Events != nil {
			var want []string
			for _, e := range in.Events {
				if !slices.Contains(want, e) {
					want = append(want, e)
				}
			}
			if !slices.Equal(sub.Events, want) {
				t.Errorf("events %q, sent %q", sub.Events, in.Events)
			}
		}
		if present["description"] && !reflect.DeepEqual(sub.Description, in.Description) {
			t.Errorf("description %v, sent %v", sub.Description, in.Description)
		}
		if in.Metadata != nil && !reflect.DeepEqual(sub.Metadata, in.Metadata) {
			t.Errorf("metadata %v, sent %v", sub.Metadata, in.Metadata)
		}
		if in.Status != nil && (sub.Status == nil || *sub.Status != *in.Status) {
			t.Errorf("status %v, sent %q", sub.Status, *in.Status)
		}
	}
}

// subscriptionSeeds are bodies of both subscription surfaces.
var subscriptionSeeds = []string{
	`{"url":"https://example.com/hook","events":["*"]}`,
	`{"url":"https://example.com/hook","events":["payout.paid","payout.paid","payout.failed"],"description":"d","metadata":{"k":"v"}}`,
	`{"url":"https://example.com/hook","events":["*"],"description":null,"metadata":{}}`,
	`{"url":"https://example.com/hook","events":["ping.test"]}`,
	`{"url":"https://example.com/hook","events":[]}`,
	`{"url":"ftp://example.com","events":["*"]}`,
	`{"url":42,"events":"*"}`,
	`{"url":"https://example.com/hook","events":["*"],"colour":"blue"}`,
	`{"URL":"https://example.com/hook","Events":["*"]}`,
	`{"url":"https://example.com/hook","events":["*"],"metadata":{"a":1}}`,
	`{"url":"https://example.com/h\u00e9","events":["*"],"description":"\ud800"}`,
	"{\"url\":\"https://example.com/\xff\",\"events\":[\"*\"]}",
	`{"url":"https://example.com/hook","events":["*"]} {}`,
	`{"url":"https://example.com/hook","events":["*"],"description":"a\u0000b"}`,
	`{"url":"https://example.com/hook","events":["*"],"metadata":{"a\u0000":"v"}}`,
	`{"url":"https://example.com/hook","events":["*"],"metadata":{"k":"\u0000"}}`,
	`{"url":"https://example.com/h\u0000ook","events":["*\u0000"]}`,
	"{\"url\":\"https://example.com/hook\",\"events\":[\"*\"],\"description\":\"\x00\xfe\"}",
	`{"url":"https://example.com/hook","events":["*"],"headers":{"X-A":"\u0000"},"filter":"\ud800"}`,
	`{"url":"https://example.com/hook","events":["*"],"ordering":{"key":"payload.\u0000"}}`,
	`{"url":"https://example.com/hook","events":["*"],"payload_style":"thin","batch":{"max_size":50,"max_wait_ms":200}}`,
	`{"url":"https://example.com/hook","events":["*"],"payload_style":7,"batch":{"max_size":1e400,"max_wait_ms":-0}}`,
	`{"url":"https://example.com/hook","events":["*"],"payloadStyle":"thin","batch":{"maxSize":2,"max_size":3}}`,
	// Destinations: options smuggled into addresses, plaintext, foreign
	// credential sources (docs/decisions.md, "A merchant's input").
	`{"events":["*"],"destination":{"type":"rabbitmq","url":"amqps://u:p@broker.example.com/v?cacertfile=/dev/zero","exchange":"x"}}`,
	`{"events":["*"],"destination":{"type":"rabbitmq","url":"amqp://u:p@[::1]:5672/%2f#frag","routing_key":"q"}}`,
	`{"events":["*"],"destination":{"type":"kafka","brokers":["k.example.com:9093"],"topic":"t","tls":true,"sasl":{"mechanism":"plain","username":"u","password":"p"}}}`,
	`{"events":["*"],"destination":{"type":"sqs","queue_url":"https://sqs.eu-west-1.amazonaws.com/123456789012/q","region":"eu-west-1","access_key_id":"AKIA","secret_access_key":"s","endpoint":"https://sqs.example.com/?x=1"}}`,
	`{"events":["*"],"destination":{"type":"gcp_pubsub","project_id":"my-project-1","topic_id":"topic","credentials_json":"{\"type\":\"external_account\",\"credential_source\":{\"file\":\"/etc/hostname\"}}"}}`,
	`{"events":["*"],"destination":{"type":"gcp_pubsub","project_id":"my-project-1","topic_id":"topic","endpoint":"127.0.0.1:8085"}}`,
	`{"events":["*"],"destination":{"type":"poll"}}`,
	`null`, `[]`, `""`, ``, `{`,
}

func FuzzCreateSubscriptionBody(f *testing.F) {
	fuzzBody(f, bodyTarget{method: http.MethodPost, path: "/v1/webhook_subscriptions", seeds: subscriptionSeeds,
		accepted: checkSubscription})
}

func FuzzUpdateSubscriptionBody(f *testing.F) {
	fuzzBody(f, bodyTarget{method: http.MethodPost, path: "/v1/webhook_subscriptions/{id}",
		seeds: append([]string{`{}`, `{"status":"disabled"}`, `{"status":"paused"}`, `{"description":null}`,
			`{"url":"https://example.com/other","events":["payout.paid"],"metadata":{"k":"v"},"status":"enabled"}`}, subscriptionSeeds...),
		accepted: checkSubscription})
}

func FuzzLegacyCreateBody(f *testing.F) {
	fuzzBody(f, bodyTarget{method: http.MethodPost, path: "/api/service/webhook-subscription/create", legacy: true,
		seeds: subscriptionSeeds, accepted: checkSubscription})
}

func FuzzLegacyUpdateBody(f *testing.F) {
	fuzzBody(f, bodyTarget{method: http.MethodPost, path: "/api/service/webhook-subscription/update", legacy: true,
		seeds: []string{`{"id":"{id}"}`, `{"id":"{id}","status":"disabled","description":"x"}`, `{"id":"nope"}`,
			`{"id":42}`, `{}`, `{"id":"{id}","url":"https://example.com/legacy","events":["*"]}`, `{"id":null}`},
		accepted: checkSubscription})
}

func FuzzLegacyDeleteBody(f *testing.F) {
	fuzzBody(f, bodyTarget{method: http.MethodPost, path: "/api/service/webhook-subscription/delete", legacy: true,
		seeds: []string{`{"id":"{id}"}`, `{"id":"{ID}"}`, `{"id":""}`, `{"id":[]}`, `{}`, `{"id":"00000000-0000-0000-0000-000000000000"}`},
		accepted: func(t *testing.T, h *harness, key string, sent []byte, r response) {
			in := decodeAs[subscriptionFields](t, sent)
			got := decodeAs[struct {
				ID      string
				Deleted bool
			}](t, r.Body)
			if in.ID == nil || uuid.MustParse(*in.ID).String() != got.ID || !got.Deleted {
				t.Errorf("deleted %s, sent %q", r.Body, sent)
			}
		}})
}

func FuzzRotateSecretBody(f *testing.F) {
	fuzzBody(f, bodyTarget{method: http.MethodPost, path: "/v1/webhook_subscriptions/{id}/rotate_secret",
		seeds: []string{``, `{}`, `{"secret":"whsec_x"}`, `null`, `[]`},
		accepted: func(t *testing.T, h *harness, key string, sent []byte, r response) {
			if s, _ := r.JSON(t)["secret"].(string); !strings.HasPrefix(s, signer.SecretPrefix) {
				t.Errorf("rotate answered no secret: %s", r.Body)
			}
		}})
}

func FuzzRecoverBody(f *testing.F) {
	fuzzBody(f, bodyTarget{method: http.MethodPost, path: "/v1/webhook_subscriptions/{id}/recover",
		seeds: []string{`{"since":"2026-01-01T00:00:00Z"}`, `{"since":"2999-01-01T00:00:00Z"}`, `{"since":"yesterday"}`,
			`{"since":-1}`, `{}`, `{"since":null}`, `{"since":"2026-01-01T00:00:00+02:00","x":1}`},
		accepted: func(t *testing.T, h *harness, key string, sent []byte, r response) {
			in := decodeAs[struct{ Since time.Time }](t, sent)
			got := decodeAs[struct {
				Since      time.Time
				Deliveries int
			}](t, r.Body)
			if !got.Since.Equal(in.Since) || got.Deliveries < 0 {
				t.Errorf("recover answered %s for %s", r.Body, sent)
			}
		}})
}

// ingestSeeds are single events.
var ingestSeeds = []string{
	`{"merchant_id":"m_fuzz","type":"payout.paid","payload":{"id":"po_1"}}`,
	`{"id":"0190a000-0000-7000-8000-000000000000","merchant_id":"m_fuzz","type":"payout.paid","payload":{},"api_version":"2026-05-01"}`,
	`{"id":"0190A000000070008000000000000000","merchant_id":"m_fuzz","type":"payout.paid","payload":{}}`,
	`{"merchant_id":"m_fuzz","type":"ping.test","payload":{}}`,
	`{"merchant_id":"","type":"payout.paid","payload":{}}`,
	`{"merchant_id":"m_fuzz","type":"payout.paid","payload":[1]}`,
	`{"merchant_id":"m_fuzz","type":"payout.paid","payload":null}`,
	`{"merchant_id":"m_fuzz","type":"payout.paid","payload":{"s":"\xff"}}`,
	`{"merchant_id":"m_fuzz","type":"payout.paid","payload":{},"api_version":"1999-01-01"}`,
	`{"merchant_id":7,"type":"payout.paid","payload":{}}`,
	`{"merchant_id":"m\u0000fuzz","type":"payout.paid","payload":{}}`,
	`{"merchant_id":"m_fuzz","type":"payout.paid\u0000","payload":{"\u0000":"\u0000"},"api_version":"\u0000"}`,
	"{\"merchant_id\":\"m_\xff\",\"type\":\"payout.paid\",\"payload\":{}}",
	// Text Postgres cannot store, deep in a payload that breaks no other
	// rule.
	`{"merchant_id":"m_fuzz","type":"payout.paid","payload":{"s":"a\u0000b"}}`,
	`{"merchant_id":"m_fuzz","type":"payout.paid","payload":{"foo":{"bar":["x","\u0000"]}}}`,
	`{"merchant_id":"m_fuzz","type":"payout.paid","payload":{"foo":{"k\u0000":1}}}`,
	"{\"merchant_id\":\"m_fuzz\",\"type\":\"payout.paid\",\"payload\":{\"s\":\"\xc3\"}}",
	`{"merchant_id":"m_fuzz","type":"payout.paid","payload":{"s":"\ud800"}}`,
	`{"merchant_id":"m_fuzz","type":"payout.paid","payload":{"s":"\udc00\ud83d\ude00"}}`,
	`{"merchant_id":"m_fuzz","type":"payout.paid","payload":{"s":"\\u0000 \ud83d\ude00"}}`,
}

// checkEvents checks that each accepted event is what was sent.
func checkEvents(t *testing.T, sent []struct {
	ID      *string
	Type    string
	Payload json.RawMessage
}, got []map[string]json.RawMessage) {
	t.Helper()
	if len(got) != len(sent) {
		t.Fatalf("%d events answered for %d sent", len(got), len(sent))
	}
	for i, e := range sent {
		var a, b any
		_ = json.Unmarshal(e.Payload, &a)
		_ = json.Unmarshal(got[i]["payload"], &b)
		if !reflect.DeepEqual(a, b) || string(got[i]["type"]) != `"`+e.Type+`"` {
			t.Errorf("event %d answered %s, %s for %s, %s", i, got[i]["type"], got[i]["payload"], e.Type, e.Payload)
		}
	}
}

func FuzzIngestEventBody(f *testing.F) {
	fuzzBody(f, bodyTarget{method: http.MethodPost, path: "/internal/v1/events", internal: true, seeds: ingestSeeds,
		accepted: func(t *testing.T, h *harness, key string, sent []byte, r response) {
			in := decodeAs[struct {
				ID      *string
				Type    string
				Payload json.RawMessage
			}](t, sent)
			checkEvents(t, []struct {
				ID      *string
				Type    string
				Payload json.RawMessage
			}{in}, []map[string]json.RawMessage{decodeAs[map[string]json.RawMessage](t, r.Body)})
		}})
}

func FuzzIngestBatchBody(f *testing.F) {
	seeds := []string{`{"events":[]}`, `{"events":null}`, `{}`, `{"events":{}}`, `{"events":[{}]}`,
		`{"events":[{"type":1}]}`, `{"events":[{"merchant_id":"m_fuzz","type":"payout.paid","payload":{},"colour":1}]}`}
	for _, s := range ingestSeeds {
		seeds = append(seeds, `{"events":[`+s+`,`+s+`]}`)
	}
	fuzzBody(f, bodyTarget{method: http.MethodPost, path: "/internal/v1/events/batch", internal: true, seeds: seeds,
		accepted: func(t *testing.T, h *harness, key string, sent []byte, r response) {
			in := decodeAs[struct {
				Events []struct {
					ID      *string
					Type    string
					Payload json.RawMessage
				}
			}](t, sent)
			checkEvents(t, in.Events, decodeAs[struct{ Data []map[string]json.RawMessage }](t, r.Body).Data)
		}})
}

func FuzzAPIKeysBody(f *testing.F) {
	fuzzBody(f, bodyTarget{method: http.MethodPost, path: "/internal/v1/merchants/m_keys/api_keys", internal: true,
		seeds: []string{`{"scopes":["webhooks:read"]}`, `{"scopes":["webhooks:read","webhooks:write"]}`, `{"scopes":[]}`,
			`{"scopes":["payouts:write"]}`, `{"scopes":"webhooks:read"}`, `{}`, `{"scopes":null}`},
		accepted: func(t *testing.T, h *harness, _ string, sent []byte, r response) {
			key, _ := r.JSON(t)["key"].(string)
			if !strings.HasPrefix(key, "sandbox.") || r.Status != http.StatusCreated {
				t.Fatalf("api key answer %d %s", r.Status, r.Body)
			}
			got := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions", Key: key})
			in := decodeAs[struct{ Scopes []string }](t, sent)
			if canRead := slices.Contains(in.Scopes, admin.ScopeRead); canRead != (got.Status == http.StatusOK) {
				t.Errorf("key for scopes %q lists with %d", in.Scopes, got.Status)
			}
		}})
}

func FuzzMerchantSettingsBody(f *testing.F) {
	fuzzBody(f, bodyTarget{method: http.MethodPut, path: "/internal/v1/merchants/m_settings", internal: true,
		seeds: []string{`{}`, `{"notification_email":"ops@example.com"}`, `{"notification_email":""}`,
			`{"notification_email":null,"api_version":"2026-05-01"}`, `{"notification_email":"Ops <ops@example.com>"}`,
			`{"api_version":"1999-01-01"}`, `{"api_version":5}`},
		accepted: func(t *testing.T, h *harness, key string, sent []byte, r response) {
			in := decodeAs[struct{ NotificationEmail, APIVersion *string }](t, sent)
			got := decodeAs[struct{ NotificationEmail, APIVersion *string }](t, r.Body)
			if in.APIVersion != nil && (got.APIVersion == nil || *got.APIVersion != *in.APIVersion) {
				t.Errorf("api_version %v, sent %q", got.APIVersion, *in.APIVersion)
			}
			if in.NotificationEmail != nil && *in.NotificationEmail != "" &&
				(got.NotificationEmail == nil || *got.NotificationEmail != *in.NotificationEmail) {
				t.Errorf("notification_email %v, sent %q", got.NotificationEmail, *in.NotificationEmail)
			}
		}})
}

// listRoutes are the public lists whose query strings FuzzListQuery tries.
var listRoutes = []string{"/v1/webhook_subscriptions", "/v1/events", "/v1/webhook_deliveries"}

// FuzzListQuery sends arbitrary query strings to the three lists (route
// picks one): a refusal is spec 7's error naming the parameter; an
// accepted query answers a page no longer than its limit.
func FuzzListQuery(f *testing.F) {
	h, key, subID := startFuzzHarness(f)
	for _, q := range []string{
		"", "limit=1", "limit=0", "limit=101", "limit=-5", "limit=99999999999999999999", "limit=1e3", "limit=%ff",
		"cursor=abc", "cursor=e30.e30", "status=enabled", "status=failed", "status=%ff", "event_type=payout.paid",
		"event_type=%ff%fe", "created_at.gte=2026-01-01T00:00:00Z", "created_at.gte=2026-01-01", "created_at.gte=%ff",
		"event_id=" + subID, "event_id=nope", "subscription_id=" + subID, "subscription_id=%ff", "limit=2&limit=3",
		"%zz=1", "status", "unknown=1", "=0", "limit=5;status=failed", "status=fai%zzled",
		"status=%00", "limit=%00", "cursor=%00", "event_type=payout.paid%00", "%00=1", "status=%c3",
		"status=failed&status=pending", "limit=5&limit=abc", "cursor=a&cursor=b", "event_type=%ff&event_type=%fe",
	} {
		for route := range listRoutes {
			f.Add(uint8(route), q)
		}
	}
	f.Fuzz(func(t *testing.T, route uint8, query string) {
		if strings.ContainsFunc(query, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '#' }) {
			return // not a request line: net/http refuses it before any handler
		}
		h := h.with(t)
		path := listRoutes[int(route)%len(listRoutes)]
		r := h.do(request{Method: http.MethodGet, Path: path + "?" + query, Key: key})
		noServerError(t, r)
		if r.Status != http.StatusOK {
			checkRefusal(t, r, false)
			return
		}
		limit := 10
		v, err := url.ParseQuery(query)
		if err == nil && v.Get("limit") != "" {
			limit, _ = strconv.Atoi(v.Get("limit"))
		}
		for name, values := range v {
			if len(values) > 1 {
				t.Fatalf("accepted %q given %d times", name, len(values))
			}
		}
		if page := decodeAs[struct{ Data []json.RawMessage }](t, r.Body); len(page.Data) > limit {
			t.Fatalf("%d items for limit %d", len(page.Data), limit)
		}
	})
}

// sendable tells whether net/http's client sends s as a header value or a
// request-target unchanged: control characters are refused before any
// handler could see them.
func sendable(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f })
}

// FuzzIdempotencyKey sends arbitrary Idempotency-Key headers with POSTs of
// both surfaces (route picks one): no answer is a 5xx, a refusal is its
// surface's error, and a key is taken only if it is UTF-8 of at most 255
// characters, and then replays.
func FuzzIdempotencyKey(f *testing.F) {
	h, key, subID := startFuzzHarness(f)
	routes := []request{
		{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + subID + "/rotate_secret", Key: key},
		{Method: http.MethodPost, Path: "/api/service/webhook-subscription/update", Body: `{"id":"` + subID + `"}`,
			Header: map[string]string{"X-Service-Api-Key": key}},
	}
	for _, k := range []string{"k", uuid.NewString(), "\xff", "k\xc3", strings.Repeat("é", 255), strings.Repeat("é", 256),
		strings.Repeat("a", 256), " padded ", "\t", "€\xe2\x82", "\xef\xbf\xbd", "-", " - "} {
		for route := range routes {
			f.Add(uint8(route), k)
		}
	}
	f.Fuzz(func(t *testing.T, route uint8, idem string) {
		if !sendable(idem) || strings.TrimSpace(idem) == "" {
			return // net/http refuses it, or sends no key at all
		}
		h := h.with(t)
		tgt := routes[int(route)%len(routes)]
		legacy := tgt.Header != nil
		req := tgt
		req.Header = map[string]string{"Idempotency-Key": idem}
		for k, v := range tgt.Header {
			req.Header[k] = v
		}
		r := h.do(req)
		noServerError(t, r)
		if r.Status < 200 || r.Status > 299 {
			checkRefusal(t, r, legacy)
			return
		}
		// The server trims the header's surrounding blanks (RFC 9110 5.5).
		sent := strings.Trim(idem, " \t")
		if !utf8.ValidString(sent) || utf8.RuneCountInString(sent) > 255 {
			t.Fatalf("took Idempotency-Key %q (%d characters)", sent, utf8.RuneCountInString(sent))
		}
		if again := h.do(req); again.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("key %q did not replay: %d %s", sent, again.Status, again.Body)
		}
	})
}

// FuzzMerchantPath sends arbitrary merchant ids in the paths of the
// internal merchant routes (route picks one): no answer is a 5xx, and an
// accepted id is the segment percent-decoded once, which the merchant-id
// rule accepts, and which the issued key then belongs to.
func FuzzMerchantPath(f *testing.F) {
	h, _, _ := startFuzzHarness(f)
	routes := []struct {
		method, suffix, body string
		status               int
	}{
		{http.MethodPut, "", `{}`, http.StatusOK},
		{http.MethodPost, "/api_keys", `{"scopes":["webhooks:read"]}`, http.StatusCreated},
	}
	for _, seg := range []string{"m_fuzz", "m%C3%A4x", "m%c3%a4x", "m%2Fx", "m%2fx", "m%2541", "m%00x", "m%ff", "%C3",
		"m%zz", "ä", "%20", "..", strings.Repeat("m", 256), strings.Repeat("%c3%a4", 128)} {
		for route := range routes {
			f.Add(uint8(route), seg)
		}
	}
	f.Fuzz(func(t *testing.T, route uint8, segment string) {
		if !sendable(segment) || strings.ContainsAny(segment, " \t#?/") {
			return // not one path segment of a request line
		}
		want, err := url.PathUnescape(segment)
		if err != nil {
			return // the client cannot parse the URL, so sends nothing
		}
		h := h.with(t)
		rt := routes[int(route)%len(routes)]
		r := h.doInternal(request{Method: rt.method, Path: "/internal/v1/merchants/" + segment + rt.suffix, Body: rt.body})
		noServerError(t, r)
		if r.Status < 200 || r.Status > 299 {
			checkRefusal(t, r, false)
			return
		}
		if err := merchants.CheckID("merchant_id", want); r.Status != rt.status || err != nil {
			t.Fatalf("accepted %q (%v): %d %s", segment, err, r.Status, r.Body)
		}
		got, _ := r.JSON(t)["id"].(string)
		if k, ok := r.JSON(t)["key"].(string); ok {
			_, m, err := h.store.APIKeys.APIKeyByHash(context.Background(), store.HashAPIKey(k))
			if err != nil {
				t.Fatal(err)
			}
			got = m.ID
		}
		if got != want {
			t.Fatalf("path segment %q made merchant %q, want %q", segment, got, want)
		}
	})
}

// deref is *s, or "<nil>".
func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
