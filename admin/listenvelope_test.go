package admin_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/internal/catalogue"
)

// internalCall sends one request to the internal listener (with auth as
// the Authorization header, none when empty) and checks the exchange
// against the internal listener's OpenAPI document.
func (h *harness) internalCall(method, path, auth string) response {
	h.t.Helper()
	return h.internalSend(method, path, auth, true)
}

// internalSend is internalCall; check false skips the document's check,
// for paths the document rightly does not have.
func (h *harness) internalSend(method, path, auth string, check bool) response {
	h.t.Helper()
	req, err := http.NewRequest(method, h.internal.URL+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	resp := response{Status: res.StatusCode, Header: res.Header, Body: b}
	if check {
		for _, err := range checkExchangeAgainst(internalOpenAPIRouter, req, nil, resp) {
			h.t.Errorf("openapi_internal: %v", err)
		}
	}
	return resp
}

// TestListsHaveTheListEnvelope: every list answers data (an array, never
// null), has_more and next_cursor, the two lists added last included.
func TestListsHaveTheListEnvelope(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m_envelope")
	h.issuedKey("m_envelope")
	token := "Bearer " + testIngestToken
	lists := []struct {
		name string
		get  func() response
		// fixed lists answer everything at once: has_more is false.
		fixed bool
	}{
		{"GET /v1/webhook_subscriptions", func() response {
			return h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions", Key: key})
		}, false},
		{"GET /v1/events", func() response { return h.do(request{Method: http.MethodGet, Path: "/v1/events", Key: key}) }, false},
		{"GET /v1/webhook_deliveries", func() response {
			return h.do(request{Method: http.MethodGet, Path: "/v1/webhook_deliveries", Key: key})
		}, false},
		{"GET /v1/event_types", func() response {
			return h.do(request{Method: http.MethodGet, Path: "/v1/event_types", Key: key})
		}, true},
		{"GET /v1/event_types?limit=1 (ignored)", func() response {
			return h.do(request{Method: http.MethodGet, Path: "/v1/event_types?limit=1", Key: key})
		}, true},
		{"GET /internal/v1/merchants/{id}/api_keys", func() response {
			return h.internalCall(http.MethodGet, "/internal/v1/merchants/m_envelope/api_keys", token)
		}, false},
		{"GET /internal/v1/merchants/{id}/api_keys of an unknown merchant", func() response {
			return h.internalCall(http.MethodGet, "/internal/v1/merchants/m_nobody/api_keys", token)
		}, false},
	}
	for _, l := range lists {
		t.Run(l.name, func(t *testing.T) {
			r := l.get()
			if r.Status != http.StatusOK {
				t.Fatalf("%d %s", r.Status, r.Body)
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(r.Body, &m); err != nil {
				t.Fatalf("not a JSON object: %v", err)
			}
			var data []json.RawMessage
			if err := json.Unmarshal(m["data"], &data); err != nil || data == nil {
				t.Errorf("data %s: not an array (%v)", m["data"], err)
			}
			var hasMore bool
			if err := json.Unmarshal(m["has_more"], &hasMore); err != nil {
				t.Errorf("has_more %s: not a boolean (%v)", m["has_more"], err)
			}
			cursor, ok := m["next_cursor"]
			if !ok {
				t.Error("no next_cursor")
			}
			if l.fixed && (hasMore || string(cursor) != "null") {
				t.Errorf("a fixed list answered has_more %v, next_cursor %s", hasMore, cursor)
			}
			if l.fixed && len(data) != len(h.cfg.EventTypes)+len(catalogue.Operational())+1 {
				t.Errorf("%d event types, want the whole catalogue (%d), the operational types and ping.test", len(data), len(h.cfg.EventTypes))
			}
		})
	}
}

// TestAPIKeyListPages: paging through a merchant's keys at any page size
// answers each key once, newest first, as one page of 100 does; rolled
// keys (successors made in the same instant as others) included.
func TestAPIKeyListPages(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	token := "Bearer " + testIngestToken
	const merchant = "m_pages"
	for range 11 {
		h.issuedKey(merchant)
	}
	first := h.issuedKey(merchant)
	if r := h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/merchants/" + merchant + "/api_keys/" + first.ID.String() + "/roll"}); r.Status != http.StatusCreated {
		t.Fatalf("roll: %d %s", r.Status, r.Body)
	}
	h.issuedKey("m_pages_other") // never listed
	const total = 13

	type keyPage struct {
		Data []struct {
			ID        string    `json:"id"`
			CreatedAt time.Time `json:"created_at"`
		} `json:"data"`
		HasMore    bool    `json:"has_more"`
		NextCursor *string `json:"next_cursor"`
	}
	list := func(t *testing.T, query url.Values) keyPage {
		t.Helper()
		path := "/internal/v1/merchants/" + merchant + "/api_keys"
		if len(query) > 0 {
			path += "?" + query.Encode()
		}
		r := h.internalCall(http.MethodGet, path, token)
		if r.Status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
		}
		return decode[keyPage](t, r)
	}

	whole := list(t, url.Values{"limit": {"100"}})
	if len(whole.Data) != total || whole.HasMore || whole.NextCursor != nil {
		t.Fatalf("limit 100: %d keys, has_more %v; want all %d at once", len(whole.Data), whole.HasMore, total)
	}
	var want []string
	for i, k := range whole.Data {
		want = append(want, k.ID)
		if i > 0 && k.CreatedAt.After(whole.Data[i-1].CreatedAt) {
			t.Errorf("key %d is newer than key %d: not newest first", i, i-1)
		}
	}

	for _, tt := range []struct {
		limit string // "" sends none: the default, 10
		pages int
	}{
		{"1", total}, {"4", 4}, {"", 2}, {"12", 2}, {"13", 1},
	} {
		t.Run("limit "+cmpOr(tt.limit, "default"), func(t *testing.T) {
			size, _ := strconv.Atoi(cmpOr(tt.limit, "10"))
			var got []string
			cursor, pages := "", 0
			for {
				q := url.Values{}
				if tt.limit != "" {
					q.Set("limit", tt.limit)
				}
				if cursor != "" {
					q.Set("cursor", cursor)
				}
				p := list(t, q)
				pages++
				if len(p.Data) > size || (p.HasMore && len(p.Data) != size) {
					t.Fatalf("page %d: %d keys, has_more %v with limit %d", pages, len(p.Data), p.HasMore, size)
				}
				for _, k := range p.Data {
					got = append(got, k.ID)
				}
				if !p.HasMore {
					if p.NextCursor != nil {
						t.Fatalf("next_cursor %q without has_more", *p.NextCursor)
					}
					break
				}
				if p.NextCursor == nil || pages > total {
					t.Fatalf("page %d: has_more without next_cursor, or paging does not end", pages)
				}
				cursor = *p.NextCursor
			}
			if !slices.Equal(got, want) || pages != tt.pages {
				t.Errorf("%d pages of %v, want %d pages of %v", pages, got, tt.pages, want)
			}
		})
	}
}

