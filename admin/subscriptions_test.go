package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/signer"
)

// subscription is the Banking resource as a client decodes it.
type subscription struct {
	ID          string            `json:"id"`
	Type        string            `json:"type"`
	URL         string            `json:"url"`
	Events      []string          `json:"events"`
	Description *string           `json:"description"`
	Status      string            `json:"status"`
	Metadata    map[string]string `json:"metadata"`
	Health      struct {
		ConsecutiveFailures int        `json:"consecutive_failures"`
		LastSuccessAt       *time.Time `json:"last_success_at"`
		LastFailureAt       *time.Time `json:"last_failure_at"`
	} `json:"health"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	Secret    string    `json:"secret"`
}

func decode[T any](t *testing.T, r response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
	return v
}

// createSubscription makes a subscription through the API and checks the 201.
func (h *harness) createSubscription(key string, body any) subscription {
	h.t.Helper()
	r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key, Body: body})
	if r.Status != http.StatusCreated {
		h.t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	return decode[subscription](h.t, r)
}

// strict turns the development exceptions off, as in production.
func strict(c *admin.Config) { c.AllowHTTPTargets, c.AllowPrivateTargets = false, false }

func hookBody(url string, events ...string) map[string]any {
	if len(events) == 0 {
		events = []string{"*"}
	}
	return map[string]any{"url": url, "events": events}
}

func TestSubscriptionLifecycle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, strict)
	key := h.merchant("m1")
	created := h.createSubscription(key, map[string]any{
		"url": "https://example.com/hooks", "events": []string{"payout.paid", "payout.failed", "payout.paid"},
		"description": "payouts", "metadata": map[string]string{"team": "ops"},
	})
	if _, err := uuid.Parse(created.ID); err != nil || created.Type != "webhook_subscription" ||
		created.URL != "https://example.com/hooks" || created.Status != "enabled" ||
		!slices.Equal(created.Events, []string{"payout.paid", "payout.failed"}) ||
		created.Description == nil || *created.Description != "payouts" || created.Metadata["team"] != "ops" ||
		created.Health.ConsecutiveFailures != 0 || created.Health.LastSuccessAt != nil ||
		!strings.HasPrefix(created.Secret, "whsec_") || created.CreatedAt.IsZero() || created.CreatedAt.Location() != time.UTC {
		t.Fatalf("created %+v", created)
	}
	if _, err := signer.ParseSecret(created.Secret); err != nil {
		t.Fatalf("secret: %v", err)
	}

	path := "/v1/webhook_subscriptions/" + created.ID
	got := decode[subscription](t, h.do(request{Method: http.MethodGet, Path: path, Key: key}))
	if got.ID != created.ID || got.URL != created.URL || !got.CreatedAt.Equal(created.CreatedAt) {
		t.Fatalf("get %+v", got)
	}

	r := h.do(request{Method: http.MethodPost, Path: path, Key: key, Body: map[string]any{"status": "disabled", "description": nil}})
	if r.Status != http.StatusOK {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	upd := decode[subscription](t, r)
	if upd.Status != "disabled" || upd.Description != nil || upd.URL != created.URL || upd.Metadata["team"] != "ops" ||
		!slices.Equal(upd.Events, created.Events) || upd.UpdatedAt.Before(created.UpdatedAt) {
		t.Fatalf("status and description update gave %+v", upd)
	}
	upd = decode[subscription](t, h.do(request{Method: http.MethodPost, Path: path, Key: key, Body: map[string]any{
		"url": "https://example.org/v2", "events": []string{"*"}, "metadata": map[string]string{"env": "test"},
	}}))
	if upd.URL != "https://example.org/v2" || !slices.Equal(upd.Events, []string{"*"}) ||
		!maps(upd.Metadata, map[string]string{"env": "test"}) || upd.Status != "disabled" {
		t.Fatalf("url, events and metadata update gave %+v", upd)
	}
	got = decode[subscription](t, h.do(request{Method: http.MethodGet, Path: path, Key: key}))
	if got.URL != upd.URL || got.Status != "disabled" {
		t.Fatalf("get after update %+v", got)
	}

	r = h.do(request{Method: http.MethodDelete, Path: path, Key: key})
	if r.Status != http.StatusNoContent || len(r.Body) != 0 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	expectError(t, h.do(request{Method: http.MethodGet, Path: path, Key: key}), http.StatusNotFound, "resource_not_found")
	expectError(t, h.do(request{Method: http.MethodDelete, Path: path, Key: key}), http.StatusNotFound, "resource_not_found")
	expectError(t, h.do(request{Method: http.MethodPost, Path: path, Key: key, Body: map[string]any{"status": "enabled"}}),
		http.StatusNotFound, "resource_not_found")
	list := decode[listPage](t, h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions", Key: key}))
	if len(list.Data) != 0 {
		t.Fatalf("a deleted subscription is listed: %+v", list.Data)
	}
	expectError(t, h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/not-a-uuid", Key: key}),
		http.StatusNotFound, "resource_not_found")
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

type listPage struct {
	Data       []subscription `json:"data"`
	HasMore    bool           `json:"has_more"`
	NextCursor *string        `json:"next_cursor"`
}

func TestSubscriptionPagination(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m1")
	other := h.merchant("m2")
	h.createSubscription(other, hookBody("https://other.example/"))
	var ids []string
	for i := range 25 {
		sub := h.createSubscription(key, hookBody(fmt.Sprintf("https://example.com/%d", i)))
		ids = append([]string{sub.ID}, ids...) // newest first
		if i%4 == 0 {
			h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key, Body: map[string]any{"status": "disabled"}})
		}
	}

	var got []string
	var sizes []int
	path := "/v1/webhook_subscriptions?limit=10"
	for n := 0; ; n++ {
		if n == 5 {
			t.Fatal("pagination does not end")
		}
		r := h.do(request{Method: http.MethodGet, Path: path, Key: key})
		if r.Status != http.StatusOK {
			t.Fatalf("page %d: %d %s", n, r.Status, r.Body)
		}
		page := decode[listPage](t, r)
		sizes = append(sizes, len(page.Data))
		for i, s := range page.Data {
			got = append(got, s.ID)
			if s.Secret != "" || bytes.Contains(r.Body, []byte(`"secret"`)) {
				t.Fatal("a list answer shows a secret")
			}
			if i > 0 && s.CreatedAt.After(page.Data[i-1].CreatedAt) {
				t.Fatal("page is not newest first")
			}
		}
		if page.HasMore != (page.NextCursor != nil) {
			t.Fatalf("has_more %v with next_cursor %v", page.HasMore, page.NextCursor)
		}
		if !page.HasMore {
			break
		}
		path = "/v1/webhook_subscriptions?limit=10&cursor=" + *page.NextCursor
	}
	if !slices.Equal(sizes, []int{10, 10, 5}) || !slices.Equal(got, ids) {
		t.Fatalf("pages of %v gave %v, want %v", sizes, got, ids)
	}

	// The status filter, and a cursor that must keep its filters.
	r := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions?status=disabled&limit=3", Key: key})
	page := decode[listPage](t, r)
	if len(page.Data) != 3 || !page.HasMore {
		t.Fatalf("disabled page: %s", r.Body)
	}
	for _, s := range page.Data {
		if s.Status != "disabled" {
			t.Fatalf("status filter let %s through", s.Status)
		}
	}
	rest := decode[listPage](t, h.do(request{Method: http.MethodGet, Key: key,
		Path: "/v1/webhook_subscriptions?status=disabled&limit=3&cursor=" + *page.NextCursor}))
	if len(rest.Data) != 3 || !rest.HasMore { // 7 disabled: i = 0, 4, ..., 24
		t.Fatalf("second disabled page has %d, has_more %v", len(rest.Data), rest.HasMore)
	}
	for _, tc := range []struct {
		name, query, code, param string
	}{
		{"cursor with other filters", "?status=enabled&limit=3&cursor=" + *page.NextCursor, "cursor_mismatch", "cursor"},
		{"cursor without its filter", "?limit=3&cursor=" + *page.NextCursor, "cursor_mismatch", "cursor"},
		{"garbage cursor", "?cursor=garbage", "invalid_cursor", "cursor"},
		{"forged cursor", "?cursor=" + forge(*page.NextCursor), "invalid_cursor", "cursor"},
		{"bad status", "?status=paused", "parameter_invalid", "status"},
		{"limit too big", "?limit=101", "parameter_invalid", "limit"},
		{"limit zero", "?limit=0", "parameter_invalid", "limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := expectError(t, h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions" + tc.query, Key: key}),
				http.StatusBadRequest, tc.code)
			if m["param"] != tc.param {
				t.Errorf("param = %v, want %s", m["param"], tc.param)
			}
		})
	}
}

// forge changes the payload of a signed cursor, keeping its signature.
func forge(cursor string) string {
	payload, sig, _ := strings.Cut(cursor, ".")
	b := []byte(payload)
	b[len(b)/2] ^= 1
	if b[len(b)/2] == '.' {
		b[len(b)/2] = 'A'
	}
	return string(b) + "." + sig
}

func TestSubscriptionValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, strict)
	key := h.merchant("m1")
	long := func(n int) string { return strings.Repeat("a", n) }
	tooManyKeys := map[string]string{}
	for i := range 51 {
		tooManyKeys[fmt.Sprintf("k%d", i)] = "v"
	}
	type tc struct {
		name        string
		body        any
		code, param string
	}
	url := func(u string) any { return hookBody(u) }
	cases := []tc{
		{"no url", map[string]any{"events": []string{"*"}}, "parameter_missing", "url"},
		{"empty url", url(""), "parameter_missing", "url"},
		{"url not a string", map[string]any{"url": 5, "events": []string{"*"}}, "parameter_invalid", "url"},
		{"http", url("http://example.com/hooks"), "parameter_invalid", "url"},
		{"other scheme", url("ftp://example.com/hooks"), "parameter_invalid", "url"},
		{"relative", url("/hooks"), "parameter_invalid", "url"},
		{"no host", url("https:///hooks"), "parameter_invalid", "url"},
		{"credentials", url("https://user:pw@example.com/hooks"), "parameter_invalid", "url"},
		{"fragment", url("https://example.com/hooks#x"), "parameter_invalid", "url"},
		{"space", url("https://example.com/a b"), "parameter_invalid", "url"},
		{"bad port", url("https://example.com:99999/"), "parameter_invalid", "url"},
		{"too long", url("https://example.com/" + long(2049-len("https://example.com/"))), "parameter_invalid", "url"},
		{"loopback v4", url("https://127.0.0.1/hooks"), "parameter_invalid", "url"},
		{"loopback v6", url("https://[::1]/hooks"), "parameter_invalid", "url"},
		{"mapped loopback", url("https://[::ffff:127.0.0.1]/hooks"), "parameter_invalid", "url"},
		{"private 10/8", url("https://10.1.2.3/hooks"), "parameter_invalid", "url"},
		{"private 192.168/16", url("https://192.168.0.10:8443/hooks"), "parameter_invalid", "url"},
		{"private v6", url("https://[fd00::1]/hooks"), "parameter_invalid", "url"},
		{"link-local metadata", url("https://169.254.169.254/latest"), "parameter_invalid", "url"},
		{"unspecified", url("https://0.0.0.0/hooks"), "parameter_invalid", "url"},
		{"localhost", url("https://localhost/hooks"), "parameter_invalid", "url"},
		{"localhost subdomain", url("https://api.localhost./hooks"), "parameter_invalid", "url"},
		{"decimal ip", url("https://2130706433/hooks"), "parameter_invalid", "url"},
		{"hex ip", url("https://0x7f.1/hooks"), "parameter_invalid", "url"},
		{"no events", map[string]any{"url": "https://example.com/"}, "parameter_missing", "events"},
		{"empty events", hookBody("https://example.com/", []string{}...), "parameter_missing", "events"},
		{"events not a list", map[string]any{"url": "https://example.com/", "events": "payout.paid"}, "parameter_invalid", "events"},
		{"events empty list", map[string]any{"url": "https://example.com/", "events": []string{}}, "parameter_invalid", "events"},
		{"wildcard with others", hookBody("https://example.com/", "*", "payout.paid"), "parameter_invalid", "events"},
		{"unknown event", hookBody("https://example.com/", "payout.paid", "payout.exploded"), "parameter_invalid", "events"},
		{"ping.test", hookBody("https://example.com/", "ping.test"), "parameter_invalid", "events"},
		{"description too long", map[string]any{"url": "https://example.com/", "events": []string{"*"}, "description": long(501)}, "parameter_invalid", "description"},
		{"description not a string", map[string]any{"url": "https://example.com/", "events": []string{"*"}, "description": 3}, "parameter_invalid", "description"},
		{"too many metadata keys", map[string]any{"url": "https://example.com/", "events": []string{"*"}, "metadata": tooManyKeys}, "parameter_invalid", "metadata"},
		{"metadata key too long", map[string]any{"url": "https://example.com/", "events": []string{"*"}, "metadata": map[string]string{long(41): "v"}}, "parameter_invalid", "metadata[" + long(41) + "]"},
		{"metadata value too long", map[string]any{"url": "https://example.com/", "events": []string{"*"}, "metadata": map[string]string{"k": long(501)}}, "parameter_invalid", "metadata[k]"},
		{"metadata value not a string", map[string]any{"url": "https://example.com/", "events": []string{"*"}, "metadata": map[string]any{"k": 1}}, "parameter_invalid", "metadata"},
		{"unknown field", map[string]any{"url": "https://example.com/", "events": []string{"*"}, "secret": "whsec_x"}, "validation_error", "secret"},
	}
	// "empty events" above sends ["*"] (hookBody's default); make it absent instead.
	cases[slices.IndexFunc(cases, func(c tc) bool { return c.name == "empty events" })].body = map[string]any{"url": "https://example.com/", "events": nil}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := expectError(t, h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key, Body: c.body}),
				http.StatusBadRequest, c.code)
			if m["param"] != c.param {
				t.Errorf("param = %v, want %s (%s)", m["param"], c.param, m["message"])
			}
		})
	}
	t.Run("malformed json", func(t *testing.T) {
		expectError(t, h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key, Body: `{"url":`}),
			http.StatusBadRequest, "validation_error")
	})
	if list := decode[listPage](t, h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions", Key: key})); len(list.Data) != 0 {
		t.Fatalf("refused requests stored %d subscriptions", len(list.Data))
	}

	// The edges that are allowed.
	for _, u := range []string{"https://example.com:8443/hooks?a=1", "https://93.184.216.34/hooks", "https://[2606:4700::1111]/",
		"https://example.com/" + long(2048-len("https://example.com/"))} {
		h.createSubscription(key, hookBody(u))
	}
	h.createSubscription(key, map[string]any{"url": "https://example.com/", "events": []string{"payout.paid"},
		"description": long(500), "metadata": map[string]string{long(40): long(500)}})

	sub := h.createSubscription(key, hookBody("https://example.com/"))
	path := "/v1/webhook_subscriptions/" + sub.ID
	for _, c := range []tc{
		{"update status", map[string]any{"status": "paused"}, "parameter_invalid", "status"},
		{"update url", map[string]any{"url": "https://10.0.0.1/"}, "parameter_invalid", "url"},
		{"update empty url", map[string]any{"url": ""}, "parameter_missing", "url"},
		{"update events", map[string]any{"events": []string{}}, "parameter_invalid", "events"},
		{"update description", map[string]any{"description": 1}, "parameter_invalid", "description"},
		{"update metadata", map[string]any{"metadata": map[string]string{"k": long(501)}}, "parameter_invalid", "metadata[k]"},
		{"update unknown field", map[string]any{"secret": "x"}, "validation_error", "secret"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := expectError(t, h.do(request{Method: http.MethodPost, Path: path, Key: key, Body: c.body}), http.StatusBadRequest, c.code)
			if m["param"] != c.param {
				t.Errorf("param = %v, want %s", m["param"], c.param)
			}
		})
	}
	if got := decode[subscription](t, h.do(request{Method: http.MethodGet, Path: path, Key: key})); got.URL != sub.URL || got.Status != "enabled" {
		t.Fatalf("refused updates changed the subscription: %+v", got)
	}
}

func TestSubscriptionDevelopmentTargets(t *testing.T) {
	t.Parallel()
	h := newHarness(t) // the harness allows http and private targets
	key := h.merchant("m1")
	sub := h.createSubscription(key, hookBody("http://127.0.0.1:9999/hooks"))
	if sub.URL != "http://127.0.0.1:9999/hooks" {
		t.Fatalf("url %s", sub.URL)
	}
	// The exceptions lift only those two rules.
	m := expectError(t, h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
		Body: hookBody("http://user:pw@127.0.0.1/")}), http.StatusBadRequest, "parameter_invalid")
	if m["param"] != "url" {
		t.Fatalf("param %v", m["param"])
	}
}

func TestSubscriptionIdempotentCreate(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m1")
	idem := map[string]string{"Idempotency-Key": uuid.NewString()}
	body := hookBody("https://example.com/hooks", "payout.paid")
	first := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key, Body: body, Header: idem})
	again := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key, Body: body, Header: idem})
	if first.Status != http.StatusCreated || again.Status != http.StatusCreated {
		t.Fatalf("statuses %d, %d: %s", first.Status, again.Status, again.Body)
	}
	a, b := decode[subscription](t, first), decode[subscription](t, again)
	if a.ID != b.ID || a.Secret == "" || a.Secret != b.Secret {
		t.Fatalf("replay gave another subscription or secret: %s vs %s", a.ID, b.ID)
	}
	other := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key, Header: idem,
		Body: hookBody("https://example.com/other", "payout.paid")})
	expectError(t, other, http.StatusConflict, "idempotency_key_already_used")
	list := decode[listPage](t, h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions", Key: key}))
	if len(list.Data) != 1 || list.Data[0].ID != a.ID {
		t.Fatalf("%d subscriptions after the replays, want only %s", len(list.Data), a.ID)
	}
	expectError(t, h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key, Body: body,
		Header: map[string]string{"Idempotency-Key": omitHeader}}), http.StatusBadRequest, "idempotency_key_required")
}

// activeSecrets opens the subscription's stored secrets with the master key
// and returns the ones signing now, current first.
func (h *harness) activeSecrets(id string) []string {
	h.t.Helper()
	sealer, err := signer.NewSealer(h.cfg.MasterKey)
	if err != nil {
		h.t.Fatal(err)
	}
	stored, err := h.store.Subscriptions.SigningSecrets(context.Background(), uuid.MustParse(id))
	if err != nil {
		h.t.Fatal(err)
	}
	var secrets []signer.Secret
	for _, s := range stored {
		v, err := sealer.Open(s.Ciphertext)
		if err != nil {
			h.t.Fatal(err)
		}
		secrets = append(secrets, signer.Secret{ID: s.ID, Value: v, CreatedAt: s.CreatedAt, ExpiresAt: s.ExpiresAt})
	}
	var out []string
	for _, s := range signer.Active(secrets, time.Now()) {
		out = append(out, s.Value)
	}
	return out
}

// signWith signs a test delivery as the dispatcher does, with the given
// secrets in order.
func signWith(t *testing.T, secrets []string, body []byte) http.Header {
	t.Helper()
	var ss []signer.Secret
	for _, s := range secrets {
		ss = append(ss, signer.Secret{Value: s})
	}
	keys, err := signer.Keys(ss)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	signer.SetHeaders(h, uuid.NewString(), time.Now(), body, keys...)
	return h
}

// verifies checks a delivery with the published Standard Webhooks library.
func verifies(t *testing.T, secret string, body []byte, h http.Header) bool {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	return wh.Verify(body, h) == nil
}

func TestRotateSecretSeenFromOutside(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m1")
	sub := h.createSubscription(key, hookBody("https://example.com/hooks"))
	s0 := sub.Secret
	rotate := func() subscription {
		t.Helper()
		r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID + "/rotate_secret", Key: key})
		if r.Status != http.StatusOK {
			t.Fatalf("rotate: %d %s", r.Status, r.Body)
		}
		return decode[subscription](t, r)
	}
	rotated := rotate()
	s1 := rotated.Secret
	if rotated.ID != sub.ID || rotated.Type != "webhook_subscription" || !strings.HasPrefix(s1, "whsec_") || s1 == s0 {
		t.Fatalf("rotate answered %+v", rotated)
	}
	active := h.activeSecrets(sub.ID)
	if !slices.Equal(active, []string{s1, s0}) {
		t.Fatalf("after one rotation the active secrets are not [new, old] (%d of them)", len(active))
	}

	body := []byte(`{"id":"evt","type":"payout.paid","payload":{}}`)
	hdr := signWith(t, active, body)
	if n := len(strings.Fields(hdr.Get("webhook-signature"))); n != 2 {
		t.Fatalf("%d signatures during the overlap, want 2", n)
	}
	for name, secret := range map[string]string{"old secret": s0, "new secret": s1} {
		if !verifies(t, secret, body, hdr) {
			t.Errorf("the published library rejects the delivery with the %s alone", name)
		}
	}
	stranger, _ := signer.NewSecret()
	if verifies(t, stranger, body, hdr) {
		t.Fatal("an unrelated secret verifies: the check proves nothing")
	}

	// A second rotation inside the overlap drops the oldest at once.
	s2 := rotate().Secret
	active = h.activeSecrets(sub.ID)
	if !slices.Equal(active, []string{s2, s1}) {
		t.Fatalf("after a second rotation inside the overlap: %d active, want exactly [s2, s1]", len(active))
	}
	hdr = signWith(t, active, body)
	if verifies(t, s0, body, hdr) || !verifies(t, s1, body, hdr) || !verifies(t, s2, body, hdr) {
		t.Fatal("after the second rotation only s1 and s2 may verify")
	}
	// The rotated secret is not shown again.
	got := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key})
	if bytes.Contains(got.Body, []byte(`"secret"`)) || bytes.Contains(got.Body, []byte(s2)) {
		t.Fatal("get shows a secret")
	}
	expectError(t, h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID + "/rotate_secret",
		Key: key, Body: map[string]any{"expire_now": true}}), http.StatusBadRequest, "validation_error")
}

func TestSubscriptionCrossMerchant(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	owner, stranger := h.merchant("m1"), h.merchant("m2")
	sub := h.createSubscription(owner, hookBody("https://example.com/hooks"))
	path := "/v1/webhook_subscriptions/" + sub.ID
	for _, req := range []request{
		{Method: http.MethodGet, Path: path},
		{Method: http.MethodPost, Path: path, Body: map[string]any{"status": "disabled"}},
		{Method: http.MethodDelete, Path: path},
		{Method: http.MethodPost, Path: path + "/rotate_secret"},
	} {
		t.Run(req.Method+" "+strings.TrimPrefix(req.Path, path), func(t *testing.T) {
			req.Key = stranger
			expectError(t, h.do(req), http.StatusNotFound, "resource_not_found")
		})
	}
	if list := decode[listPage](t, h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions", Key: stranger})); len(list.Data) != 0 {
		t.Fatal("another merchant lists the subscription")
	}
	got := decode[subscription](t, h.do(request{Method: http.MethodGet, Path: path, Key: owner}))
	if got.Status != "enabled" {
		t.Fatal("another merchant's update went through")
	}
	if active := h.activeSecrets(sub.ID); !slices.Equal(active, []string{sub.Secret}) {
		t.Fatal("another merchant's rotation went through")
	}
}

func TestSubscriptionSecretAtRest(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m1")
	sub := h.createSubscription(key, hookBody("https://example.com/hooks"))
	for _, req := range []request{
		{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + sub.ID},
		{Method: http.MethodGet, Path: "/v1/webhook_subscriptions"},
		{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID, Body: map[string]any{"description": "x"}},
	} {
		req.Key = key
		r := h.do(req)
		if r.Status != http.StatusOK || bytes.Contains(r.Body, []byte(`"secret"`)) || bytes.Contains(r.Body, []byte(sub.Secret)) {
			t.Fatalf("%s %s shows the secret or failed: %d %s", req.Method, req.Path, r.Status, r.Body)
		}
	}
	stored, err := h.store.Subscriptions.SigningSecrets(context.Background(), uuid.MustParse(sub.ID))
	if err != nil || len(stored) != 1 {
		t.Fatalf("%d stored secrets, %v", len(stored), err)
	}
	raw := strings.TrimPrefix(sub.Secret, "whsec_")
	if bytes.Contains(stored[0].Ciphertext, []byte(raw)) {
		t.Fatal("the stored secret contains the plaintext")
	}
	if got := h.activeSecrets(sub.ID); !slices.Equal(got, []string{sub.Secret}) {
		t.Fatal("the stored secret does not open to the one shown at create")
	}
	other, err := signer.NewSealer(bytes.Repeat([]byte{8}, 32))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Open(stored[0].Ciphertext); err == nil {
		t.Fatal("another master key opens the stored secret")
	}
}

func TestSubscriptionScopes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	full := h.merchant("m1")
	sub := h.createSubscription(full, hookBody("https://example.com/hooks"))
	readOnly := h.merchant("m1", admin.ScopeRead)
	writeOnly := h.merchant("m1", admin.ScopeWrite)
	path := "/v1/webhook_subscriptions/" + sub.ID
	for _, tc := range []struct {
		key  string
		req  request
		want string
	}{
		{readOnly, request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Body: hookBody("https://example.com/")}, admin.ScopeWrite},
		{readOnly, request{Method: http.MethodPost, Path: path, Body: map[string]any{"status": "disabled"}}, admin.ScopeWrite},
		{readOnly, request{Method: http.MethodDelete, Path: path}, admin.ScopeWrite},
		{readOnly, request{Method: http.MethodPost, Path: path + "/rotate_secret"}, admin.ScopeWrite},
		{writeOnly, request{Method: http.MethodGet, Path: path}, admin.ScopeRead},
		{writeOnly, request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions"}, admin.ScopeRead},
	} {
		t.Run(tc.req.Method+" "+tc.req.Path, func(t *testing.T) {
			tc.req.Key = tc.key
			m := expectError(t, h.do(tc.req), http.StatusForbidden, "insufficient_scope")
			if scopes, _ := m["required_scopes"].([]any); len(scopes) != 1 || scopes[0] != tc.want {
				t.Fatalf("required_scopes = %v, want [%s]", m["required_scopes"], tc.want)
			}
		})
	}
	if r := h.do(request{Method: http.MethodGet, Path: path, Key: readOnly}); r.Status != http.StatusOK {
		t.Fatalf("read-only key cannot read: %d", r.Status)
	}
	expectError(t, h.do(request{Method: http.MethodGet, Path: path}), http.StatusUnauthorized, "authentication_required")
	if got := decode[subscription](t, h.do(request{Method: http.MethodGet, Path: path, Key: full})); got.Status != "enabled" {
		t.Fatal("a refused update went through")
	}
}

func TestSubscriptionSecretNotCachedInClear(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m1")
	idem := map[string]string{"Idempotency-Key": uuid.NewString()}
	sub := decode[subscription](t, h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
		Body: hookBody("https://example.com/hooks"), Header: idem}))
	rotIdem := map[string]string{"Idempotency-Key": uuid.NewString()}
	rotated := decode[subscription](t, h.do(request{Method: http.MethodPost, Key: key, Header: rotIdem,
		Path: "/v1/webhook_subscriptions/" + sub.ID + "/rotate_secret"}))
	rows, err := h.store.Pool().Query(context.Background(), `SELECT response_body FROM idempotency_keys`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			t.Fatal(err)
		}
		n++
		for _, s := range []string{sub.Secret, rotated.Secret} {
			if bytes.Contains(body, []byte(strings.TrimPrefix(s, "whsec_"))) {
				t.Fatal("the idempotency cache keeps a signing secret in clear")
			}
		}
	}
	if n != 2 {
		t.Fatalf("%d cached answers, want 2", n)
	}
	// The replay still shows the same secret.
	again := decode[subscription](t, h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
		Body: hookBody("https://example.com/hooks"), Header: idem}))
	if again.ID != sub.ID || again.Secret != sub.Secret {
		t.Fatal("the replay does not show the same secret")
	}
}
