package admin_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/webhookd/webhookd/admin"
)

// openAPI is the document loaded and validated once per test binary, with a
// router that matches any host (the document's server is the production
// gateway; the tests talk to 127.0.0.1).
var openAPI = sync.OnceValues(func() (*openapi3.T, error) { return loadOpenAPI(admin.OpenAPI()) })

var openAPIRouter = sync.OnceValues(func() (routers.Router, error) { return routerOf(openAPI()) })

// loadOpenAPI parses and validates one document.
func loadOpenAPI(data []byte) (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, err
	}
	return doc, nil
}

// routerOf routes requests to any host by doc's paths.
func routerOf(doc *openapi3.T, err error) (routers.Router, error) {
	if err != nil {
		return nil, err
	}
	routed := *doc
	routed.Servers = nil
	return legacy.NewRouter(&routed)
}

func TestOpenAPIDocumentIsValid(t *testing.T) {
	t.Parallel()
	doc, err := openAPI()
	if err != nil {
		t.Fatalf("the OpenAPI document is invalid: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Errorf("openapi %s, want 3.1", doc.OpenAPI)
	}
	// Every route of the public surface is documented, with its scope.
	routes := []struct{ method, path, scope string }{
		{"GET", "/v1/api_versions", ""},
		{"GET", "/v1/openapi.json", ""},
		{"GET", "/v1/webhook_source_addresses", ""},
		{"POST", "/v1/webhook_subscriptions", admin.ScopeWrite},
		{"GET", "/v1/webhook_subscriptions", admin.ScopeRead},
		{"GET", "/v1/webhook_subscriptions/{id}", admin.ScopeRead},
		{"POST", "/v1/webhook_subscriptions/{id}", admin.ScopeWrite},
		{"DELETE", "/v1/webhook_subscriptions/{id}", admin.ScopeWrite},
		{"POST", "/v1/webhook_subscriptions/{id}/rotate_secret", admin.ScopeWrite},
		{"POST", "/v1/webhook_subscriptions/{id}/send_test_event", admin.ScopeWrite},
		{"GET", "/v1/events", admin.ScopeRead},
		{"GET", "/v1/events/{id}", admin.ScopeRead},
		{"GET", "/v1/webhook_deliveries", admin.ScopeRead},
		{"GET", "/v1/webhook_deliveries/{id}", admin.ScopeRead},
		{"POST", "/v1/webhook_deliveries/{id}/redeliver", admin.ScopeWrite},
		{"POST", "/v1/portal_sessions", admin.ScopeWrite},
		{"GET", "/v1/portal_sessions/current", admin.ScopeRead},
		{"DELETE", "/v1/portal_sessions/current", admin.ScopeRead},
		{"GET", "/v1/event_types", admin.ScopeRead},
		{"GET", "/v1/event_types/{name}", admin.ScopeRead},
		{"GET", "/v1/asyncapi.json", ""},
		{"GET", "/v1/webhook_subscriptions/{id}/secret", admin.ScopeWrite},
		{"GET", "/v1/webhook_subscriptions/{id}/health", admin.ScopeRead},
		{"GET", "/v1/webhook_subscriptions/{id}/stats", admin.ScopeRead},
		{"POST", "/v1/webhook_subscriptions/{id}/check", admin.ScopeWrite},
		{"POST", "/api/service/webhook-subscription/create", admin.ScopeWrite},
		{"POST", "/api/service/webhook-subscription/update", admin.ScopeWrite},
		{"POST", "/api/service/webhook-subscription/delete", admin.ScopeWrite},
	}
	for _, rt := range routes {
		item := doc.Paths.Find(rt.path)
		if item == nil || item.GetOperation(rt.method) == nil {
			t.Errorf("%s %s is not documented", rt.method, rt.path)
			continue
		}
		op := item.GetOperation(rt.method)
		scopes, _ := op.Extensions["x-required-scopes"].([]any)
		switch {
		case rt.scope == "" && (op.Security == nil || len(*op.Security) != 0):
			t.Errorf("%s %s should be public (security: [])", rt.method, rt.path)
		case rt.scope != "" && (len(scopes) != 1 || scopes[0] != rt.scope):
			t.Errorf("%s %s: x-required-scopes %v, want [%s]", rt.method, rt.path, scopes, rt.scope)
		}
	}
}

func TestOpenAPIServedPublicly(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.do(request{Method: http.MethodGet, Path: "/v1/openapi.json"})
	if r.Status != http.StatusOK || !bytes.Equal(r.Body, admin.OpenAPI()) {
		t.Fatalf("GET /v1/openapi.json: %d, %d bytes", r.Status, len(r.Body))
	}
	if r.Header.Get("api-version") == "" || r.Header.Get("Correlation-Id") == "" {
		t.Errorf("headers %v", r.Header)
	}
}

// validateExchange checks one exchange with the public listener against
// the OpenAPI document: every answer must be one the document describes
// (status, headers, body); a request the server accepted (2xx) must be one
// the document allows. A request the server refused is often malformed on
// purpose, so it is not checked. A nil reqBody is read from req.GetBody. An undocumented route is an error unless
// the server answered 404 or 405 to it.
func validateExchange(t *testing.T, req *http.Request, reqBody []byte, resp response) {
	t.Helper()
	for _, err := range checkExchange(req, reqBody, resp) {
		t.Errorf("openapi: %v", err)
	}
}

// checkExchange is validateExchange's check, returning what is wrong.
func checkExchange(req *http.Request, reqBody []byte, resp response) []error {
	return checkExchangeAgainst(openAPIRouter, req, reqBody, resp)
}

// checkExchangeAgainst checks one exchange against the document behind
// routerOf: the public one or the internal listener's.
func checkExchangeAgainst(routerOf func() (routers.Router, error), req *http.Request, reqBody []byte, resp response) []error {
	router, err := routerOf()
	if err != nil {
		return []error{err}
	}
	if reqBody == nil && req.GetBody != nil {
		if rc, err := req.GetBody(); err == nil {
			reqBody, _ = io.ReadAll(rc)
		}
	}
	// The router needs an absolute URL with the request's path only.
	u := *req.URL
	r := req.Clone(context.Background())
	r.URL = &url.URL{Scheme: "https", Host: "api.example.com", Path: u.Path, RawPath: u.RawPath, RawQuery: u.RawQuery}
	r.Body = io.NopCloser(bytes.NewReader(reqBody))
	route, params, err := router.FindRoute(r)
	if err != nil {
		if resp.Status == http.StatusNotFound || resp.Status == http.StatusMethodNotAllowed {
			return nil
		}
		return []error{fmt.Errorf("%s %s answered %d but is not documented: %w", req.Method, u.Path, resp.Status, err)}
	}
	var errs []error
	in := &openapi3filter.RequestValidationInput{
		Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true},
	}
	if resp.Status >= 200 && resp.Status < 300 {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			errs = append(errs, fmt.Errorf("accepted request %s %s does not match the document: %w", req.Method, u.Path, err))
		}
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.Status, Header: resp.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	out.SetBodyBytes(resp.Body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		errs = append(errs, fmt.Errorf("answer %d to %s %s does not match the document: %w\n%s", resp.Status, req.Method, u.Path,
			err, truncate(resp.Body, 600)))
	}
	return errs
}

