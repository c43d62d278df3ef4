package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// badTexts are the texts that a Postgres text or jsonb value cannot hold,
// as they appear inside a JSON string of a request body: the NUL escape,
// bytes that are not UTF-8, and a lone surrogate escape (which
// encoding/json would turn into U+FFFD, and jsonb refuses).
var badTexts = []struct{ name, text string }{
	{"NUL escape", `a\u0000b`},
	{"invalid UTF-8", "a\xffb"},
	{"truncated UTF-8", "a\xc3"},
	{"lone high surrogate", `a\ud800b`},
	{"lone low surrogate", `\udc00`},
}

// textCase is one place of one route's body where a bad text goes.
type textCase struct {
	route    string // as walkRoutes names it
	path     string // {sub} stands for the merchant's subscription
	internal bool
	body     string // BAD stands for the bad text, inside a JSON string
	code     string
	param    string // "" on the legacy surface, which names none
}

// TestTextPostgresCannotStore sends a text that Postgres cannot store in
// every string field of every body the API reads, in keys, and deep in
// payloads, through the real handlers: each is 400 with the field named
// as deep as it goes, never a 5xx, and nothing is stored (a batch with one
// such event stores none). The merchant's subscription is ordered on a
// payload field, so that an event that got through would reach the
// fan-out's jsonb cast, which fails the statement. Every route that reads
// a body must have a case.
func TestTextPostgresCannotStore(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withIngestPipeline(t))
	key := h.merchant("m_text")
	created := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
		Body: map[string]any{"url": "https://example.com/hook", "events": []string{"*"}, "ordering": map[string]any{"key": "payload.s"}}})
	if created.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.Status, created.Body)
	}
	sub, _ := created.JSON(t)["id"].(string)
	keyID := uuid.NewString()

	const (
		subs     = "POST /v1/webhook_subscriptions"
		subPatch = "POST /v1/webhook_subscriptions/{id}"
		lCreate  = "POST /api/service/webhook-subscription/create"
		lUpdate  = "POST /api/service/webhook-subscription/update"
		lDelete  = "POST /api/service/webhook-subscription/delete"
		ingest   = "POST /internal/v1/events"
		batch    = "POST /internal/v1/events/batch"
		mint     = "POST /v1/portal_sessions"
		mintIn   = "POST /internal/v1/merchants/{id}/portal_sessions"
		pi       = "parameter_invalid"
		good     = `{"merchant_id":"m_text","type":"payout.paid","payload":{"s":"k"}}`
	)
	// ingestBodies are the bad places of an ingest event, with the
	// param each is named by.
	ingestBodies := []struct{ body, param string }{
		{`{"id":"BAD","merchant_id":"m_text","type":"payout.paid","payload":{}}`, "id"},
		{`{"merchant_id":"m_BAD","type":"payout.paid","payload":{}}`, "merchant_id"},
		{`{"merchant_id":"m_text","type":"payout.paidBAD","payload":{}}`, "type"},
		{`{"merchant_id":"m_text","type":"payout.paid","payload":{},"api_version":"2026-05-01BAD"}`, "api_version"},
		{`{"merchant_id":"m_text","type":"payout.paid","payload":{"s":"BAD"}}`, "payload.s"},
		{`{"merchant_id":"m_text","type":"payout.paid","payload":{"foo":{"bar":"BAD"}}}`, "payload.foo.bar"},
		{`{"merchant_id":"m_text","type":"payout.paid","payload":{"items":[{"id":"i1"},{"id":"BAD"}]}}`, "payload.items[1].id"},
		{`{"merchant_id":"m_text","type":"payout.paid","payload":{"tags":["a","BAD"]}}`, "payload.tags[1]"},
		{`{"merchant_id":"m_text","type":"payout.paid","payload":{"foo":{"kBAD":1}}}`, "payload.foo"},
		{`{"merchant_id":"m_text","type":"payout.paid","payload":{"BAD":1}}`, "payload"},
		{`{"merchant_id":"m_text","type":"payout.paid","payload":{},"deliver_at":"2030-01-01T00:00:00ZBAD"}`, "deliver_at"},
	}
	subscriptionBodies := []struct{ body, param string }{
		{`{"url":"https://example.com/hBAD","events":["*"]}`, "url"},
		{`{"url":"https://example.com/h","events":["payout.paid","BAD"]}`, "events[1]"},
		{`{"url":"https://example.com/h","events":["*"],"description":"BAD"}`, "description"},
		{`{"url":"https://example.com/h","events":["*"],"metadata":{"k":"BAD"}}`, "metadata[k]"},
		{`{"url":"https://example.com/h","events":["*"],"metadata":{"kBAD":"v"}}`, "metadata"},
		{`{"url":"https://example.com/h","events":["*"],"filter":"payload.s == 'BAD'"}`, "filter"},
		{`{"url":"https://example.com/h","events":["*"],"headers":{"X-Tenant":"BAD"}}`, "headers.X-Tenant"},
		{`{"url":"https://example.com/h","events":["*"],"headers":{"X-BAD":"v"}}`, "headers"},
		{`{"url":"https://example.com/h","events":["*"],"ordering":{"key":"payload.BAD"}}`, "ordering.key"},
	}
	var cases []textCase
	for _, b := range ingestBodies {
		cases = append(cases,
			textCase{ingest, "/internal/v1/events", true, b.body, pi, b.param},
			// One bad event refuses the whole batch, the good one with it.
			textCase{batch, "/internal/v1/events/batch", true, `{"events":[` + good + `,` + b.body + `]}`, pi, "events[1]." + b.param})
	}
	for _, b := range subscriptionBodies {
		patch := strings.Replace(b.body, `"url":"https://example.com/h","events":["*"],`, "", 1)
		cases = append(cases,
			textCase{subs, "/v1/webhook_subscriptions", false, b.body, pi, b.param},
			textCase{subPatch, "/v1/webhook_subscriptions/{sub}", false, patch, pi, b.param},
			textCase{lCreate, "/api/service/webhook-subscription/create", false, b.body, pi, ""},
			textCase{lUpdate, "/api/service/webhook-subscription/update", false, `{"id":"{sub}",` + patch[1:], pi, ""})
	}
	for _, route := range []string{mint, mintIn} {
		path, internal := "/v1/portal_sessions", false
		if route == mintIn {
			path, internal = "/internal/v1/merchants/m_text/portal_sessions", true
		}
		cases = append(cases,
			textCase{route, path, internal, `{"capabilities":["view","BAD"]}`, pi, "capabilities[1]"},
			textCase{route, path, internal, `{"branding":{"accent_color":"#00000BAD"}}`, pi, "branding.accent_color"},
			textCase{route, path, internal, `{"branding":{"logo_url":"https://example.com/BAD.png"}}`, pi, "branding.logo_url"})
	}
	cases = append(cases,
		textCase{subPatch, "/v1/webhook_subscriptions/{sub}", false, `{"status":"enabledBAD"}`, pi, "status"},
		textCase{lUpdate, "/api/service/webhook-subscription/update", false, `{"id":"{sub}BAD"}`, pi, ""},
		textCase{lUpdate, "/api/service/webhook-subscription/update", false, `{"id":"{sub}","status":"BAD"}`, pi, ""},
		textCase{lDelete, "/api/service/webhook-subscription/delete", false, `{"id":"BAD"}`, pi, ""},
		textCase{"POST /v1/webhook_subscriptions/{id}/recover", "/v1/webhook_subscriptions/{sub}/recover", false, `{"since":"2026-01-01T00:00:00ZBAD"}`, pi, "since"},
		textCase{"POST /v1/webhook_deliveries/replay", "/v1/webhook_deliveries/replay", false, `{"since":"2026-01-01T00:00:00ZBAD","until":"2026-01-02T00:00:00Z"}`, pi, "since"},
		textCase{"POST /v1/webhook_subscriptions/{id}/transformation/simulate", "/v1/webhook_subscriptions/{sub}/transformation/simulate", false, `{"event_type":"payout.paidBAD"}`, pi, "event_type"},
		textCase{"POST /internal/v1/merchants/{id}/api_keys", "/internal/v1/merchants/m_text/api_keys", true, `{"scopes":["webhooks:read","BAD"]}`, pi, "scopes[1]"},
		textCase{"PUT /internal/v1/merchants/{id}", "/internal/v1/merchants/m_text", true, `{"notification_email":"ops@example.comBAD"}`, pi, "notification_email"},
		textCase{"PUT /internal/v1/merchants/{id}", "/internal/v1/merchants/m_text", true, `{"api_version":"BAD"}`, pi, "api_version"},
		textCase{"PUT /internal/v1/merchants/{id}", "/internal/v1/merchants/m_text", true, `{"portal_accent_color":"BAD"}`, pi, "portal_accent_color"},
		textCase{"PUT /internal/v1/merchants/{id}", "/internal/v1/merchants/m_text", true, `{"portal_logo_url":"https://example.com/BAD"}`, pi, "portal_logo_url"},
		textCase{"POST /internal/v1/events/{id}/erase", "/internal/v1/events/0193a1b2-0000-7000-8000-000000000000/erase", true, `{"merchant_id":"m_textBAD"}`, pi, "merchant_id"},
	)
	// The routes that take no field refuse any, so a bad text can only be
	// in the name of one they do not know.
	for _, c := range []struct{ route, path string }{
		{"POST /v1/webhook_subscriptions/{id}/rotate_secret", "/v1/webhook_subscriptions/{sub}/rotate_secret"},
		{"POST /v1/webhook_subscriptions/{id}/check", "/v1/webhook_subscriptions/{sub}/check"},
	} {
		cases = append(cases, textCase{c.route, c.path, false, `{"xBAD":"BAD"}`, "validation_error", "*"})
	}
	cases = append(cases, textCase{"POST /internal/v1/merchants/{id}/api_keys/{key_id}/roll",
		"/internal/v1/merchants/m_text/api_keys/" + keyID + "/roll", true, `{"overlap_secondsBAD":60}`, "validation_error", "*"})

	// These read no body at all (a trigger's payload is the catalogue's
	// example): nothing of one reaches Postgres.
	noBody := []string{"POST /v1/event_types/{type}/trigger", "POST /v1/webhook_subscriptions/{id}/send_test_event",
		"POST /v1/webhook_deliveries/{id}/redeliver", "POST /v1/events/{id}/cancel", "POST /internal/v1/events/{id}/cancel"}
	routes := walkRoutes(t, h)
	for _, rt := range routes {
		method, _, _ := strings.Cut(rt, " ")
		if (method == http.MethodPost || method == http.MethodPut) && !slices.Contains(noBody, rt) &&
			!slices.ContainsFunc(cases, func(c textCase) bool { return c.route == rt }) {
			t.Errorf("route %s reads a body and has no case", rt)
		}
	}

	before := fingerprint(t, h)
	for _, c := range cases {
		if !slices.Contains(routes, c.route) {
			t.Fatalf("case for %s, which the routers do not serve", c.route)
		}
		for _, bad := range badTexts {
			t.Run(fmt.Sprintf("%s/%s/%s", c.route, c.param, bad.name), func(t *testing.T) {
				body := strings.ReplaceAll(c.body, "{sub}", sub)
				body = strings.ReplaceAll(body, "BAD", bad.text)
				req := request{Method: http.MethodPost, Path: strings.ReplaceAll(c.path, "{sub}", sub), Body: body}
				if strings.HasPrefix(c.route, "PUT ") {
					req.Method = http.MethodPut
				}
				var r response
				switch legacy := strings.HasPrefix(c.path, "/api/service/"); {
				case c.internal:
					r = h.with(t).doInternal(req)
				case legacy:
					req.Header = map[string]string{"X-Service-Api-Key": key}
					r = h.with(t).do(req)
				default:
					req.Key = key
					r = h.with(t).do(req)
				}
				noServerError(t, r)
				if c.param == "" { // the legacy surface
					if r.Status != http.StatusBadRequest {
						t.Fatalf("status %d, want 400: %s", r.Status, r.Body)
					}
					if code, _ := checkRefusal(t, r, true); code != c.code {
						t.Fatalf("code %q, want %q: %s", code, c.code, r.Body)
					}
				} else {
					m := expectError(t, r, http.StatusBadRequest, c.code)
					if c.param != "*" && m["param"] != c.param {
						t.Errorf("param = %#v, want %q; body %s", m["param"], c.param, r.Body)
					}
					checkRefusal(t, r, false)
				}
				if after := fingerprint(t, h); after != before {
					t.Errorf("a refused request changed what is stored: %s, was %s", after, before)
				}
			})
		}
	}
}