func cmpOr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

// TestAPIKeyListRefusals: the key list checks limit and cursor like every
// list, and a cursor works only on the merchant's list that issued it.
func TestAPIKeyListRefusals(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	token := "Bearer " + testIngestToken
	for range 3 {
		h.issuedKey("m_refuse")
	}
	r := h.internalCall(http.MethodGet, "/internal/v1/merchants/m_refuse/api_keys?limit=1", token)
	p := decode[page[json.RawMessage]](t, r)
	if r.Status != http.StatusOK || !p.HasMore || p.NextCursor == nil {
		t.Fatalf("limit 1 of 3 keys: %d has_more %v: %s", r.Status, p.HasMore, r.Body)
	}
	cursor := url.QueryEscape(*p.NextCursor)
	for _, tt := range []struct {
		name, path, code, param string
		status                  int
	}{
		{"limit 0", "m_refuse/api_keys?limit=0", "parameter_invalid", "limit", 400},
		{"limit 101", "m_refuse/api_keys?limit=101", "parameter_invalid", "limit", 400},
		{"limit not a number", "m_refuse/api_keys?limit=ten", "parameter_invalid", "limit", 400},
		{"unknown parameter", "m_refuse/api_keys?status=revoked", "parameter_invalid", "status", 400},
		{"limit twice", "m_refuse/api_keys?limit=1&limit=2", "parameter_invalid", "limit", 400},
		{"forged cursor", "m_refuse/api_keys?cursor=abc.def", "invalid_cursor", "cursor", 400},
		{"another merchant's cursor", "m_other/api_keys?limit=1&cursor=" + cursor, "cursor_mismatch", "cursor", 400},
		{"the cursor with another limit", "m_refuse/api_keys?limit=2&cursor=" + cursor, "", "", 200},
		{"bad merchant id before the page", "m%00/api_keys?limit=0", "parameter_invalid", "merchant_id", 400},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := h.internalCall(http.MethodGet, "/internal/v1/merchants/"+tt.path, token)
			if tt.status == http.StatusOK {
				if r.Status != http.StatusOK {
					t.Fatalf("%d %s", r.Status, r.Body)
				}
				return
			}
			if m := expectError(t, r, tt.status, tt.code); m["param"] != tt.param {
				t.Errorf("param %v, want %s", m["param"], tt.param)
			}
		})
	}
}