// TestValidateExchangeCatchesDrift: the check refuses answers and accepted
// requests that the document does not describe, so that the hook in the
// harness can fail.
func TestValidateExchangeCatchesDrift(t *testing.T) {
	t.Parallel()
	headers := http.Header{"Api-Version": {"2026-05-01"}, "Correlation-Id": {"c1"}, "Content-Type": {"application/json"}}
	delivery := `{"id":"0190a000-0000-7000-8000-000000000000","type":"webhook_delivery","event_id":"0190a000-0000-7000-8000-000000000001",
		"event_type":"payout.paid","subscription_id":"0190a000-0000-7000-8000-000000000002","status":"failed","test":false,
		"attempt_count":0,"next_attempt_at":null,"attempts":[],"created_at":"2026-05-01T00:00:00Z","updated_at":"2026-05-01T00:00:00Z"}`
	get := func(path string) *http.Request {
		r, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1"+path, nil)
		return r
	}
	post := func(path, body string) *http.Request {
		r, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1"+path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", "k")
		return r
	}
	tests := []struct {
		name  string
		req   *http.Request
		resp  response
		valid bool
	}{
		{"documented delivery", get("/v1/webhook_deliveries/x"), response{200, headers, []byte(delivery)}, true},
		{"field missing", get("/v1/webhook_deliveries/x"),
			response{200, headers, []byte(strings.Replace(delivery, `"attempts":[],`, "", 1))}, false},
		{"wrong enum", get("/v1/webhook_deliveries/x"),
			response{200, headers, []byte(strings.Replace(delivery, `"failed"`, `"lost"`, 1))}, false},
		{"no api-version header", get("/v1/webhook_deliveries/x"),
			response{200, http.Header{"Correlation-Id": {"c1"}, "Content-Type": {"application/json"}}, []byte(delivery)}, false},
		{"error body", get("/v1/events/x"), response{404, headers, []byte(`{"category":"invalid_request_error","code":"resource_not_found",
			"message":"No such resource.","param":null,"doc_url":"https://docs.webhookd.dev/errors#resource_not_found","correlation_id":"c1"}`)}, true},
		{"error body without param", get("/v1/events/x"), response{404, headers, []byte(`{"category":"invalid_request_error",
			"code":"resource_not_found","message":"x","doc_url":"https://docs.webhookd.dev/e","correlation_id":"c1"}`)}, false},
		{"undocumented route answered", get("/v1/payouts"), response{200, headers, []byte(`{}`)}, false},
		{"undocumented route refused", get("/v1/payouts"), response{404, headers, nil}, true},
		{"accepted request with an unknown field", post("/v1/webhook_subscriptions/x/send_test_event", ``),
			response{202, headers, []byte(delivery)}, true},
		{"accepted create with an unknown field", post("/v1/webhook_subscriptions", `{"url":"https://e.com","events":["*"],"colour":"red"}`),
			response{201, headers, []byte(`{}`)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := checkExchange(tt.req, nil, tt.resp)
			if tt.valid && len(errs) > 0 {
				t.Fatalf("refused a documented exchange: %v", errs)
			}
			if !tt.valid && len(errs) == 0 {
				t.Fatal("accepted an exchange the document does not describe")
			}
		})
	}
}

