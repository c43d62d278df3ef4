package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/retry"
	"github.com/webhookd/webhookd/signer"
)

// syncBuffer is a log destination that tests read while servers write.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newLoggedPipeline is newPipelineHarness with the API and the pipeline
// logging at debug level into logs.
func newLoggedPipeline(t *testing.T, logs *syncBuffer) *harness {
	t.Helper()
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var d *dispatcher.Dispatcher
	withPipeline := func(cfg *admin.Config) {
		cfg.Logger = logger
		opt := cfg.Redis.(*redis.Client).Options()
		sealer, err := signer.NewSealer(cfg.MasterKey)
		if err != nil {
			t.Fatal(err)
		}
		d, err = dispatcher.New(dispatcher.Config{
			Store: cfg.Store, Redis: asynq.RedisClientOpt{Network: opt.Network, Addr: opt.Addr},
			Schedule:        retry.Schedule{Delays: []time.Duration{50 * time.Millisecond, 100 * time.Millisecond}},
			DeliveryTimeout: 500 * time.Millisecond, AllowHTTPTargets: true, AllowPrivateTargets: true,
			Concurrency: 8, Sealer: sealer, MasterKey: cfg.MasterKey, DefaultAPIVersion: admin.DefaultVersion, Logger: logger,
			SweepInterval: time.Second, SweepGrace: 200 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		usePipeline(cfg, d)
	}
	h := newHarness(t, withPipeline)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dispatcher: %v", err)
		}
		d.Close()
	})
	return h
}

// controlled is the subscription resource's delivery controls as a client
// decodes them.
type controlled struct {
	ID      string            `json:"id"`
	Status  string            `json:"status"`
	Filter  *string           `json:"filter"`
	Headers map[string]string `json:"headers"`
}

