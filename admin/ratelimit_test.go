package admin_test

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/go-redis/redis_rate/v10"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// expectRetryAfter checks the 429's Retry-After: whole seconds, at least 1,
// within the limit's period.
func expectRetryAfter(t *testing.T, r response, maxSeconds int) {
	t.Helper()
	s, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if err != nil || s < 1 || s > maxSeconds {
		t.Fatalf("Retry-After %q, want whole seconds from 1 to %d", r.Header.Get("Retry-After"), maxSeconds)
	}
}

// apiBudget reads what the RateLimit field says is left of the api budget.
func apiBudget(t *testing.T, r response) int {
	t.Helper()
	m := regexp.MustCompile(`"api";r=(\d+);t=\d+`).FindStringSubmatch(strings.Join(r.Header.Values("RateLimit"), ", "))
	if m == nil || r.Header.Get("RateLimit-Policy") != `"api";q=3;w=60` {
		t.Fatalf("RateLimit %q, RateLimit-Policy %q: want the api budget of 3 a minute", r.Header.Values("RateLimit"), r.Header.Values("RateLimit-Policy"))
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestAPIRateLimitPerKey: every authenticated request of the public API,
// on either surface, spends one unit of its API key's budget; over it the
// answer is 429 rate_limit_exceeded in the surface's error format, with
// Retry-After, and the refused request does nothing.
func TestAPIRateLimitPerKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *admin.Config) { c.APIRate = redis_rate.PerMinute(3) })
	key := h.merchant("m_rl")
	list := request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions", Key: key}
	for want := 2; want >= 0; want-- {
		r := h.do(list)
		if r.Status != http.StatusOK {
			t.Fatalf("request within the budget: %d %s", r.Status, r.Body)
		}
		if got := apiBudget(t, r); got != want {
			t.Fatalf("RateLimit r=%d, want %d", got, want)
		}
	}

	tests := []struct {
		name  string
		req   request
		check func(t *testing.T, r response)
	}{
		{"a /v1 read", list, func(t *testing.T, r response) {
			if m := expectError(t, r, http.StatusTooManyRequests, "rate_limit_exceeded"); m["category"] != "rate_limit_error" {
				t.Errorf("category %v", m["category"])
			}
		}},
		{"a /v1 write", request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
			Body:   map[string]any{"url": "https://example.com/hook", "events": []string{"*"}},
			Header: map[string]string{"Idempotency-Key": "refused-request"}}, func(t *testing.T, r response) {
			expectError(t, r, http.StatusTooManyRequests, "rate_limit_exceeded")
			// Refused, the request leaves its Idempotency-Key unused.
			var claimed bool
			if err := h.store.Pool().QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM idempotency_keys WHERE key = 'refused-request')`).Scan(&claimed); err != nil || claimed {
				t.Errorf("the refused request claimed its Idempotency-Key (%v)", err)
			}
		}},
		{"a legacy write (the same key's budget)", request{Method: http.MethodPost, Path: "/api/service/webhook-subscription/create",
			Body:   map[string]any{"url": "https://example.com/hook", "events": []string{"*"}},
			Header: map[string]string{"X-Service-Api-Key": key, "Idempotency-Key": omitHeader}}, func(t *testing.T, r response) {
			m := expectLegacyError(t, r, http.StatusTooManyRequests, "rate_limit_error")
			if !strings.HasSuffix(m["docUrl"].(string), "rate_limit_exceeded") {
				t.Errorf("docUrl %v, want it to name rate_limit_exceeded", m["docUrl"])
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.do(tt.req)
			tt.check(t, r)
			expectRetryAfter(t, r, 60)
			if got := apiBudget(t, r); got != 0 {
				t.Errorf("RateLimit r=%d on a 429, want 0", got)
			}
		})
	}
	if n := h.subscriptionCount("m_rl"); n != 0 {
		t.Fatalf("refused creates made %d subscriptions", n)
	}

	// The budget is the key's, not the merchant's; public routes spend none.
	if r := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions", Key: h.merchant("m_rl")}); r.Status != http.StatusOK {
		t.Fatalf("another key of the merchant: %d %s", r.Status, r.Body)
	}
	if r := h.do(request{Method: http.MethodGet, Path: "/v1/api_versions"}); r.Status != http.StatusOK || r.Header.Get("RateLimit") != "" {
		t.Fatalf("public route: %d, RateLimit %q", r.Status, r.Header.Get("RateLimit"))
	}
}

func (h *harness) subscriptionCount(merchant string) int {
	h.t.Helper()
	var n int
	if err := h.store.Pool().QueryRow(h.t.Context(), `SELECT count(*) FROM subscriptions WHERE merchant_id = $1`, merchant).Scan(&n); err != nil {
		h.t.Fatal(err)
	}
	return n
}

// TestRateLimitsWithoutRedis: when Redis cannot be asked, the API limit
// lets requests through (the API stays up; the metric counts them), and
// the send_test_event limit refuses them (each would reach a merchant's URL
// later, all at once), as does the portal session limit (an outage must not
// lift the bound on the sessions a key mints).
func TestRateLimitsWithoutRedis(t *testing.T) {
	t.Parallel()
	down := storetest.NewRedis(t)
	opt, err := redis.ParseURL(down.URL())
	if err != nil {
		t.Fatal(err)
	}
	opt.MaxRetries = -1
	rc := redis.NewClient(opt)
	t.Cleanup(func() { rc.Close() })
	down.Stop()
	h := newHarness(t, func(c *admin.Config) {
		c.Redis = rc
		c.APIRate = redis_rate.PerMinute(1)
	})
	key := h.merchant("m_down")
	for range 2 {
		if r := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions", Key: key}); r.Status != http.StatusOK {
			t.Fatalf("with Redis down, a read: %d %s; want it let through", r.Status, r.Body)
		}
	}
	r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + uuid.NewString() + "/send_test_event", Key: key})
	expectError(t, r, http.StatusInternalServerError, "upstream_error")
	r = h.do(request{Method: http.MethodPost, Path: "/v1/portal_sessions", Key: key, Body: map[string]any{}})
	expectError(t, r, http.StatusInternalServerError, "upstream_error")
	var sessions int
	if err := h.store.Pool().QueryRow(t.Context(), `SELECT count(*) FROM portal_sessions`).Scan(&sessions); err != nil || sessions != 0 {
		t.Errorf("%d portal sessions minted with Redis down (%v), want none", sessions, err)
	}

	if got := gatheredCounter(t, h, "webhookd_rate_limiter_errors_total", "api"); got != 4 {
		t.Errorf("api limiter errors = %v, want 4 (two reads, the test event and the mint)", got)
	}
	for limit, why := range map[string]string{"test_event": "the test event", "portal_session": "the mint"} {
		if got := gatheredCounter(t, h, "webhookd_rate_limiter_errors_total", limit); got != 1 {
			t.Errorf("%s limiter errors = %v, want 1 (the api limit let %s through to it)", limit, got, why)
		}
	}
}

// gatheredCounter reads one counter of the harness's registry by its
// limit label.
func gatheredCounter(t *testing.T, h *harness, name, limit string) float64 {
	t.Helper()
	families, err := h.cfg.Gatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "limit" && l.GetValue() == limit {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestBodyLimitOnEverySurface: a body over MaxBodyBytes is 413
// payload_too_large on the legacy routes (in their error shape) and on the
// internal listener too, not only on /v1.
func TestBodyLimitOnEverySurface(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *admin.Config) { c.MaxBodyBytes = 2048 })
	key := h.merchant("m_big")
	big := `{"url":"https://example.com/` + strings.Repeat("a", 4096) + `","events":["*"]}`

	r := h.legacy("create", key, "", big)
	m := expectLegacyError(t, r, http.StatusRequestEntityTooLarge, "invalid_request_error")
	if !strings.HasSuffix(m["docUrl"].(string), "payload_too_large") {
		t.Errorf("docUrl %v, want it to name payload_too_large", m["docUrl"])
	}

	r = h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/events",
		Body: `{"merchant_id":"m_big","type":"payout.paid","payload":{"pad":"` + strings.Repeat("x", 4096) + `"}}`})
	expectError(t, r, http.StatusRequestEntityTooLarge, "payload_too_large")
}

// TestDeliveryListPageStopsAtRowsExamined: a delivery list whose filters no
// one index serves (subscription_id and status) reads at most
// store.MaxRowsExamined rows per request; when they hold no match the page
// is empty with has_more and a cursor, and the cursor reaches the match.
func TestDeliveryListPageStopsAtRowsExamined(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m_scan")
	sub := uuid.New()
	// MaxRowsExamined succeeded deliveries, then (older) one failed one.
	if _, err := h.store.Pool().Exec(t.Context(), `
		INSERT INTO deliveries (id, merchant_id, event_id, event_created_at, event_type, subscription_id,
		                        status, attempt_count, created_at, updated_at)
		SELECT gen_random_uuid(), 'm_scan', gen_random_uuid(), now() - i * interval '100 ms', 'payout.paid', $1,
		       CASE WHEN i = $2 + 1 THEN 'failed' ELSE 'succeeded' END, 1, now() - i * interval '100 ms', now()
		FROM generate_series(1, $2 + 1) i`, sub, store.MaxRowsExamined); err != nil {
		t.Fatal(err)
	}
	path := "/v1/webhook_deliveries?status=failed&subscription_id=" + sub.String()
	first := decode[page[delivery]](t, h.do(request{Method: http.MethodGet, Path: path + "&limit=5", Key: key}))
	if len(first.Data) != 0 || !first.HasMore || first.NextCursor == nil {
		t.Fatalf("first page: %d deliveries, has_more %v, cursor %v; want an empty page with more", len(first.Data), first.HasMore, first.NextCursor)
	}
	got := listAll[delivery](h, key, path, 5)
	if len(got) != 1 || got[0].Status != "failed" {
		t.Fatalf("walking the list: %+v, want the one failed delivery", got)
	}
}