func truncate(b []byte, n int) string {
	s := string(b)
	if len(s) > n {
		return s[:n] + "…"
	}
	return strings.TrimSpace(s)
}

// The internal listener's document is checked the same way as the public
// one: it must be valid, describe every route of Internal() (and no route
// that does not exist), and describe every exchange the tests below have
// with the internal listener.

var internalOpenAPI = sync.OnceValues(func() (*openapi3.T, error) { return loadOpenAPI(admin.OpenAPIInternal()) })

var internalOpenAPIRouter = sync.OnceValues(func() (routers.Router, error) { return routerOf(internalOpenAPI()) })

func TestOpenAPIInternalDocumentIsValid(t *testing.T) {
	t.Parallel()
	doc, err := internalOpenAPI()
	if err != nil {
		t.Fatalf("the internal OpenAPI document is invalid: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Errorf("openapi %s, want 3.1", doc.OpenAPI)
	}
	// Every route of the internal listener is documented, with its guard:
	// the ingest token, or none.
	routes := []struct {
		method, path string
		token        bool
	}{
		{"POST", "/internal/v1/events", true},
		{"POST", "/internal/v1/events/batch", true},
		{"PUT", "/internal/v1/merchants/{id}", true},
		{"POST", "/internal/v1/merchants/{id}/api_keys", true},
		{"GET", "/internal/v1/merchants/{id}/api_keys", true},
		{"DELETE", "/internal/v1/merchants/{id}/api_keys/{key_id}", true},
		{"POST", "/internal/v1/merchants/{id}/api_keys/{key_id}/roll", true},
		{"GET", "/healthz", false},
		{"GET", "/readyz", false},
		{"GET", "/metrics", false},
		{"GET", "/internal/v1/openapi.json", false},
		{"GET", "/debug/pprof/", true},
		{"GET", "/debug/pprof/{profile}", true},
		{"GET", "/debug/vars", true},
	}
	for _, rt := range routes {
		item := doc.Paths.Find(rt.path)
		if item == nil || item.GetOperation(rt.method) == nil {
			t.Errorf("%s %s is not documented", rt.method, rt.path)
			continue
		}
		op := item.GetOperation(rt.method)
		switch {
		case !rt.token && (op.Security == nil || len(*op.Security) != 0):
			t.Errorf("%s %s should need no token (security: [])", rt.method, rt.path)
		case rt.token && !needsIngestToken(op):
			t.Errorf("%s %s should need the ingest token (security: [{ingestToken: []}])", rt.method, rt.path)
		}
	}
	// The document must not promise the default retry schedule as the
	// only one: WEBHOOKD_RETRY_SCHEDULE changes it.
	for name, b := range map[string][]byte{"openapi.json": admin.OpenAPI(), "openapi_internal.json": admin.OpenAPIInternal()} {
		if regexp.MustCompile(`retried 15 times|15 attempts in total`).Match(b) {
			t.Errorf("%s states the default retry schedule as if it could not change", name)
		}
	}
}

// needsIngestToken is true when op's only security requirement is the
// ingest token.
func needsIngestToken(op *openapi3.Operation) bool {
	if op.Security == nil || len(*op.Security) != 1 {
		return false
	}
	_, ok := (*op.Security)[0]["ingestToken"]
	return ok
}

// servedInternalRoutes lists the routes the internal listener serves, as chi
// registered them: method and pattern. A pattern registered for every
// method (Handle, HandleFunc) counts as GET, the one the document gives.
func servedInternalRoutes(t *testing.T) map[string][]string {
	t.Helper()
	srv, err := admin.New(admin.Config{})
	if err != nil {
		t.Fatal(err)
	}
	mux, ok := srv.Internal().(chi.Routes)
	if !ok {
		t.Fatalf("Internal() is a %T, not a chi router", srv.Internal())
	}
	methods := map[string][]string{}
	err = chi.Walk(mux, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		methods[route] = append(methods[route], method)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for route, ms := range methods {
		if slices.Contains(ms, http.MethodGet) && slices.Contains(ms, http.MethodDelete) && slices.Contains(ms, http.MethodPatch) {
			methods[route] = []string{http.MethodGet}
		}
	}
	return methods
}

// samplePath fills a route's parameters ({id}, a trailing *) with values
// that match them.
func samplePath(route string) string {
	route = regexp.MustCompile(`\{profile\}`).ReplaceAllString(route, "heap")
	route = regexp.MustCompile(`\{[^}]+\}`).ReplaceAllString(route, "m_1")
	if strings.HasSuffix(route, "/*") {
		route = strings.TrimSuffix(route, "*") + "heap"
	}
	return route
}

// documentedAt says whether the document has an operation for method on a
// concrete path, matching path templates segment by segment.
func documentedAt(doc *openapi3.T, method, path string) bool {
	for template, item := range doc.Paths.Map() {
		pattern := "^" + regexp.MustCompile(`\\\{[^}]+\\\}`).ReplaceAllString(regexp.QuoteMeta(template), `[^/]+`) + "$"
		if regexp.MustCompile(pattern).MatchString(path) && item.GetOperation(method) != nil {
			return true
		}
	}
	return false
}

func TestOpenAPIInternalCoversEveryRoute(t *testing.T) {
	t.Parallel()
	doc, err := internalOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	routes := servedInternalRoutes(t)
	if len(routes) == 0 {
		t.Fatal("chi.Walk found no internal route")
	}
	// Every route the listener serves is documented…
	for route, methods := range routes {
		for _, m := range methods {
			if !documentedAt(doc, m, samplePath(route)) {
				t.Errorf("%s %s is served by the internal listener but not documented in admin/openapi_internal.json", m, route)
			}
		}
	}
	// …and every documented operation is served.
	srv, err := admin.New(admin.Config{})
	if err != nil {
		t.Fatal(err)
	}
	mux := srv.Internal().(*chi.Mux)
	for template, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if mux.Find(chi.NewRouteContext(), method, samplePath(template)) == "" {
				t.Errorf("%s %s is documented in admin/openapi_internal.json but the internal listener does not serve it", method, template)
			}
		}
	}
}