// TestTextPostgresCanStore: what only looks like a bad text is taken and
// kept exactly: an escaped backslash before u0000, a surrogate pair, the
// replacement character itself.
func TestTextPostgresCanStore(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withIngestPipeline(t))
	key := h.merchant("m_text")
	created := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
		Body: map[string]any{"url": "https://example.com/hook", "events": []string{"*"}, "ordering": map[string]any{"key": "payload.s"}}})
	if created.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.Status, created.Body)
	}
	const text = `\\u0000 \ud83d\ude00 \uFFFD \\\ud83d\ude00 é`
	const want = `\u0000 😀 ` + "\uFFFD" + ` \😀 é`
	r := h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/events",
		Body: `{"merchant_id":"m_text","type":"payout.paid","payload":{"s":"` + text + `","k` + text + `":["` + text + `"]}}`})
	if r.Status != http.StatusAccepted {
		t.Fatalf("ingest: %d %s, want 202", r.Status, r.Body)
	}
	payload, _ := r.JSON(t)["payload"].(map[string]any)
	if items, _ := payload["k"+want].([]any); payload["s"] != want || len(items) != 1 || items[0] != want {
		t.Errorf("payload answered %v, want every text %q", payload, want)
	}
	r = h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
		Body: `{"url":"https://example.com/h","events":["*"],"description":"` + text + `","metadata":{"k":"` + text + `"}}`})
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s, want 201", r.Status, r.Body)
	}
	if m := r.JSON(t); m["description"] != want || m["metadata"].(map[string]any)["k"] != want {
		t.Errorf("subscription answered %s, want description and metadata %q", r.Body, want)
	}
}

// fingerprint sums up what the requests of these tests could store.
func fingerprint(t *testing.T, h *harness) string {
	t.Helper()
	var events, deliveries, subs, keys, sessions, merchants int
	var subsAt, merchantsAt string
	err := h.store.Pool().QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM events), (SELECT count(*) FROM deliveries),
		(SELECT count(*) FROM subscriptions), (SELECT coalesce(max(updated_at)::text, '') FROM subscriptions),
		(SELECT count(*) FROM api_keys), (SELECT count(*) FROM portal_sessions),
		(SELECT count(*) FROM merchants), (SELECT coalesce(max(updated_at)::text, '') FROM merchants)`).
		Scan(&events, &deliveries, &subs, &subsAt, &keys, &sessions, &merchants, &merchantsAt)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("events %d, deliveries %d, subscriptions %d (updated %s), api keys %d, portal sessions %d, merchants %d (updated %s)",
		events, deliveries, subs, subsAt, keys, sessions, merchants, merchantsAt)
}
