package admin_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/admin"
)

// badCase is one bad request and the exact answer it gets.
type badCase struct {
	route    string // "METHOD /pattern" as the router names it
	name     string
	req      request // {sub} in Path or Body stands for a subscription of the merchant
	internal bool
	status   int
	code     string // "" for a success
	param    any    // nil, or the param string
}

// Bodies that every body-reading route is given.
var (
	oversized = `{"x":"` + strings.Repeat("a", 5000) + `"}`
	formBody  = map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
)

// bodyCases are the bad bodies that every route reading a JSON object
// refuses the same way; valid is a body that the route would accept.
func bodyCases(route string, internal bool, path string, hdr map[string]string) []badCase {
	r := func(body string, h map[string]string) request {
		m := map[string]string{}
		for k, v := range hdr {
			m[k] = v
		}
		for k, v := range h {
			m[k] = v
		}
		method, _, _ := strings.Cut(route, " ")
		return request{Method: method, Path: path, Body: body, Header: m}
	}
	return []badCase{
		{route, "oversized body", r(oversized, nil), internal, 413, "payload_too_large", nil},
		{route, "form-encoded body", r("url=https%3A%2F%2Fexample.com&events=%2A", formBody), internal, 400, "parameter_invalid", "Content-Type"},
		{route, "null body", r(`null`, nil), internal, 400, "validation_error", nil},
		{route, "array body", r(`[{}]`, nil), internal, 400, "validation_error", nil},
		{route, "two objects", r(`{} {}`, nil), internal, 400, "validation_error", nil},
		{route, "truncated JSON", r(`{"a":`, nil), internal, 400, "validation_error", nil},
		{route, "unknown field", r(`{"colour":"blue"}`, nil), internal, 400, "validation_error", "colour"},
		{route, "invalid UTF-8 in a key", r("{\"col\xffour\":1}", nil), internal, 400, "validation_error", "col\uFFFDour"},
	}
}