// TestOpenAPIInternalExchanges drives every internal route, successes and
// errors, and checks each exchange against the internal document.
func TestOpenAPIInternalExchanges(t *testing.T) {
	t.Parallel()
	h := newIngestHarness(t)
	id := uuid.NewString()
	event := `{"id":"` + id + `","merchant_id":"m_doc","type":"payout.paid","payload":{"id":"po_1","status":"paid","amount":"10.00","currency":"EUR"}}`
	batch := `{"events":[` + event + `,{"merchant_id":"m_doc","type":"deposit.received","payload":{"id":"dep_1"}}]}`
	token := "Bearer " + testIngestToken
	rolled, revoked := h.issuedKey("m_doc").ID.String(), h.issuedKey("m_doc").ID.String()
	keys := "/internal/v1/merchants/m_doc/api_keys/"
	exchanges := []struct {
		method, path, auth, body string
		status                   int
	}{
		{"GET", "/healthz", "", "", 200},
		{"GET", "/readyz", "", "", 200},
		{"GET", "/metrics", "", "", 200},
		{"POST", "/internal/v1/events", token, event, 202},
		{"POST", "/internal/v1/events", token, event, 200},
		{"POST", "/internal/v1/events", "", event, 401},
		{"POST", "/internal/v1/events", "Bearer wrong", event, 401},
		{"POST", "/internal/v1/events", token, `{"merchant_id":"m_doc","type":"payout.unknown","payload":{}}`, 400},
		{"POST", "/internal/v1/events", token, `{"merchant_id":"m_doc","type":"payout.paid"}`, 400},
		{"POST", "/internal/v1/events/batch", token, batch, 202},
		{"POST", "/internal/v1/events/batch", token, `{"events":[]}`, 400},
		{"PUT", "/internal/v1/merchants/m_doc", token, `{"notification_email":"ops@example.com"}`, 200},
		{"PUT", "/internal/v1/merchants/m_doc", token, `{"colour":"red"}`, 400},
		{"POST", "/internal/v1/merchants/m_doc/api_keys", token, `{"scopes":["webhooks:read","webhooks:write"]}`, 201},
		{"POST", "/internal/v1/merchants/m_doc/api_keys", token, `{"scopes":["payouts:write"]}`, 400},
		{"GET", "/internal/v1/merchants/m_doc/api_keys", token, "", 200},
		{"GET", "/internal/v1/merchants/m%00/api_keys", token, "", 400},
		{"GET", "/internal/v1/merchants/m_doc/api_keys?limit=1", token, "", 200},
		{"GET", "/internal/v1/merchants/m_doc/api_keys?limit=0", token, "", 400},
		{"GET", "/internal/v1/merchants/m_doc/api_keys?cursor=x.y", token, "", 400},
		{"GET", "/internal/v1/openapi.json", "", "", 200},
		{"POST", keys + rolled + "/roll", token, `{"overlap_seconds":3600}`, 201},
		{"POST", keys + rolled + "/roll", token, "", 409},
		{"POST", keys + revoked + "/roll", token, `{"overlap_seconds":-1}`, 400},
		{"POST", keys + uuid.NewString() + "/roll", token, "", 404},
		{"DELETE", keys + revoked, token, "", 200},
		{"DELETE", keys + "k_1", token, "", 400},
		{"DELETE", "/internal/v1/merchants/m_other/api_keys/" + revoked, token, "", 404},
		{"GET", "/internal/v1/merchants/m_doc/api_keys", token, "", 200},
		{"GET", "/internal/v1/merchants/m_doc", token, "", 405},
		{"GET", "/internal/v1/nothing", token, "", 404},
	}
	client := &http.Client{Timeout: 30 * time.Second}
	for _, ex := range exchanges {
		var body io.Reader
		if ex.body != "" {
			body = strings.NewReader(ex.body)
		}
		req, err := http.NewRequest(ex.method, h.internal.URL+ex.path, body)
		if err != nil {
			t.Fatal(err)
		}
		if ex.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if ex.auth != "" {
			req.Header.Set("Authorization", ex.auth)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		resp := response{Status: res.StatusCode, Header: res.Header, Body: b}
		if resp.Status != ex.status {
			t.Errorf("%s %s: %d, want %d: %s", ex.method, ex.path, resp.Status, ex.status, truncate(b, 300))
		}
		for _, err := range checkExchangeAgainst(internalOpenAPIRouter, req, []byte(ex.body), resp) {
			t.Errorf("openapi_internal: %v", err)
		}
	}
}
