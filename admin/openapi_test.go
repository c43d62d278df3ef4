package admin_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/webhookd/webhookd/admin"
)

// openAPI is the document loaded and validated once per test binary, with a
// router that matches any host (the document's server is the production
// gateway; the tests talk to 127.0.0.1).
var openAPI = sync.OnceValues(func() (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(admin.OpenAPI())
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, err
	}
	return doc, nil
})

var openAPIRouter = sync.OnceValues(func() (routers.Router, error) {
	doc, err := openAPI()
	if err != nil {
		return nil, err
	}
	routed := *doc
	routed.Servers = nil
	return legacy.NewRouter(&routed)
})

func TestOpenAPIDocumentIsValid(t *testing.T) {
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
	router, err := openAPIRouter()
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