// TestFilterDecidesDeliveries: an event reaches a subscription with a
// filter only when the filter holds; decimal strings compare as numbers;
// a filter that cannot be evaluated on the event (a missing field)
// delivers nothing; a subscription without a filter gets everything.
func TestFilterDecidesDeliveries(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	h := newLoggedPipeline(t, &logs)
	key := h.merchant("m1")
	rcv := newHookReceiver(t, http.StatusOK)
	large := h.createSubscription(key, map[string]any{"url": rcv.URL + "/large", "events": []string{"payout.paid"},
		"filter": `payload.currency in ["EUR", "GBP"] && payload.amount > "1000"`})
	broken := h.createSubscription(key, map[string]any{"url": rcv.URL + "/broken", "events": []string{"*"},
		"filter": `payload.missing == "x"`})
	all := h.createSubscription(key, hookBody(rcv.URL+"/all"))

	tests := []struct {
		payload string
		want    []string
	}{
		{`{"currency":"EUR","amount":"1250.00"}`, []string{large.ID, all.ID}},
		{`{"currency":"EUR","amount":"999.5"}`, []string{all.ID}},
		{`{"currency":"USD","amount":"5000"}`, []string{all.ID}},
		{`{"currency":"GBP","amount":"1000.01"}`, []string{large.ID, all.ID}},
		{`{"currency":"GBP","amount":"1000.00"}`, []string{all.ID}},
		{`{"currency":"GBP"}`, []string{all.ID}}, // no amount: the filter errs, delivers nothing
	}
	for _, tt := range tests {
		t.Run(tt.payload, func(t *testing.T) {
			ev := h.publish("m1", "payout.paid", tt.payload)
			var got []string
			for _, d := range h.deliveriesOf(key, ev.ID) {
				got = append(got, d.SubscriptionID)
				h.waitDelivery(key, d.ID, "succeeded", settled)
			}
			if !sameSet(got, tt.want) {
				t.Fatalf("deliveries to %v, want %v (large %s, broken %s, all %s)", got, tt.want, large.ID, broken.ID, all.ID)
			}
		})
	}
	if n := len(rcv.requests()); n != 8 {
		t.Fatalf("receiver got %d requests, want the 8 deliveries", n)
	}
	if !strings.Contains(logs.String(), "subscription filter failed on the event") {
		t.Error("the erroring filter was not logged")
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, x := range a {
		seen[x]++
	}
	for _, x := range b {
		if seen[x] == 0 {
			return false
		}
		seen[x]--
	}
	return true
}

// TestFilterRefused: a filter that does not compile, is not a condition,
// or may cost too much is refused at create and at update with the
// compiler's message; null clears a filter.
func TestFilterRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m1")
	created := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
		Body: map[string]any{"url": "https://example.com/h", "events": []string{"*"}, "filter": `type == "payout.paid"`}})
	sub := decode[controlled](t, created)
	if created.Status != http.StatusCreated || sub.Filter == nil || *sub.Filter != `type == "payout.paid"` {
		t.Fatalf("filter = %v", sub.Filter)
	}
	tests := []struct {
		name, filter, message string
	}{
		{"syntax", `payload.amount >`, "Syntax error"},
		{"unknown variable", `amount > "1"`, "undeclared reference"},
		{"not a condition", `"EUR"`, "must be true or false"},
		{"empty", ``, "empty"},
		{"too costly", `payload.items.all(x, payload.items.all(y, payload.items.all(z, x == y && y == z)))`, "more than the limit"},
		{"too long", strings.Repeat("true && ", 300) + "true", "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			create := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
				Body: map[string]any{"url": "https://example.com/h", "events": []string{"*"}, "filter": tt.filter}})
			m := expectError(t, create, http.StatusBadRequest, "parameter_invalid")
			if m["param"] != "filter" || !strings.Contains(fmt.Sprint(m["message"]), tt.message) {
				t.Fatalf("create: param %v message %v, want filter and %q", m["param"], m["message"], tt.message)
			}
			update := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key,
				Body: map[string]any{"filter": tt.filter}})
			if m := expectError(t, update, http.StatusBadRequest, "parameter_invalid"); m["param"] != "filter" {
				t.Fatalf("update: param %v", m["param"])
			}
		})
	}
	r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key, Body: `{"filter":null}`})
	if got := decode[controlled](t, r); r.Status != http.StatusOK || got.Filter != nil {
		t.Fatalf("clear filter: %d %s", r.Status, r.Body)
	}
}