// TestBadInput sends every route of both listeners bad input and checks the
// exact status, code and param of each answer. Every route the routers
// serve must have a case here.
func TestBadInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withIngestPipeline(t), func(c *admin.Config) { c.MaxBodyBytes = 4096 })
	key := h.merchant("m_bad")
	created := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
		Body: map[string]any{"url": "https://example.com/hook", "events": []string{"*"}}})
	if created.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.Status, created.Body)
	}
	sub, _ := created.JSON(t)["id"].(string)
	missing := uuid.NewString()
	auth := map[string]string{"Authorization": "Bearer " + key}
	legacy := map[string]string{"X-Service-Api-Key": key}
	get := func(path string) request { return request{Method: http.MethodGet, Path: path, Key: key} }
	post := func(path, body string) request {
		return request{Method: http.MethodPost, Path: path, Key: key, Body: body}
	}
	legacyPost := func(path, body string) request {
		return request{Method: http.MethodPost, Path: path, Body: body, Header: legacy}
	}
	put := func(path, body string) request { return request{Method: http.MethodPut, Path: path, Body: body} }
	// withHeader is req with one more header (a copy: legacy is shared).
	withHeader := func(req request, name, value string) request {
		hdr := map[string]string{name: value}
		for k, v := range req.Header {
			hdr[k] = v
		}
		req.Header = hdr
		return req
	}

	const (
		subs       = "POST /v1/webhook_subscriptions"
		subList    = "GET /v1/webhook_subscriptions"
		subGet     = "GET /v1/webhook_subscriptions/{id}"
		subUpdate  = "POST /v1/webhook_subscriptions/{id}"
		subDelete  = "DELETE /v1/webhook_subscriptions/{id}"
		rotate     = "POST /v1/webhook_subscriptions/{id}/rotate_secret"
		testEvent  = "POST /v1/webhook_subscriptions/{id}/send_test_event"
		recoverR   = "POST /v1/webhook_subscriptions/{id}/recover"
		events     = "GET /v1/events"
		eventGet   = "GET /v1/events/{id}"
		dels       = "GET /v1/webhook_deliveries"
		delGet     = "GET /v1/webhook_deliveries/{id}"
		redeliver  = "POST /v1/webhook_deliveries/{id}/redeliver"
		lCreate    = "POST /api/service/webhook-subscription/create"
		lUpdate    = "POST /api/service/webhook-subscription/update"
		lDelete    = "POST /api/service/webhook-subscription/delete"
		ingest     = "POST /internal/v1/events"
		batch      = "POST /internal/v1/events/batch"
		apiKeys    = "POST /internal/v1/merchants/{id}/api_keys"
		keyList    = "GET /internal/v1/merchants/{id}/api_keys"
		keyRevoke  = "DELETE /internal/v1/merchants/{id}/api_keys/{key_id}"
		keyRoll    = "POST /internal/v1/merchants/{id}/api_keys/{key_id}/roll"
		merchant   = "PUT /internal/v1/merchants/{id}"
		erase      = "POST /internal/v1/events/{id}/erase"
		audit      = "GET /internal/v1/audit"
		mint       = "POST /v1/portal_sessions"
		current    = "GET /v1/portal_sessions/current"
		signOut    = "DELETE /v1/portal_sessions/current"
		eventTypes = "GET /v1/event_types"
		secret     = "GET /v1/webhook_subscriptions/{id}/secret"
		health     = "GET /v1/webhook_subscriptions/{id}/health"
		stats      = "GET /v1/webhook_subscriptions/{id}/stats"
		pollRead   = "GET /v1/webhook_subscriptions/{id}/poll"
		check      = "POST /v1/webhook_subscriptions/{id}/check"
		simulate   = "POST /v1/webhook_subscriptions/{id}/transformation/simulate"
		mintIn     = "POST /internal/v1/merchants/{id}/portal_sessions"
		endAll     = "DELETE /internal/v1/merchants/{id}/portal_sessions"
		subPath    = "/v1/webhook_subscriptions/{sub}"
		goodIngest = `{"merchant_id":"m_bad","type":"payout.paid","payload":{}}`
		goodSub    = `{"url":"https://example.com/h","events":["*"]}`
	)
	cases := []badCase{
		{"GET /v1/api_versions", "junk query is ignored", request{Method: "GET", Path: "/v1/api_versions?%ff=%fe&limit=-1"}, false, 200, "", nil},
		{"GET /v1/openapi.json", "junk query is ignored", request{Method: "GET", Path: "/v1/openapi.json?limit=%ff"}, false, 200, "", nil},
		{"GET /v1/asyncapi.json", "junk query is ignored", request{Method: "GET", Path: "/v1/asyncapi.json?%ff=%fe&limit=-1"}, false, 200, "", nil},
		{"GET /v1/webhook_source_addresses", "junk query is ignored", request{Method: "GET", Path: "/v1/webhook_source_addresses?%ff=%fe"}, false, 200, "", nil},

		{subs, "url of the wrong type", post("/v1/webhook_subscriptions", `{"url":42,"events":["*"]}`), false, 400, "parameter_invalid", "url"},
		{subs, "events of the wrong type", post("/v1/webhook_subscriptions", `{"url":"https://example.com/h","events":"*"}`), false, 400, "parameter_invalid", "events"},
		{subs, "an event of the wrong type", post("/v1/webhook_subscriptions", `{"url":"https://example.com/h","events":[1]}`), false, 400, "parameter_invalid", "events"},
		{subs, "description of the wrong type", post("/v1/webhook_subscriptions", `{"url":"https://example.com/h","events":["*"],"description":5}`), false, 400, "parameter_invalid", "description"},
		{subs, "metadata of the wrong type", post("/v1/webhook_subscriptions", `{"url":"https://example.com/h","events":["*"],"metadata":[]}`), false, 400, "parameter_invalid", "metadata"},
		{subs, "a metadata value of the wrong type", post("/v1/webhook_subscriptions", `{"url":"https://example.com/h","events":["*"],"metadata":{"a":1}}`), false, 400, "parameter_invalid", "metadata"},
		{subs, "a field named in another case", post("/v1/webhook_subscriptions", `{"URL":"https://example.com/h","events":["*"]}`), false, 400, "validation_error", "URL"},
		{subs, "invalid UTF-8 in url", post("/v1/webhook_subscriptions", "{\"url\":\"https://example.com/\xff\",\"events\":[\"*\"]}"), false, 400, "parameter_invalid", "url"},
		{subs, "invalid UTF-8 in a metadata value", post("/v1/webhook_subscriptions", "{\"url\":\"https://example.com/h\",\"events\":[\"*\"],\"metadata\":{\"k\":\"\xc3\"}}"), false, 400, "parameter_invalid", "metadata[k]"},
		{subs, "url missing", post("/v1/webhook_subscriptions", `{"events":["*"]}`), false, 400, "parameter_missing", "url"},
		{subs, "JSON sent as text/plain", request{Method: "POST", Path: "/v1/webhook_subscriptions", Key: key,
			Body: `{"url":"https://example.com/h","events":["*"]}`, Header: map[string]string{"Content-Type": "text/plain"}}, false, 400, "parameter_invalid", "Content-Type"},
		{subs, "JSON with a charset and no Content-Type are JSON", request{Method: "POST", Path: "/v1/webhook_subscriptions", Key: key,
			Body: `{"url":"https://example.com/h","events":["*"]}`, Header: map[string]string{"Content-Type": "application/json; charset=utf-8"}}, false, 201, "", nil},

		{subList, "huge limit", get("/v1/webhook_subscriptions?limit=100000000000000000000"), false, 400, "parameter_invalid", "limit"},
		{subList, "negative limit", get("/v1/webhook_subscriptions?limit=-1"), false, 400, "parameter_invalid", "limit"},
		{subList, "empty limit", get("/v1/webhook_subscriptions?limit="), false, 400, "parameter_invalid", "limit"},
		{subList, "limit 101", get("/v1/webhook_subscriptions?limit=101"), false, 400, "parameter_invalid", "limit"},
		{subList, "misspelt filter", get("/v1/webhook_subscriptions?statuss=disabled"), false, 400, "parameter_invalid", "statuss"},
		{subList, "invalid UTF-8 limit", get("/v1/webhook_subscriptions?limit=%ff"), false, 400, "parameter_invalid", "limit"},
		{subList, "unknown status", get("/v1/webhook_subscriptions?status=paused"), false, 400, "parameter_invalid", "status"},
		{subList, "empty status", get("/v1/webhook_subscriptions?status="), false, 400, "parameter_invalid", "status"},
		{subList, "invalid UTF-8 status", get("/v1/webhook_subscriptions?status=%ff"), false, 400, "parameter_invalid", "status"},
		{subList, "forged cursor", get("/v1/webhook_subscriptions?cursor=e30.e30"), false, 400, "invalid_cursor", "cursor"},
		{subList, "invalid UTF-8 cursor", get("/v1/webhook_subscriptions?cursor=%ff.%fe"), false, 400, "invalid_cursor", "cursor"},

		{subGet, "malformed id", get("/v1/webhook_subscriptions/nope"), false, 404, "resource_not_found", nil},
		{subGet, "invalid UTF-8 id", get("/v1/webhook_subscriptions/%ff"), false, 404, "resource_not_found", nil},
		{subGet, "unknown id", get("/v1/webhook_subscriptions/" + missing), false, 404, "resource_not_found", nil},

		{subUpdate, "malformed id", post("/v1/webhook_subscriptions/nope", `{}`), false, 404, "resource_not_found", nil},
		{subUpdate, "unknown status", post(subPath, `{"status":"paused"}`), false, 400, "parameter_invalid", "status"},
		{subUpdate, "status of the wrong type", post(subPath, `{"status":true}`), false, 400, "parameter_invalid", "status"},
		{subUpdate, "empty events", post(subPath, `{"events":[]}`), false, 400, "parameter_invalid", "events"},
		{subUpdate, "invalid UTF-8 in description", post(subPath, "{\"description\":\"\xfe\"}"), false, 400, "parameter_invalid", "description"},

		{subDelete, "malformed id", request{Method: "DELETE", Path: "/v1/webhook_subscriptions/%ff", Key: key}, false, 404, "resource_not_found", nil},
		{subDelete, "unknown id", request{Method: "DELETE", Path: "/v1/webhook_subscriptions/" + missing, Key: key}, false, 404, "resource_not_found", nil},

		{rotate, "malformed id", post("/v1/webhook_subscriptions/nope/rotate_secret", ``), false, 404, "resource_not_found", nil},
		{rotate, "a parameter it does not take", post(subPath+"/rotate_secret", `{"secret":"whsec_x"}`), false, 400, "validation_error", "secret"},
		{rotate, "null body", post(subPath+"/rotate_secret", `null`), false, 400, "validation_error", nil},
		{rotate, "oversized body", post(subPath+"/rotate_secret", oversized), false, 413, "payload_too_large", nil},

		{testEvent, "malformed id", post("/v1/webhook_subscriptions/nope/send_test_event", ``), false, 404, "resource_not_found", nil},
		{testEvent, "unknown id", post("/v1/webhook_subscriptions/"+missing+"/send_test_event", ``), false, 404, "resource_not_found", nil},
		{testEvent, "oversized body", post(subPath+"/send_test_event", oversized), false, 413, "payload_too_large", nil},

		{recoverR, "malformed id", post("/v1/webhook_subscriptions/nope/recover", `{"since":"2026-01-01T00:00:00Z"}`), false, 404, "resource_not_found", nil},
		{recoverR, "since not a time", post(subPath+"/recover", `{"since":"yesterday"}`), false, 400, "parameter_invalid", "since"},
		{recoverR, "since with a one-digit hour", post(subPath+"/recover", `{"since":"2026-01-01T0:00:00Z"}`), false, 400, "parameter_invalid", "since"},
		{recoverR, "since of the wrong type", post(subPath+"/recover", `{"since":-1}`), false, 400, "parameter_invalid", "since"},
		{recoverR, "since in the future", post(subPath+"/recover", `{"since":"2999-01-01T00:00:00Z"}`), false, 400, "parameter_invalid", "since"},
		{recoverR, "since missing", post(subPath+"/recover", `{}`), false, 400, "parameter_missing", "since"},

		{events, "unknown event_type", get("/v1/events?event_type=payout.lost"), false, 400, "parameter_invalid", "event_type"},
		{events, "invalid UTF-8 event_type", get("/v1/events?event_type=%ff%fe"), false, 400, "parameter_invalid", "event_type"},
		{events, "empty event_type", get("/v1/events?event_type="), false, 400, "parameter_invalid", "event_type"},
		{events, "unknown delivery_status", get("/v1/events?delivery_status=retrying"), false, 400, "parameter_invalid", "delivery_status"},
		{events, "created_at.gte not a time", get("/v1/events?created_at.gte=2026-13-01T00:00:00Z"), false, 400, "parameter_invalid", "created_at.gte"},
		{events, "created_at.gte with a one-digit hour", get("/v1/events?created_at.gte=2026-01-01T0:00:00Z"), false, 400, "parameter_invalid", "created_at.gte"},
		{events, "negative created_at.gte", get("/v1/events?created_at.gte=-1"), false, 400, "parameter_invalid", "created_at.gte"},
		{events, "huge limit", get("/v1/events?limit=9223372036854775808"), false, 400, "parameter_invalid", "limit"},
		{events, "misspelt filter", get("/v1/events?type=payout.paid"), false, 400, "parameter_invalid", "type"},

		{eventGet, "malformed id", get("/v1/events/nope"), false, 404, "resource_not_found", nil},
		{eventGet, "unknown id", get("/v1/events/" + missing), false, 404, "resource_not_found", nil},
		{"POST /v1/events/{id}/cancel", "malformed id", post("/v1/events/nope/cancel", ``), false, 404, "resource_not_found", nil},
		{"POST /v1/events/{id}/cancel", "unknown id", post("/v1/events/"+missing+"/cancel", ``), false, 404, "resource_not_found", nil},
		{"POST /internal/v1/events/{id}/cancel", "malformed id", post("/internal/v1/events/nope/cancel", ``), true, 404, "resource_not_found", nil},
		{"POST /internal/v1/events/{id}/cancel", "unknown id", post("/internal/v1/events/"+missing+"/cancel", ``), true, 404, "resource_not_found", nil},
		{ingest, "deliver_at not a timestamp", post("/internal/v1/events", `{"merchant_id":"m_bad","type":"payout.paid","payload":{},"deliver_at":"soon"}`), true, 400, "parameter_invalid", "deliver_at"},
		{ingest, "deliver_at of the wrong type", post("/internal/v1/events", `{"merchant_id":"m_bad","type":"payout.paid","payload":{},"deliver_at":5}`), true, 400, "parameter_invalid", "deliver_at"},

		{dels, "unknown status", get("/v1/webhook_deliveries?status=lost"), false, 400, "parameter_invalid", "status"},
		{dels, "malformed event_id", get("/v1/webhook_deliveries?event_id=nope"), false, 400, "parameter_invalid", "event_id"},
		{dels, "empty event_id", get("/v1/webhook_deliveries?event_id="), false, 400, "parameter_invalid", "event_id"},
		{dels, "invalid UTF-8 subscription_id", get("/v1/webhook_deliveries?subscription_id=%ff"), false, 400, "parameter_invalid", "subscription_id"},
		{dels, "invalid UTF-8 created_at.gte", get("/v1/webhook_deliveries?created_at.gte=%ff"), false, 400, "parameter_invalid", "created_at.gte"},
		{dels, "zero limit", get("/v1/webhook_deliveries?limit=0"), false, 400, "parameter_invalid", "limit"},
		{dels, "misspelt filter", get("/v1/webhook_deliveries?limit=5&statuss=failed"), false, 400, "parameter_invalid", "statuss"},
		{dels, "filter of another list", get("/v1/webhook_deliveries?event_type=payout.paid"), false, 400, "parameter_invalid", "event_type"},
		{dels, "bad escape in a filter's value", get("/v1/webhook_deliveries?status=fai%zzled"), false, 400, "parameter_invalid", "status"},
		{dels, "bad escape in a name", get("/v1/webhook_deliveries?stat%zzus=failed"), false, 400, "parameter_invalid", "stat%zzus"},
		{dels, "semicolon as a separator", get("/v1/webhook_deliveries?limit=5;status=failed"), false, 400, "parameter_invalid", "limit"},
		{dels, "value without a name", get("/v1/webhook_deliveries?=failed"), false, 400, "parameter_invalid", "=failed"},
		{events, "bad escape in a filter's value", get("/v1/events?event_type=payout.pa%zzid"), false, 400, "parameter_invalid", "event_type"},
		{subList, "bad escape in a filter's value", get("/v1/webhook_subscriptions?status=dis%zzabled"), false, 400, "parameter_invalid", "status"},

		{delGet, "malformed id", get("/v1/webhook_deliveries/nope"), false, 404, "resource_not_found", nil},
		{"GET /v1/replays/{id}", "malformed id", get("/v1/replays/nope"), false, 404, "resource_not_found", nil},
		{"POST /v1/webhook_deliveries/replay", "until before since", post("/v1/webhook_deliveries/replay",
			`{"since":"2026-11-27T10:00:00Z","until":"2026-11-27T09:00:00Z"}`), false, 400, "parameter_invalid", "until"},
		{"POST /v1/webhook_deliveries/replay", "status of the wrong type", post("/v1/webhook_deliveries/replay",
			`{"since":"2026-11-27T10:00:00Z","until":"2026-11-27T11:00:00Z","status":1}`), false, 400, "parameter_invalid", "status"},
		{delGet, "unknown id", get("/v1/webhook_deliveries/" + missing), false, 404, "resource_not_found", nil},

		{redeliver, "malformed id", post("/v1/webhook_deliveries/%ff/redeliver", ``), false, 404, "resource_not_found", nil},
		{redeliver, "unknown id", post("/v1/webhook_deliveries/"+missing+"/redeliver", ``), false, 404, "resource_not_found", nil},
		{redeliver, "oversized body", post("/v1/webhook_deliveries/"+missing+"/redeliver", oversized), false, 413, "payload_too_large", nil},

		{lCreate, "url of the wrong type", legacyPost("/api/service/webhook-subscription/create", `{"url":42,"events":["*"]}`), false, 400, "parameter_invalid", nil},
		{lCreate, "invalid UTF-8 in url", legacyPost("/api/service/webhook-subscription/create", "{\"url\":\"\xff\",\"events\":[\"*\"]}"), false, 400, "parameter_invalid", nil},
		{lUpdate, "id of the wrong type", legacyPost("/api/service/webhook-subscription/update", `{"id":42}`), false, 400, "parameter_invalid", nil},
		{lUpdate, "malformed id", legacyPost("/api/service/webhook-subscription/update", `{"id":"nope"}`), false, 404, "resource_not_found", nil},
		{lUpdate, "id missing", legacyPost("/api/service/webhook-subscription/update", `{"status":"disabled"}`), false, 400, "parameter_missing", nil},
		{lUpdate, "unknown status", legacyPost("/api/service/webhook-subscription/update", `{"id":"{sub}","status":"paused"}`), false, 400, "parameter_invalid", nil},
		{lDelete, "id of the wrong type", legacyPost("/api/service/webhook-subscription/delete", `{"id":[]}`), false, 400, "parameter_invalid", nil},
		{lDelete, "unknown id", legacyPost("/api/service/webhook-subscription/delete", `{"id":"`+missing+`"}`), false, 404, "resource_not_found", nil},
		{lDelete, "id missing", legacyPost("/api/service/webhook-subscription/delete", `{}`), false, 400, "parameter_missing", nil},

		{ingest, "merchant_id of the wrong type", post("/internal/v1/events", `{"merchant_id":1,"type":"payout.paid","payload":{}}`), true, 400, "parameter_invalid", "merchant_id"},
		{ingest, "payload not an object", post("/internal/v1/events", `{"merchant_id":"m_bad","type":"payout.paid","payload":"x"}`), true, 400, "parameter_invalid", "payload"},
		{ingest, "payload over its limit", post("/internal/v1/events", `{"merchant_id":"m_bad","type":"payout.paid","payload":{"x":"`+strings.Repeat("a", 2000)+`"}}`), true, 413, "payload_too_large", "payload"},
		{ingest, "invalid UTF-8 in the payload", post("/internal/v1/events", "{\"merchant_id\":\"m_bad\",\"type\":\"payout.paid\",\"payload\":{\"x\":\"\xff\"}}"), true, 400, "parameter_invalid", "payload.x"},
		{ingest, "malformed id", post("/internal/v1/events", `{"id":"nope","merchant_id":"m_bad","type":"payout.paid","payload":{}}`), true, 400, "parameter_invalid", "id"},
		{ingest, "api_version of the wrong type", post("/internal/v1/events", `{"merchant_id":"m_bad","type":"payout.paid","payload":{},"api_version":5}`), true, 400, "parameter_invalid", "api_version"},
		{ingest, "no ingest token", request{Method: "POST", Path: "/internal/v1/events", Body: goodIngest, Header: map[string]string{"Authorization": omitHeader}}, true, 401, "authentication_required", nil},

		{batch, "events of the wrong type", post("/internal/v1/events/batch", `{"events":{}}`), true, 400, "parameter_invalid", "events"},
		{batch, "an event not an object", post("/internal/v1/events/batch", `{"events":[`+goodIngest+`,1]}`), true, 400, "parameter_invalid", "events[1]"},
		{batch, "a field of the wrong type in an event", post("/internal/v1/events/batch", `{"events":[`+goodIngest+`,{"type":1}]}`), true, 400, "parameter_invalid", "events[1].type"},
		{batch, "an unknown field in an event", post("/internal/v1/events/batch", `{"events":[{"colour":1}]}`), true, 400, "validation_error", "events[0].colour"},
		{batch, "a field missing in an event", post("/internal/v1/events/batch", `{"events":[`+goodIngest+`,{"type":"payout.paid","payload":{}}]}`), true, 400, "parameter_missing", "events[1].merchant_id"},
		{batch, "too many events", post("/internal/v1/events/batch", `{"events":[`+strings.Repeat(`{},`, 100)+`{}]}`), true, 400, "parameter_invalid", "events"},

		{apiKeys, "scopes of the wrong type", post("/internal/v1/merchants/m_bad/api_keys", `{"scopes":"webhooks:read"}`), true, 400, "parameter_invalid", "scopes"},
		{apiKeys, "empty scopes", post("/internal/v1/merchants/m_bad/api_keys", `{"scopes":[]}`), true, 400, "parameter_missing", "scopes"},
		{apiKeys, "merchant id too long", post("/internal/v1/merchants/"+strings.Repeat("m", 256)+"/api_keys", `{"scopes":["webhooks:read"]}`), true, 400, "parameter_invalid", "merchant_id"},

		{keyList, "merchant id too long", get("/internal/v1/merchants/" + strings.Repeat("m", 256) + "/api_keys"), true, 400, "parameter_invalid", "merchant_id"},
		{keyList, "NUL in the merchant id", get("/internal/v1/merchants/m%00bad/api_keys"), true, 400, "parameter_invalid", "merchant_id"},
		{keyList, "limit over 100", get("/internal/v1/merchants/m_bad/api_keys?limit=101"), true, 400, "parameter_invalid", "limit"},
		{keyList, "a parameter it does not take", get("/internal/v1/merchants/m_bad/api_keys?status=active"), true, 400, "parameter_invalid", "status"},
		{keyList, "malformed cursor", get("/internal/v1/merchants/m_bad/api_keys?cursor=%ff"), true, 400, "invalid_cursor", "cursor"},
		{keyRevoke, "key id not a UUID", request{Method: "DELETE", Path: "/internal/v1/merchants/m_bad/api_keys/k_1"}, true, 400, "parameter_invalid", "key_id"},
		{keyRevoke, "no such key", request{Method: "DELETE", Path: "/internal/v1/merchants/m_bad/api_keys/" + missing}, true, 404, "resource_not_found", nil},
		{keyRevoke, "merchant id not UTF-8", request{Method: "DELETE", Path: "/internal/v1/merchants/m%ff/api_keys/" + missing}, true, 400, "parameter_invalid", "merchant_id"},
		{keyRoll, "key id not a UUID", post("/internal/v1/merchants/m_bad/api_keys/"+strings.Repeat("0", 36)+"x/roll", `{}`), true, 400, "parameter_invalid", "key_id"},
		{keyRoll, "overlap of the wrong type", post("/internal/v1/merchants/m_bad/api_keys/"+missing+"/roll", `{"overlap_seconds":"60"}`), true, 400, "parameter_invalid", "overlap_seconds"},
		{keyRoll, "overlap not whole", post("/internal/v1/merchants/m_bad/api_keys/"+missing+"/roll", `{"overlap_seconds":1.5}`), true, 400, "parameter_invalid", "overlap_seconds"},
		{keyRoll, "negative overlap", post("/internal/v1/merchants/m_bad/api_keys/"+missing+"/roll", `{"overlap_seconds":-1}`), true, 400, "parameter_invalid", "overlap_seconds"},
		{keyRoll, "overlap over 30 days", post("/internal/v1/merchants/m_bad/api_keys/"+missing+"/roll", `{"overlap_seconds":2592001}`), true, 400, "parameter_invalid", "overlap_seconds"},
		{keyRoll, "overlap past int64", post("/internal/v1/merchants/m_bad/api_keys/"+missing+"/roll", `{"overlap_seconds":1e30}`), true, 400, "parameter_invalid", "overlap_seconds"},
		{keyRoll, "no such key", post("/internal/v1/merchants/m_bad/api_keys/"+missing+"/roll", ``), true, 404, "resource_not_found", nil},

		{merchant, "notification_email of the wrong type", put("/internal/v1/merchants/m_bad", `{"notification_email":1}`), true, 400, "parameter_invalid", "notification_email"},
		{merchant, "not an address", put("/internal/v1/merchants/m_bad", `{"notification_email":"ops at example"}`), true, 400, "parameter_invalid", "notification_email"},
		{merchant, "api_version of the wrong type", put("/internal/v1/merchants/m_bad", `{"api_version":[]}`), true, 400, "parameter_invalid", "api_version"},
		{merchant, "merchant id too long", put("/internal/v1/merchants/"+strings.Repeat("m", 256), `{}`), true, 400, "parameter_invalid", "merchant_id"},

		// A hostile merchant's strings: NUL (which no Postgres text or
		// jsonb value holds), invalid UTF-8 in a header, repeated query
		// parameters, and escapes in internal paths.
		{subs, "NUL in description", post("/v1/webhook_subscriptions", `{"url":"https://example.com/h","events":["*"],"description":"a\u0000b"}`), false, 400, "parameter_invalid", "description"},
		{subs, "NUL in a metadata key", post("/v1/webhook_subscriptions", `{"url":"https://example.com/h","events":["*"],"metadata":{"a\u0000b":"v"}}`), false, 400, "parameter_invalid", "metadata"},
		{subs, "NUL in a metadata value", post("/v1/webhook_subscriptions", `{"url":"https://example.com/h","events":["*"],"metadata":{"k":"\u0000"}}`), false, 400, "parameter_invalid", "metadata[k]"},
		{subs, "non-UTF-8 Idempotency-Key", withHeader(post("/v1/webhook_subscriptions", goodSub), "Idempotency-Key", "k\xff"), false, 400, "parameter_invalid", "Idempotency-Key"},
		{subs, "Idempotency-Key of 256 characters", withHeader(post("/v1/webhook_subscriptions", goodSub), "Idempotency-Key", strings.Repeat("é", 256)), false, 400, "parameter_invalid", "Idempotency-Key"},
		{subs, "Idempotency-Key of 255 two-byte characters", withHeader(post("/v1/webhook_subscriptions", goodSub), "Idempotency-Key", strings.Repeat("é", 255)), false, 201, "", nil},
		{subUpdate, "NUL in description", post(subPath, `{"description":"\u0000"}`), false, 400, "parameter_invalid", "description"},
		{subUpdate, "NUL in a metadata key", post(subPath, `{"metadata":{"\u0000":"v"}}`), false, 400, "parameter_invalid", "metadata"},
		{subUpdate, "NUL in a metadata value", post(subPath, `{"metadata":{"k":"v\u0000"}}`), false, 400, "parameter_invalid", "metadata[k]"},
		{subUpdate, "non-UTF-8 Idempotency-Key", withHeader(post(subPath, `{}`), "Idempotency-Key", "\xc3"), false, 400, "parameter_invalid", "Idempotency-Key"},
		{subList, "status given twice", get("/v1/webhook_subscriptions?status=enabled&status=disabled"), false, 400, "parameter_invalid", "status"},
		{subList, "limit given twice", get("/v1/webhook_subscriptions?limit=5&limit=abc"), false, 400, "parameter_invalid", "limit"},
		{subList, "cursor given twice", get("/v1/webhook_subscriptions?cursor=a&cursor=b"), false, 400, "parameter_invalid", "cursor"},
		{dels, "status given twice", get("/v1/webhook_deliveries?status=failed&status=pending"), false, 400, "parameter_invalid", "status"},
		{dels, "limit given twice", get("/v1/webhook_deliveries?limit=5&limit=abc"), false, 400, "parameter_invalid", "limit"},
		{dels, "the same filter twice", get("/v1/webhook_deliveries?subscription_id=" + missing + "&subscription_id=" + missing), false, 400, "parameter_invalid", "subscription_id"},
		{events, "event_type given twice", get("/v1/events?event_type=payout.paid&event_type=payout.failed"), false, 400, "parameter_invalid", "event_type"},
		{events, "limit given twice", get("/v1/events?limit=5&limit=5"), false, 400, "parameter_invalid", "limit"},
		{lCreate, "NUL in description", legacyPost("/api/service/webhook-subscription/create", `{"url":"https://example.com/h","events":["*"],"description":"\u0000"}`), false, 400, "parameter_invalid", nil},
		{lCreate, "NUL in a metadata key", legacyPost("/api/service/webhook-subscription/create", `{"url":"https://example.com/h","events":["*"],"metadata":{"\u0000":"v"}}`), false, 400, "parameter_invalid", nil},
		{lCreate, "NUL in a metadata value", legacyPost("/api/service/webhook-subscription/create", `{"url":"https://example.com/h","events":["*"],"metadata":{"k":"\u0000"}}`), false, 400, "parameter_invalid", nil},
		{lCreate, "non-UTF-8 Idempotency-Key", withHeader(legacyPost("/api/service/webhook-subscription/create", goodSub), "Idempotency-Key", "\xff\xfe"), false, 400, "parameter_invalid", nil},
		{lCreate, "Idempotency-Key of 256 characters", withHeader(legacyPost("/api/service/webhook-subscription/create", goodSub), "Idempotency-Key", strings.Repeat("€", 256)), false, 400, "parameter_invalid", nil},
		{lUpdate, "NUL in description", legacyPost("/api/service/webhook-subscription/update", `{"id":"{sub}","description":"\u0000"}`), false, 400, "parameter_invalid", nil},
		{lUpdate, "NUL in a metadata value", legacyPost("/api/service/webhook-subscription/update", `{"id":"{sub}","metadata":{"k":"\u0000"}}`), false, 400, "parameter_invalid", nil},
		{lDelete, "non-UTF-8 Idempotency-Key", withHeader(legacyPost("/api/service/webhook-subscription/delete", `{"id":"{sub}"}`), "Idempotency-Key", "\xff"), false, 400, "parameter_invalid", nil},
		{ingest, "NUL in merchant_id", post("/internal/v1/events", `{"merchant_id":"m\u0000bad","type":"payout.paid","payload":{}}`), true, 400, "parameter_invalid", "merchant_id"},
		{batch, "NUL in a merchant_id", post("/internal/v1/events/batch", `{"events":[`+goodIngest+`,{"merchant_id":"\u0000","type":"payout.paid","payload":{}}]}`), true, 400, "parameter_invalid", "events[1].merchant_id"},
		{apiKeys, "NUL in the merchant id", post("/internal/v1/merchants/m%00bad/api_keys", `{"scopes":["webhooks:read"]}`), true, 400, "parameter_invalid", "merchant_id"},
		{apiKeys, "invalid UTF-8 merchant id, lower-case hex", post("/internal/v1/merchants/m%ff/api_keys", `{"scopes":["webhooks:read"]}`), true, 400, "parameter_invalid", "merchant_id"},
		{apiKeys, "invalid UTF-8 merchant id, upper-case hex", post("/internal/v1/merchants/m%FF/api_keys", `{"scopes":["webhooks:read"]}`), true, 400, "parameter_invalid", "merchant_id"},
		{merchant, "NUL in the merchant id", put("/internal/v1/merchants/m%00bad", `{}`), true, 400, "parameter_invalid", "merchant_id"},
		{merchant, "invalid UTF-8 merchant id, lower-case hex", put("/internal/v1/merchants/%c3", `{}`), true, 400, "parameter_invalid", "merchant_id"},
		{merchant, "invalid UTF-8 merchant id, upper-case hex", put("/internal/v1/merchants/%C3", `{}`), true, 400, "parameter_invalid", "merchant_id"},

		{mint, "no body: every default", post("/v1/portal_sessions", ``), false, 201, "", nil},
		{mint, "unknown capability", post("/v1/portal_sessions", `{"capabilities":["view","admin"]}`), false, 400, "parameter_invalid", "capabilities"},
		{mint, "capabilities not a list", post("/v1/portal_sessions", `{"capabilities":"view"}`), false, 400, "parameter_invalid", "capabilities"},
		{mint, "ttl zero", post("/v1/portal_sessions", `{"ttl_seconds":0}`), false, 400, "parameter_invalid", "ttl_seconds"},
		{mint, "ttl over 7 days", post("/v1/portal_sessions", `{"ttl_seconds":604801}`), false, 400, "parameter_invalid", "ttl_seconds"},
		{mint, "ttl not an integer", post("/v1/portal_sessions", `{"ttl_seconds":1.5}`), false, 400, "parameter_invalid", "ttl_seconds"},
		{mint, "colour without #", post("/v1/portal_sessions", `{"branding":{"accent_color":"1A2B3C"}}`), false, 400, "parameter_invalid", "branding.accent_color"},
		{mint, "colour of 3 digits", post("/v1/portal_sessions", `{"branding":{"accent_color":"#abc"}}`), false, 400, "parameter_invalid", "branding.accent_color"},
		{mint, "logo not a URL", post("/v1/portal_sessions", `{"branding":{"logo_url":"logo.png"}}`), false, 400, "parameter_invalid", "branding.logo_url"},
		{mint, "logo on ftp", post("/v1/portal_sessions", `{"branding":{"logo_url":"ftp://example.com/l.png"}}`), false, 400, "parameter_invalid", "branding.logo_url"},
		{mint, "branding field in another case", post("/v1/portal_sessions", `{"branding":{"Accent_Color":"#000000"}}`), false, 400, "validation_error", "branding.Accent_Color"},
		{mint, "unknown branding field", post("/v1/portal_sessions", `{"branding":{"colour":"#000000"}}`), false, 400, "validation_error", "branding.colour"},
		{mintIn, "unknown merchant", request{Method: "POST", Path: "/internal/v1/merchants/m_nobody/portal_sessions", Body: `{}`}, true, 404, "resource_not_found", nil},
		{mintIn, "NUL in the merchant id", request{Method: "POST", Path: "/internal/v1/merchants/m%00bad/portal_sessions", Body: `{}`}, true, 400, "parameter_invalid", "merchant_id"},
		{mintIn, "ttl over 7 days", request{Method: "POST", Path: "/internal/v1/merchants/m_bad/portal_sessions", Body: `{"ttl_seconds":604801}`}, true, 400, "parameter_invalid", "ttl_seconds"},
		{merchant, "portal colour not #RRGGBB", put("/internal/v1/merchants/m_bad", `{"portal_accent_color":"red"}`), true, 400, "parameter_invalid", "portal_accent_color"},
		{merchant, "portal logo not a URL", put("/internal/v1/merchants/m_bad", `{"portal_logo_url":"/logo.png"}`), true, 400, "parameter_invalid", "portal_logo_url"},
		{endAll, "unknown merchant: nothing to end", request{Method: "DELETE", Path: "/internal/v1/merchants/m_nobody/portal_sessions"}, true, 204, "", nil},
		{endAll, "NUL in the merchant id", request{Method: "DELETE", Path: "/internal/v1/merchants/m%00bad/portal_sessions"}, true, 400, "parameter_invalid", "merchant_id"},
		{current, "junk query is ignored", get("/v1/portal_sessions/current?%ff=%fe"), false, 200, "", nil},
		{signOut, "an API key has no session: nothing to end", request{Method: "DELETE", Path: "/v1/portal_sessions/current", Key: key}, false, 204, "", nil},
		{eventTypes, "junk query is ignored", get("/v1/event_types?limit=-1"), false, 200, "", nil},
		{"GET /v1/event_types/{type}", "unknown type", get("/v1/event_types/payout.lost"), false, 404, "resource_not_found", nil},
		{"GET /v1/event_types/{type}", "invalid UTF-8 and a NUL", get("/v1/event_types/%ff%00"), false, 404, "resource_not_found", nil},
		{"GET /v1/event_types/{type}", "a long name", get("/v1/event_types/" + strings.Repeat("x", 5000)), false, 404, "resource_not_found", nil},
		{secret, "malformed id", get("/v1/webhook_subscriptions/nope/secret"), false, 404, "resource_not_found", nil},
		{secret, "unknown id", get("/v1/webhook_subscriptions/" + missing + "/secret"), false, 404, "resource_not_found", nil},
		{health, "malformed id", get("/v1/webhook_subscriptions/nope/health"), false, 404, "resource_not_found", nil},
		{health, "unknown id", get("/v1/webhook_subscriptions/" + missing + "/health"), false, 404, "resource_not_found", nil},
		{stats, "malformed id", get("/v1/webhook_subscriptions/nope/stats"), false, 404, "resource_not_found", nil},
		{stats, "unknown id", get("/v1/webhook_subscriptions/" + missing + "/stats"), false, 404, "resource_not_found", nil},
		{stats, "a window it does not offer", get(subPath + "/stats?window=30d"), false, 400, "parameter_invalid", "window"},
		{pollRead, "malformed id", get("/v1/webhook_subscriptions/nope/poll"), false, 404, "resource_not_found", nil},
		{pollRead, "unknown id", get("/v1/webhook_subscriptions/" + missing + "/poll"), false, 404, "resource_not_found", nil},
		{pollRead, "an empty iterator", get(subPath + "/poll?iterator="), false, 400, "parameter_invalid", "iterator"},
		{pollRead, "limit out of range", get(subPath + "/poll?limit=0"), false, 400, "parameter_invalid", "limit"},
		{pollRead, "limit not a number", get(subPath + "/poll?limit=ten"), false, 400, "parameter_invalid", "limit"},
		{pollRead, "wait too long", get(subPath + "/poll?wait=31"), false, 400, "parameter_invalid", "wait"},
		{pollRead, "since not a time", get(subPath + "/poll?since=yesterday"), false, 400, "parameter_invalid", "since"},
		{check, "malformed id", post("/v1/webhook_subscriptions/nope/check", ``), false, 404, "resource_not_found", nil},
		{check, "unknown id", post("/v1/webhook_subscriptions/"+missing+"/check", ``), false, 404, "resource_not_found", nil},
		{check, "a parameter it does not take", post(subPath+"/check", `{"cases":["valid"]}`), false, 400, "validation_error", "cases"},
		{check, "oversized body", post(subPath+"/check", oversized), false, 413, "payload_too_large", nil},
		{simulate, "malformed id", post("/v1/webhook_subscriptions/nope/transformation/simulate", `{"event_type":"payout.paid"}`), false, 404, "resource_not_found", nil},
		{simulate, "unknown id", post("/v1/webhook_subscriptions/"+missing+"/transformation/simulate", `{"event_type":"payout.paid"}`), false, 404, "resource_not_found", nil},
		{simulate, "no event named", post(subPath+"/transformation/simulate", `{"code":"function handler(w) { return w }"}`), false, 400, "parameter_missing", "event_id"},
		{simulate, "both an event and a type", post(subPath+"/transformation/simulate", `{"event_id":"`+missing+`","event_type":"payout.paid"}`), false, 400, "parameter_invalid", "event_type"},
		{simulate, "an event of nobody's", post(subPath+"/transformation/simulate", `{"event_id":"`+missing+`"}`), false, 404, "resource_not_found", nil},
		{simulate, "a type not in the catalogue", post(subPath+"/transformation/simulate", `{"event_type":"payout.lost"}`), false, 400, "parameter_invalid", "event_type"},
		{simulate, "no saved code and none sent", post(subPath+"/transformation/simulate", `{"event_type":"payout.paid"}`), false, 400, "parameter_invalid", "code"},
		{simulate, "code over 64 KiB: over the body bound", post(subPath+"/transformation/simulate", `{"event_type":"payout.paid","code":"`+strings.Repeat("x", 65537)+`"}`), false, 413, "payload_too_large", nil},
		{simulate, "a field it does not take", post(subPath+"/transformation/simulate", `{"event_type":"payout.paid","cases":1}`), false, 400, "validation_error", "cases"},
		{simulate, "oversized body", post(subPath+"/transformation/simulate", oversized), false, 413, "payload_too_large", nil},
		{subs, "a transformation that is not an object", post("/v1/webhook_subscriptions", `{"url":"https://example.com/h","events":["*"],"transformation":"return 1"}`), false, 400, "parameter_invalid", "transformation"},
		{subs, "a transformation field it does not take", post("/v1/webhook_subscriptions", `{"url":"https://example.com/h","events":["*"],"transformation":{"code":"x","lang":"js"}}`), false, 400, "parameter_invalid", "transformation"},
		{subs, "transformation code not a string", post("/v1/webhook_subscriptions", `{"url":"https://example.com/h","events":["*"],"transformation":{"code":1}}`), false, 400, "parameter_invalid", "transformation.code"},
		{"GET /v1/listen", "not a WebSocket handshake", get("/v1/listen"), false, 400, "parameter_invalid", "Upgrade"},
		{"GET /v1/listen", "secret_only not a boolean", get("/v1/listen?secret_only=yes"), false, 400, "parameter_invalid", "secret_only"},
		{"GET /v1/listen", "malformed listener_id", get("/v1/listen?listener_id=nope"), false, 400, "parameter_invalid", "listener_id"},
		{"POST /v1/event_types/{type}/trigger", "unknown type", post("/v1/event_types/payout.lost/trigger", ``), false, 400, "parameter_invalid", "type"},
		{"POST /v1/event_types/{type}/trigger", "the reserved test type", post("/v1/event_types/ping.test/trigger", ``), false, 400, "parameter_invalid", "type"},
		{"POST /v1/event_types/{type}/trigger", "invalid UTF-8 type", post("/v1/event_types/%ff/trigger", ``), false, 400, "parameter_invalid", "type"},
		{"POST /v1/event_types/{type}/trigger", "oversized body", post("/v1/event_types/payout.paid/trigger", oversized), false, 413, "payload_too_large", nil},

		{"GET /healthz", "junk query is ignored", request{Method: "GET", Path: "/healthz?%ff=%fe"}, true, 200, "", nil},
		{"GET /readyz", "junk query is ignored", request{Method: "GET", Path: "/readyz?%ff=%fe"}, true, 200, "", nil},
		{"* /metrics", "junk query is ignored", request{Method: "GET", Path: "/metrics?%ff=%fe"}, true, 200, "", nil},
		{erase, "merchant_id of the wrong type", request{Method: "POST", Path: "/internal/v1/events/" + missing + "/erase", Body: `{"merchant_id":1}`}, true, 400, "parameter_invalid", "merchant_id"},
		{erase, "bad actor", request{Method: "POST", Path: "/internal/v1/events/" + missing + "/erase", Header: map[string]string{"Webhookd-Actor": "a b"}}, true, 400, "parameter_invalid", "Webhookd-Actor"},
		{erase, "unknown event", request{Method: "POST", Path: "/internal/v1/events/" + missing + "/erase"}, true, 404, "resource_not_found", nil},
		{audit, "no merchant_id", request{Method: "GET", Path: "/internal/v1/audit"}, true, 400, "parameter_missing", "merchant_id"},
		{audit, "limit 0", request{Method: "GET", Path: "/internal/v1/audit?merchant_id=m_bad&limit=0"}, true, 400, "parameter_invalid", "limit"},
		{audit, "unknown filter", request{Method: "GET", Path: "/internal/v1/audit?merchant_id=m_bad&kind=x"}, true, 400, "parameter_invalid", "kind"},
		{merchant, "retention_days out of range", request{Method: "PUT", Path: "/internal/v1/merchants/m_bad", Body: `{"retention_days":31}`}, true, 400, "parameter_invalid", "retention_days"},
		{"GET /internal/v1/openapi.json", "junk query is ignored", request{Method: "GET", Path: "/internal/v1/openapi.json?%ff=%fe&limit=-1"}, true, 200, "", nil},
	}
	for _, c := range []struct {
		route, path string
		internal    bool
		hdr         map[string]string
	}{
		{subs, "/v1/webhook_subscriptions", false, auth}, {subUpdate, subPath, false, auth},
		{recoverR, subPath + "/recover", false, auth}, {lCreate, "/api/service/webhook-subscription/create", false, legacy},
		{lUpdate, "/api/service/webhook-subscription/update", false, legacy}, {lDelete, "/api/service/webhook-subscription/delete", false, legacy},
		{ingest, "/internal/v1/events", true, nil}, {batch, "/internal/v1/events/batch", true, nil},
		{apiKeys, "/internal/v1/merchants/m_bad/api_keys", true, nil}, {merchant, "/internal/v1/merchants/m_bad", true, nil},
		{mint, "/v1/portal_sessions", false, auth}, {mintIn, "/internal/v1/merchants/m_bad/portal_sessions", true, nil},
		{keyRoll, "/internal/v1/merchants/m_bad/api_keys/" + missing + "/roll", true, nil},
		{erase, "/internal/v1/events/" + missing + "/erase", true, nil},
	} {
		cases = append(cases, bodyCases(c.route, c.internal, c.path, c.hdr)...)
	}
	routes := walkRoutes(t, h)
	for _, rt := range routes {
		if _, path, _ := strings.Cut(rt, " "); strings.HasPrefix(path, "/debug/") {
			path = strings.NewReplacer("*", "", "{", "", "}", "").Replace(path)
			cases = append(cases, badCase{rt, "no ingest token", request{Method: "GET", Path: path,
				Header: map[string]string{"Authorization": omitHeader}}, true, 401, "authentication_required", nil})
		}
	}
	for _, rt := range routes {
		if !slices.ContainsFunc(cases, func(c badCase) bool { return c.route == rt }) {
			t.Errorf("route %s has no bad-input case", rt)
		}
	}

	for _, c := range cases {
		t.Run(c.route+"/"+c.name, func(t *testing.T) {
			if !slices.Contains(routes, c.route) {
				t.Fatalf("case for %s, which the routers do not serve", c.route)
			}
			req := c.req
			req.Path = strings.ReplaceAll(req.Path, "{sub}", sub)
			if b, ok := req.Body.(string); ok {
				req.Body = strings.ReplaceAll(b, "{sub}", sub)
			}
			var r response
			if c.internal {
				r = h.with(t).doInternal(req)
			} else {
				r = h.with(t).do(req)
			}
			legacySurface := strings.HasPrefix(req.Path, "/api/service/")
			switch {
			case c.code == "":
				if r.Status != c.status {
					t.Fatalf("status %d, want %d: %s", r.Status, c.status, r.Body)
				}
			case legacySurface:
				if r.Status != c.status {
					t.Fatalf("status %d, want %d: %s", r.Status, c.status, r.Body)
				}
				if code, _ := checkRefusal(t, r, true); code != c.code {
					t.Fatalf("code %q, want %q: %s", code, c.code, r.Body)
				}
			default:
				m := expectError(t, r, c.status, c.code)
				if m["param"] != c.param {
					t.Errorf("param = %#v, want %#v; body %s", m["param"], c.param, r.Body)
				}
				checkRefusal(t, r, false)
			}
		})
	}
}

// walkRoutes lists the routes of both listeners as "METHOD /pattern"; a
// pattern served for every method (Handle, Mount) is "* /pattern".
func walkRoutes(t *testing.T, h *harness) []string {
	t.Helper()
	cfg := h.cfg
	cfg.Registerer = prometheus.NewRegistry() // the harness's server registered its metrics already
	srv, err := admin.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	methods := map[string][]string{}
	for _, handler := range []http.Handler{srv.Public(), srv.Internal()} {
		routes, ok := handler.(chi.Routes)
		if !ok {
			t.Fatalf("%T is not a chi router", handler)
		}
		err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
			route = strings.ReplaceAll(route, "/*/", "/")
			if !slices.Contains(methods[route], method) {
				methods[route] = append(methods[route], method)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var out []string
	for route, ms := range methods {
		if len(ms) > 4 { // Handle and Mount serve every method
			out = append(out, "* "+route)
			continue
		}
		for _, m := range ms {
			out = append(out, fmt.Sprintf("%s %s", m, route))
		}
	}
	slices.Sort(out)
	return out
}