// TestInternalOpenAPIServed: the internal listener serves its own
// document at GET /internal/v1/openapi.json, without the ingest token (like
// the public document), while every other /internal/v1 route still needs
// it. The served document is valid and lists exactly the routes the
// listener serves.
func TestInternalOpenAPIServed(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	noToken := newHarness(t, func(c *admin.Config) { c.IngestToken = "" })
	for _, tt := range []struct {
		name string
		h    *harness
		auth string
	}{
		{"no token", h, ""},
		{"the token", h, "Bearer " + testIngestToken},
		{"a wrong token", h, "Bearer wrong"},
		{"no token configured", noToken, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.h.internalCall(http.MethodGet, "/internal/v1/openapi.json", tt.auth)
			if r.Status != http.StatusOK || !json.Valid(r.Body) || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("%d %q, valid JSON %v", r.Status, r.Header.Get("Content-Type"), json.Valid(r.Body))
			}
			if string(r.Body) != string(admin.OpenAPIInternal()) {
				t.Error("the served document is not admin/openapi_internal.json")
			}
			if r.Header.Get("Correlation-Id") == "" {
				t.Error("no Correlation-Id")
			}
		})
	}
	// The route opens nothing else under /internal/v1: another path, or
	// another method on this one, still needs the token.
	for _, rq := range []struct{ method, path string }{
		{"GET", "/internal/v1/merchants/m_doc/api_keys"},
		{"GET", "/internal/v1/openapi.yaml"},
		{"GET", "/internal/v1/openapi.json/x"},
		{"POST", "/internal/v1/openapi.json"},
		{"DELETE", "/internal/v1/openapi.json"},
	} {
		if r := h.internalSend(rq.method, rq.path, "", false); r.Status != http.StatusUnauthorized {
			t.Errorf("%s %s without the token: %d, want 401", rq.method, rq.path, r.Status)
		}
	}

	// What is served is a valid OpenAPI 3.1 document of this listener:
	// every route chi serves is in it, this one with no security.
	r := h.internalCall(http.MethodGet, "/internal/v1/openapi.json", "")
	doc, err := loadOpenAPI(r.Body)
	if err != nil {
		t.Fatalf("the served document is invalid: %v", err)
	}
	for route, methods := range servedInternalRoutes(t) {
		for _, m := range methods {
			if !documentedAt(doc, m, samplePath(route)) {
				t.Errorf("%s %s is served but not in the served document", m, route)
			}
		}
	}
	op := doc.Paths.Find("/internal/v1/openapi.json").GetOperation(http.MethodGet)
	if op == nil || op.Security == nil || len(*op.Security) != 0 {
		t.Error("the served document does not describe GET /internal/v1/openapi.json as needing no token")
	}
}