// TestHeadersSentMaskedAndNeverLogged: a subscription's headers arrive
// with every delivery (a real one, a test event, a redelivery), are shown
// masked, never appear in the logs, are refused by name when reserved, and
// are replaced whole or cleared by an update.
func TestHeadersSentMaskedAndNeverLogged(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	h := newLoggedPipeline(t, &logs)
	key := h.merchant("m1")
	rcv := newHookReceiver(t, http.StatusOK)
	const token = "Bearer sk_live_0123456789abcdef"
	created := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
		Body: map[string]any{"url": rcv.URL + "/hooks", "events": []string{"*"},
			"headers": map[string]string{"Authorization": token, "X-Tenant": "t-42"}}})
	if created.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.Status, created.Body)
	}
	sub := decode[controlled](t, created)
	wantMasked := map[string]string{"Authorization": "Bearer ••••••", "X-Tenant": "••••••"}
	if fmt.Sprint(sub.Headers) != fmt.Sprint(wantMasked) {
		t.Fatalf("headers shown as %v, want %v", sub.Headers, wantMasked)
	}
	for _, path := range []string{"/v1/webhook_subscriptions/" + sub.ID, "/v1/webhook_subscriptions"} {
		r := h.do(request{Method: http.MethodGet, Path: path, Key: key})
		if bytes.Contains(r.Body, []byte("sk_live")) || bytes.Contains(r.Body, []byte("t-42")) {
			t.Fatalf("GET %s shows a header value: %s", path, r.Body)
		}
	}

	ev := h.publish("m1", "payout.paid", `{"id":"po_1"}`)
	d := h.deliveriesOf(key, ev.ID)[0]
	h.waitDelivery(key, d.ID, "succeeded", settled)
	test := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID + "/send_test_event", Key: key})
	if test.Status != http.StatusAccepted {
		t.Fatalf("send_test_event: %d %s", test.Status, test.Body)
	}
	h.waitDelivery(key, decode[delivery](t, test).ID, "succeeded", settled)
	redeliver := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_deliveries/" + d.ID + "/redeliver", Key: key})
	if redeliver.Status != http.StatusAccepted {
		t.Fatalf("redeliver: %d %s", redeliver.Status, redeliver.Body)
	}
	h.waitDelivery(key, d.ID, "redelivered", hasAttempts(2))
	got := rcv.requests()
	if len(got) != 3 {
		t.Fatalf("receiver got %d requests, want 3", len(got))
	}
	for i, r := range got {
		if r.Header.Get("Authorization") != token || r.Header.Get("X-Tenant") != "t-42" {
			t.Fatalf("request %d headers %v", i, r.Header)
		}
		if r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Webhook-Signature") == "" {
			t.Fatalf("request %d lost our headers: %v", i, r.Header)
		}
	}
	if l := logs.String(); strings.Contains(l, "sk_live") || strings.Contains(l, "t-42") || l == "" {
		t.Fatalf("a header value is in the logs (or nothing was logged):\n%s", l)
	}

	// An update replaces the whole map; null clears it.
	r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key,
		Body: map[string]any{"headers": map[string]string{"X-Other": "1"}}})
	if got := decode[controlled](t, r); fmt.Sprint(got.Headers) != "map[X-Other:••••••]" {
		t.Fatalf("after replace: %s", r.Body)
	}
	r = h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key, Body: `{"headers":null}`})
	if got := decode[controlled](t, r); got.Headers != nil {
		t.Fatalf("after clear: %s", r.Body)
	}
}

// TestHeadersRefused: each refused header is named in param.
func TestHeadersRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m1")
	many := map[string]string{}
	for i := range 21 {
		many[fmt.Sprintf("X-H%02d", i)] = "v"
	}
	tests := []struct {
		name    string
		headers any
		param   string
	}{
		{"webhook-*", map[string]string{"Webhook-Id": "x"}, "headers.Webhook-Id"},
		{"webhook-* lower case", map[string]string{"webhook-signature": "x"}, "headers.webhook-signature"},
		{"content-type", map[string]string{"Content-Type": "text/plain"}, "headers.Content-Type"},
		{"content-length", map[string]string{"Content-Length": "1"}, "headers.Content-Length"},
		{"host", map[string]string{"Host": "evil.example"}, "headers.Host"},
		{"user-agent", map[string]string{"User-Agent": "x"}, "headers.User-Agent"},
		{"connection", map[string]string{"Connection": "close"}, "headers.Connection"},
		{"keep-alive", map[string]string{"Keep-Alive": "1"}, "headers.Keep-Alive"},
		{"proxy-authorization", map[string]string{"Proxy-Authorization": "x"}, "headers.Proxy-Authorization"},
		{"proxy-authenticate", map[string]string{"Proxy-Authenticate": "x"}, "headers.Proxy-Authenticate"},
		{"te", map[string]string{"TE": "trailers"}, "headers.TE"},
		{"trailer", map[string]string{"Trailer": "x"}, "headers.Trailer"},
		{"transfer-encoding", map[string]string{"Transfer-Encoding": "chunked"}, "headers.Transfer-Encoding"},
		{"upgrade", map[string]string{"Upgrade": "h2c"}, "headers.Upgrade"},
		{"CR LF in value", map[string]string{"X-Evil": "a\r\nX-Injected: 1"}, "headers.X-Evil"},
		{"NUL in value", map[string]string{"X-Evil": "a\x00b"}, "headers.X-Evil"},
		{"empty value", map[string]string{"X-Empty": ""}, "headers.X-Empty"},
		{"null value", map[string]any{"X-Null": nil}, "headers.X-Null"},
		{"value too long", map[string]string{"X-Long": strings.Repeat("v", 4097)}, "headers.X-Long"},
		{"name not a token", map[string]string{"X Space": "v"}, "headers"},
		{"empty name", map[string]string{"": "v"}, "headers"},
		{"same name twice", map[string]string{"X-A": "1", "x-a": "2"}, "headers.x-a"},
		{"too many", many, "headers"},
		{"not strings", map[string]int{"X-A": 1}, "headers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
				Body: map[string]any{"url": "https://example.com/h", "events": []string{"*"}, "headers": tt.headers}})
			m := expectError(t, r, http.StatusBadRequest, "parameter_invalid")
			if m["param"] != tt.param {
				t.Fatalf("param %v, want %s (%v)", m["param"], tt.param, m["message"])
			}
		})
	}
}

// TestSkippedWhileDisabledThenRecovered: an event that matches a disabled
// subscription is kept as a skipped delivery, never attempted, listed
// under status=skipped; once the subscription is enabled again, recover
// delivers it. A deleted subscription gets nothing.
func TestSkippedWhileDisabledThenRecovered(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	h := newLoggedPipeline(t, &logs)
	key := h.merchant("m1")
	rcv := newHookReceiver(t, http.StatusOK)
	sub := h.createSubscription(key, hookBody(rcv.URL+"/hooks", "payout.paid"))
	gone := h.createSubscription(key, hookBody(rcv.URL+"/gone", "payout.paid"))
	if r := h.do(request{Method: http.MethodDelete, Path: "/v1/webhook_subscriptions/" + gone.ID, Key: key}); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	disable := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key, Body: map[string]any{"status": "disabled"}})
	if disable.Status != http.StatusOK {
		t.Fatalf("disable: %d %s", disable.Status, disable.Body)
	}
	ev := h.publish("m1", "payout.paid", `{"id":"po_1"}`)
	ds := h.deliveriesOf(key, ev.ID)
	if len(ds) != 1 || ds[0].SubscriptionID != sub.ID || ds[0].Status != "skipped" || ds[0].NextAttemptAt != nil || ds[0].AttemptCount != 0 {
		t.Fatalf("deliveries while disabled: %+v", ds)
	}
	skipped := listAll[delivery](h, key, "/v1/webhook_deliveries?status=skipped", 10)
	if len(skipped) != 1 || skipped[0].ID != ds[0].ID {
		t.Fatalf("status=skipped lists %+v", skipped)
	}
	if n := len(listAll[delivery](h, key, "/v1/webhook_deliveries?status=pending", 10)); n != 0 {
		t.Fatalf("%d pending deliveries, want none", n)
	}

	path := "/v1/webhook_subscriptions/" + sub.ID + "/recover"
	since := map[string]any{"since": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}
	expectError(t, h.do(request{Method: http.MethodPost, Path: path, Key: key, Body: since}), http.StatusConflict, "conflict")
	enable := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key, Body: map[string]any{"status": "enabled"}})
	if enable.Status != http.StatusOK {
		t.Fatalf("enable: %d %s", enable.Status, enable.Body)
	}
	r := h.do(request{Method: http.MethodPost, Path: path, Key: key, Body: since})
	if r.Status != http.StatusAccepted || r.JSON(t)["deliveries"] != float64(1) {
		t.Fatalf("recover: %d %s", r.Status, r.Body)
	}
	got := h.waitDelivery(key, ds[0].ID, "recovered", hasAttempts(1))
	if got.Status != "succeeded" || got.Attempts[0].Trigger != "manual" {
		t.Fatalf("after recover: %+v", got)
	}
	if reqs := rcv.requests(); len(reqs) != 1 {
		t.Fatalf("receiver got %d requests, want 1", len(reqs))
	}
}

// TestLegacyControls: the legacy surface takes and shows filter and
// headers under the same names, with the same rules.
func TestLegacyControls(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m1")
	r := h.legacy("create", key, "", map[string]any{"url": "https://example.com/h", "events": []string{"*"},
		"filter": `payload.amount > "10"`, "headers": map[string]string{"X-Api-Key": "key_0123456789abcdef"}})
	sub := decode[controlled](t, r)
	if r.Status != http.StatusOK || sub.Filter == nil || sub.Headers["X-Api-Key"] != "••••••" {
		t.Fatalf("legacy create: %d %s", r.Status, r.Body)
	}
	r = h.legacy("update", key, "", map[string]any{"id": sub.ID, "filter": nil, "headers": map[string]string{"Host": "x"}})
	if r.Status != http.StatusBadRequest || !bytes.Contains(r.Body, []byte("Host cannot be set")) {
		t.Fatalf("legacy update with a reserved header: %d %s", r.Status, r.Body)
	}
	r = h.legacy("update", key, "", map[string]any{"id": sub.ID, "filter": nil, "headers": nil})
	if got := decode[controlled](t, r); r.Status != http.StatusOK || got.Filter != nil || got.Headers != nil {
		t.Fatalf("legacy update clearing both: %d %s", r.Status, r.Body)
	}
}

// FuzzSubscriptionControlsBody: create bodies with filters and headers,
// malformed ones included, are answered 201 or a 4xx, never a 500.
func FuzzSubscriptionControlsBody(f *testing.F) {
	fuzzBody(f, bodyTarget{method: http.MethodPost, path: "/v1/webhook_subscriptions", accepted: checkSubscription,
		seeds: []string{
			`{"url":"https://example.com/hook","events":["*"],"filter":"payload.amount > \"1000\""}`,
			`{"url":"https://example.com/hook","events":["*"],"filter":"payload.a.all(x, payload.a.all(y, x == y))"}`,
			`{"url":"https://example.com/hook","events":["*"],"filter":"("}`,
			`{"url":"https://example.com/hook","events":["*"],"filter":null,"headers":null}`,
			`{"url":"https://example.com/hook","events":["*"],"filter":42}`,
			`{"url":"https://example.com/hook","events":["*"],"headers":{"Authorization":"Bearer 0123456789abcdef"}}`,
			`{"url":"https://example.com/hook","events":["*"],"headers":{"Connection":"close"}}`,
			`{"url":"https://example.com/hook","events":["*"],"headers":{"X-A":"a\r\nb"}}`,
			`{"url":"https://example.com/hook","events":["*"],"headers":{"X A":"v","":"v"}}`,
			`{"url":"https://example.com/hook","events":["*"],"headers":["X-A"]}`,
			`{"url":"https://example.com/hook","events":["*"],"headers":{"X-A":null}}`,
		}})
}

// controls are the delivery-control fields of both surfaces.
type controls struct {
	RateLimit       *int            `json:"rate_limit"`
	LegacyRateLimit *int            `json:"rateLimit"`
	Ordering        json.RawMessage `json:"ordering"`
}

func TestSubscriptionControlsLifecycle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, strict)
	key := h.merchant("m1")
	created := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key, Body: map[string]any{
		"url": "https://example.com/hooks", "events": []string{"*"}}})
	c := decode[controls](t, created)
	id := decode[subscription](t, created).ID
	if created.Status != http.StatusCreated || c.RateLimit != nil || string(c.Ordering) != `"none"` {
		t.Fatalf("defaults: %d %s", created.Status, created.Body)
	}
	path := "/v1/webhook_subscriptions/" + id
	for _, step := range []struct {
		body      map[string]any
		rateLimit *int
		ordering  string
	}{
		{map[string]any{"rate_limit": 5}, ptr(5), `"none"`},
		{map[string]any{"ordering": map[string]string{"key": "payload.account_id"}}, ptr(5), `{"key":"payload.account_id"}`},
		{map[string]any{"description": "unchanged controls"}, ptr(5), `{"key":"payload.account_id"}`},
		{map[string]any{"rate_limit": nil, "ordering": "none"}, nil, `"none"`},
		{map[string]any{"rate_limit": 10000, "ordering": nil}, ptr(10000), `"none"`},
	} {
		r := h.do(request{Method: http.MethodPost, Path: path, Key: key, Body: step.body})
		got := decode[controls](t, r)
		if r.Status != http.StatusOK || !equalPtr(got.RateLimit, step.rateLimit) || string(got.Ordering) != step.ordering {
			t.Fatalf("update %v: %d %s", step.body, r.Status, r.Body)
		}
		read := decode[controls](t, h.do(request{Method: http.MethodGet, Path: path, Key: key}))
		if !equalPtr(read.RateLimit, step.rateLimit) || string(read.Ordering) != step.ordering {
			t.Fatalf("read after %v: %+v", step.body, read)
		}
	}

	// Created with both, on each surface.
	r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key, Body: map[string]any{
		"url": "https://example.com/b", "events": []string{"*"}, "rate_limit": 3, "ordering": map[string]string{"key": "type"}}})
	if got := decode[controls](t, r); r.Status != http.StatusCreated || !equalPtr(got.RateLimit, ptr(3)) || string(got.Ordering) != `{"key":"type"}` {
		t.Fatalf("create with controls: %d %s", r.Status, r.Body)
	}
	r = h.legacy("create", key, "", map[string]any{"url": "https://example.com/l", "events": []string{"*"}, "rateLimit": 7,
		"ordering": map[string]string{"key": "payload.id"}})
	got := decode[controls](t, r)
	if r.Status != http.StatusOK || !equalPtr(got.LegacyRateLimit, ptr(7)) || string(got.Ordering) != `{"key":"payload.id"}` {
		t.Fatalf("legacy create with controls: %d %s", r.Status, r.Body)
	}
	legacyID := decode[subscription](t, r).ID
	r = h.legacy("update", key, "", map[string]any{"id": legacyID, "rateLimit": nil, "ordering": "none"})
	if got := decode[controls](t, r); r.Status != http.StatusOK || got.LegacyRateLimit != nil || string(got.Ordering) != `"none"` {
		t.Fatalf("legacy update of controls: %d %s", r.Status, r.Body)
	}
}

func TestSubscriptionControlsValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, strict)
	key := h.merchant("m1")
	sub := h.createSubscription(key, hookBody("https://example.com/"))
	for _, tc := range []struct {
		name  string
		field string
		value any
	}{
		{"rate limit zero", "rate_limit", 0},
		{"rate limit negative", "rate_limit", -1},
		{"rate limit too high", "rate_limit", 10001},
		{"rate limit fraction", "rate_limit", 2.5},
		{"rate limit string", "rate_limit", "5"},
		{"ordering unknown word", "ordering", "fifo"},
		{"ordering number", "ordering", 1},
		{"ordering without key", "ordering", map[string]any{}},
		{"ordering extra field", "ordering", map[string]any{"key": "payload.id", "by": "x"}},
		{"ordering key not a string", "ordering", map[string]any{"key": 1}},
		{"ordering key empty", "ordering", map[string]any{"key": ""}},
		{"ordering key outside the envelope", "ordering", map[string]any{"key": "data.id"}},
		{"ordering key empty segment", "ordering", map[string]any{"key": "payload..id"}},
		{"ordering key bad character", "ordering", map[string]any{"key": "payload.a b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := hookBody("https://example.com/")
			body[tc.field] = tc.value
			m := expectError(t, h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key, Body: body}),
				http.StatusBadRequest, "parameter_invalid")
			if m["param"] != tc.field {
				t.Errorf("create: param %v, want %s", m["param"], tc.field)
			}
			m = expectError(t, h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key,
				Body: map[string]any{tc.field: tc.value}}), http.StatusBadRequest, "parameter_invalid")
			if m["param"] != tc.field {
				t.Errorf("update: param %v, want %s", m["param"], tc.field)
			}
		})
	}
}

func equalPtr(a, b *int) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
func ptr(n int) *int          { return &n }
