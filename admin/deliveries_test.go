package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/retry"
	"github.com/webhookd/webhookd/signer"
)

// pipelineClock is the dispatcher's clock in these tests: real time plus
// an offset a test may move forward.
type pipelineClock struct{ offset atomic.Int64 }

func (c *pipelineClock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *pipelineClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// newPipelineHarness is the harness with a real dispatcher as its
// Publisher, running on the harness's database and Redis, with retries in
// milliseconds (three attempts) and a 500 ms delivery timeout.
func newPipelineHarness(t *testing.T, configure ...func(*admin.Config)) (*harness, *pipelineClock) {
	t.Helper()
	pc := &pipelineClock{}
	var d *dispatcher.Dispatcher
	withPipeline := func(cfg *admin.Config) {
		opt := cfg.Redis.(*redis.Client).Options()
		sealer, err := signer.NewSealer(cfg.MasterKey)
		if err != nil {
			t.Fatal(err)
		}
		d, err = dispatcher.New(dispatcher.Config{
			Store: cfg.Store, Redis: asynq.RedisClientOpt{Network: opt.Network, Addr: opt.Addr},
			Schedule:        retry.Schedule{Delays: []time.Duration{50 * time.Millisecond, 100 * time.Millisecond}},
			DeliveryTimeout: 500 * time.Millisecond, AllowHTTPTargets: true, AllowPrivateTargets: true,
			Concurrency: 8, Sealer: sealer, DefaultAPIVersion: admin.DefaultVersion, Clock: pc,
			SweepInterval: time.Second, SweepGrace: 200 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		usePipeline(cfg, d)
	}
	h := newHarness(t, append([]func(*admin.Config){withPipeline}, configure...)...)
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
	return h, pc
}

// hookReceiver is a webhook endpoint on 127.0.0.1 answering the status it
// holds, and keeping every request.
type hookReceiver struct {
	*httptest.Server
	status atomic.Int32
	mu     sync.Mutex
	got    []receivedHook
}

type receivedHook struct {
	Header http.Header
	Body   []byte
}

func newHookReceiver(t *testing.T, status int) *hookReceiver {
	t.Helper()
	rc := &hookReceiver{}
	rc.status.Store(int32(status))
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, receivedHook{Header: r.Header.Clone(), Body: b})
		rc.mu.Unlock()
		w.WriteHeader(int(rc.status.Load()))
		_, _ = w.Write([]byte("answer " + strconv.Itoa(int(rc.status.Load()))))
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *hookReceiver) requests() []receivedHook {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]receivedHook(nil), rc.got...)
}

// event is the Event resource as a client decodes it.
type event struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	APIVersion string          `json:"api_version"`
	Payload    json.RawMessage `json:"payload"`
	CreatedAt  string          `json:"created_at"`
}

// delivery is the Webhook delivery resource as a client decodes it.
type delivery struct {
	ID             string     `json:"id"`
	Type           string     `json:"type"`
	EventID        string     `json:"event_id"`
	EventType      string     `json:"event_type"`
	SubscriptionID string     `json:"subscription_id"`
	Status         string     `json:"status"`
	Test           bool       `json:"test"`
	AttemptCount   int        `json:"attempt_count"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	Attempts       []struct {
		Number       int       `json:"number"`
		Status       string    `json:"status"`
		Trigger      string    `json:"trigger"`
		HTTPStatus   *int      `json:"http_status"`
		Error        *string   `json:"error"`
		DurationMS   int       `json:"duration_ms"`
		ResponseBody string    `json:"response_body"`
		AttemptedAt  time.Time `json:"attempted_at"`
	} `json:"attempts"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// page is one list answer.
type page[T any] struct {
	Data       []T     `json:"data"`
	HasMore    bool    `json:"has_more"`
	NextCursor *string `json:"next_cursor"`
}

// publish publishes an event through the internal route and returns it.
func (h *harness) publish(merchant, typ, payload string) event {
	h.t.Helper()
	// created_at is shown to the millisecond and created_at.gte takes what
	// is shown: events published in one millisecond could not be told
	// apart by the filter, so each is published in a millisecond of its
	// own. An event's created_at falls within its request, so a request
	// that starts a millisecond or more after the last one answered makes
	// an event of a later millisecond; the round trip alone almost always
	// takes that long, and the clock is waited on only when it did not.
	for time.Since(h.lastPublished) < time.Millisecond {
		runtime.Gosched()
	}
	r := h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/events",
		Body: fmt.Sprintf(`{"merchant_id":%q,"type":%q,"payload":%s}`, merchant, typ, payload)})
	h.lastPublished = time.Now()
	if r.Status != http.StatusAccepted {
		h.t.Fatalf("publish: %d %s", r.Status, r.Body)
	}
	return decode[event](h.t, r)
}

// listAll walks every page of path (which carries its own filters) with
// limit, and returns the items in order.
func listAll[T any](h *harness, key, path string, limit int) []T {
	h.t.Helper()
	var out []T
	cursor := ""
	for range 100 {
		q := url.Values{"limit": {strconv.Itoa(limit)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		sep := "?"
		if u, _ := url.Parse(path); u.RawQuery != "" {
			sep = "&"
		}
		r := h.do(request{Method: http.MethodGet, Path: path + sep + q.Encode(), Key: key})
		if r.Status != http.StatusOK {
			h.t.Fatalf("list %s: %d %s", path, r.Status, r.Body)
		}
		p := decode[page[T]](h.t, r)
		if len(p.Data) > limit {
			h.t.Fatalf("page of %d items with limit %d", len(p.Data), limit)
		}
		out = append(out, p.Data...)
		if !p.HasMore {
			if p.NextCursor != nil {
				h.t.Fatalf("next_cursor %q without has_more", *p.NextCursor)
			}
			return out
		}
		cursor = *p.NextCursor
	}
	h.t.Fatal("more than 100 pages")
	return nil
}

// waitDelivery polls GET /v1/webhook_deliveries/{id} until done holds.
func (h *harness) waitDelivery(key, id string, what string, done func(delivery) bool) delivery {
	h.t.Helper()
	var d delivery
	if !eventually(10*time.Second, func() bool {
		r := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_deliveries/" + id, Key: key})
		if r.Status != http.StatusOK {
			h.t.Fatalf("get delivery: %d %s", r.Status, r.Body)
		}
		d = decode[delivery](h.t, r)
		return done(d)
	}) {
		h.t.Fatalf("timed out waiting for delivery %s to be %s; it is %+v", id, what, d)
	}
	return d
}

func settled(d delivery) bool { return d.Status != "pending" }

// deliveriesOf lists the deliveries of one event.
func (h *harness) deliveriesOf(key, eventID string) []delivery {
	h.t.Helper()
	return listAll[delivery](h, key, "/v1/webhook_deliveries?event_id="+eventID, 100)
}

func TestDeliveriesFiltersPagesAndAttempts(t *testing.T) {
	t.Parallel()
	h, _ := newPipelineHarness(t)
	key := h.merchant("m1")
	otherKey := h.merchant("m2")
	ok := newHookReceiver(t, http.StatusNoContent)
	bad := newHookReceiver(t, http.StatusInternalServerError)
	good := h.createSubscription(key, hookBody(ok.URL+"/ok"))
	failing := h.createSubscription(key, hookBody(bad.URL+"/bad"))
	h.createSubscription(otherKey, hookBody(ok.URL+"/other"))

	var events []event
	for i := range 3 {
		events = append(events, h.publish("m1", "payout.paid", fmt.Sprintf(`{"n":%d}`, i)))
	}
	h.publish("m2", "payout.paid", `{"n":9}`)
	for _, ev := range events {
		ds := h.deliveriesOf(key, ev.ID)
		if len(ds) != 2 {
			t.Fatalf("event %s has %d deliveries, want 2", ev.ID, len(ds))
		}
		for _, d := range ds {
			h.waitDelivery(key, d.ID, "settled", settled)
		}
	}

	all := listAll[delivery](h, key, "/v1/webhook_deliveries", 2)
	if len(all) != 6 {
		t.Fatalf("walked %d deliveries over pages of 2, want 6", len(all))
	}
	seen := map[string]bool{}
	for i, d := range all {
		if seen[d.ID] {
			t.Fatalf("delivery %s listed twice", d.ID)
		}
		seen[d.ID] = true
		if i > 0 && d.CreatedAt.After(all[i-1].CreatedAt) {
			t.Fatalf("not newest first at %d", i)
		}
		if d.Type != "webhook_delivery" || d.Test || d.EventType != "payout.paid" {
			t.Fatalf("delivery %+v", d)
		}
	}

	tests := []struct {
		query string
		want  int
		check func(delivery) bool
	}{
		{"status=failed", 3, func(d delivery) bool { return d.Status == "failed" && d.SubscriptionID == failing.ID }},
		{"status=succeeded", 3, func(d delivery) bool { return d.Status == "succeeded" && d.SubscriptionID == good.ID }},
		{"status=pending", 0, nil},
		{"subscription_id=" + good.ID, 3, func(d delivery) bool { return d.SubscriptionID == good.ID }},
		{"event_id=" + events[1].ID, 2, func(d delivery) bool { return d.EventID == events[1].ID }},
		{"event_id=" + events[1].ID + "&status=failed", 1, func(d delivery) bool { return d.SubscriptionID == failing.ID }},
		{"created_at.gte=" + url.QueryEscape(events[2].CreatedAt), 2, func(d delivery) bool { return d.EventID == events[2].ID }},
		{"created_at.gte=" + url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339)), 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			got := listAll[delivery](h, key, "/v1/webhook_deliveries?"+tt.query, 2)
			if len(got) != tt.want {
				t.Fatalf("%d deliveries, want %d", len(got), tt.want)
			}
			for _, d := range got {
				if !tt.check(d) {
					t.Fatalf("delivery %+v does not match the filter", d)
				}
			}
		})
	}

	// The failed delivery's attempts tell the whole story.
	failed := listAll[delivery](h, key, "/v1/webhook_deliveries?status=failed", 1)[0]
	r := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_deliveries/" + failed.ID, Key: key})
	if r.Status != http.StatusOK {
		t.Fatalf("get: %d %s", r.Status, r.Body)
	}
	var raw map[string]any
	if err := json.Unmarshal(r.Body, &raw); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"id", "type", "event_id", "event_type", "subscription_id", "status", "test",
		"attempt_count", "next_attempt_at", "attempts", "created_at", "updated_at"} {
		if _, ok := raw[f]; !ok {
			t.Errorf("delivery lacks %q", f)
		}
	}
	d := decode[delivery](t, r)
	if d.AttemptCount != 3 || len(d.Attempts) != 3 || d.NextAttemptAt != nil {
		t.Fatalf("failed delivery: %d attempts (%d listed), next %v", d.AttemptCount, len(d.Attempts), d.NextAttemptAt)
	}
	for i, a := range d.Attempts {
		if a.Number != i+1 || a.Status != "failed" || a.Trigger != "scheduled" || a.HTTPStatus == nil ||
			*a.HTTPStatus != 500 || a.ResponseBody != "answer 500" || a.AttemptedAt.IsZero() || a.DurationMS < 0 {
			t.Fatalf("attempt %d: %+v", i+1, a)
		}
	}

	// Bad filter values name their parameter.
	for _, q := range []string{"status=lost", "event_id=nope", "subscription_id=42", "created_at.gte=yesterday", "limit=0"} {
		r := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_deliveries?" + q, Key: key})
		m := expectError(t, r, http.StatusBadRequest, "parameter_invalid")
		if want, _, _ := cutEq(q); m["param"] != want {
			t.Errorf("%s: param %v, want %s", q, m["param"], want)
		}
	}

	// Another merchant's delivery, an unknown id and a malformed one are
	// all 404.
	for _, path := range []string{"/v1/webhook_deliveries/" + failed.ID, "/v1/webhook_deliveries/0190a000-0000-7000-8000-000000000000",
		"/v1/webhook_deliveries/not-a-uuid"} {
		expectError(t, h.do(request{Method: http.MethodGet, Path: path, Key: otherKey}), http.StatusNotFound, "resource_not_found")
	}
	if got := listAll[delivery](h, otherKey, "/v1/webhook_deliveries", 10); len(got) != 1 {
		t.Fatalf("m2 lists %d deliveries, want its own 1", len(got))
	}
}

func cutEq(q string) (string, string, bool) {
	for i := range q {
		if q[i] == '=' {
			return q[:i], q[i+1:], true
		}
	}
	return q, "", false
}

// countingPublisher is the real pipeline, counting the redeliver calls that
// reach it.
type countingPublisher struct {
	admin.Publisher
	redelivers *atomic.Int32
}

func (p countingPublisher) Redeliver(ctx context.Context, merchantID string, id uuid.UUID) (store.Delivery, error) {
	p.redelivers.Add(1)
	return p.Publisher.Redeliver(ctx, merchantID, id)
}

// hasAttempts is a waitDelivery condition: n attempts recorded.
func hasAttempts(n int) func(delivery) bool {
	return func(d delivery) bool { return d.AttemptCount >= n && len(d.Attempts) >= n }
}

func TestRedeliverSeenByReceiver(t *testing.T) {
	t.Parallel()
	var redelivers atomic.Int32
	h, clock := newPipelineHarness(t, func(c *admin.Config) {
		c.Publisher = countingPublisher{Publisher: c.Publisher, redelivers: &redelivers}
	})
	key := h.merchant("m1")
	readOnly := h.merchant("m1", admin.ScopeRead)
	otherKey := h.merchant("m2")
	rcv := newHookReceiver(t, http.StatusInternalServerError)
	sub := h.createSubscription(key, hookBody(rcv.URL+"/hooks"))
	ev := h.publish("m1", "payout.failed", `{"id":"po_1","failure":{"code":"account_closed"}}`)
	ds := h.deliveriesOf(key, ev.ID)
	failed := h.waitDelivery(key, ds[0].ID, "failed", settled)
	if failed.Status != "failed" || failed.AttemptCount != 3 {
		t.Fatalf("delivery %s after %d attempts, want failed after 3", failed.Status, failed.AttemptCount)
	}

	// Refused without the write scope, without an Idempotency-Key, and for
	// another merchant.
	path := "/v1/webhook_deliveries/" + failed.ID + "/redeliver"
	expectError(t, h.do(request{Method: http.MethodPost, Path: path, Key: readOnly}), http.StatusForbidden, "insufficient_scope")
	expectError(t, h.do(request{Method: http.MethodPost, Path: path, Key: key, Header: map[string]string{"Idempotency-Key": omitHeader}}),
		http.StatusBadRequest, "idempotency_key_required")
	expectError(t, h.do(request{Method: http.MethodPost, Path: path, Key: otherKey}), http.StatusNotFound, "resource_not_found")
	if n := len(rcv.requests()); n != 3 {
		t.Fatalf("receiver got %d requests before the redelivery, want 3", n)
	}

	// The receiver is fixed; a minute later the merchant redelivers.
	rcv.status.Store(http.StatusOK)
	clock.Advance(time.Minute)
	r := h.do(request{Method: http.MethodPost, Path: path, Key: key})
	if r.Status != http.StatusAccepted {
		t.Fatalf("redeliver: %d %s", r.Status, r.Body)
	}
	// Accepted: the delivery as it is, the attempt still to come.
	accepted := decode[delivery](t, r)
	if accepted.ID != failed.ID || accepted.Status != "failed" || accepted.AttemptCount != 3 || len(accepted.Attempts) != 3 {
		t.Fatalf("redeliver answered %+v; want the delivery as it was", accepted)
	}
	got := h.waitDelivery(key, failed.ID, "given its manual attempt", hasAttempts(4))
	if got.Status != "succeeded" || got.AttemptCount != 4 || len(got.Attempts) != 4 {
		t.Fatalf("after redeliver: %+v", got)
	}
	if a := got.Attempts[3]; a.Number != 4 || a.Trigger != "manual" || a.Status != "succeeded" || *a.HTTPStatus != 200 {
		t.Fatalf("manual attempt %+v", a)
	}

	reqs := rcv.requests()
	if len(reqs) != 4 {
		t.Fatalf("receiver got %d requests, want 4", len(reqs))
	}
	first, manual := reqs[0], reqs[3]
	if manual.Header.Get("webhook-id") != ev.ID || first.Header.Get("webhook-id") != ev.ID {
		t.Errorf("webhook-id %q then %q, want the event id %s", first.Header.Get("webhook-id"), manual.Header.Get("webhook-id"), ev.ID)
	}
	if string(manual.Body) != string(first.Body) {
		t.Errorf("redelivered body differs:\n%s\n%s", first.Body, manual.Body)
	}
	t1, _ := strconv.ParseInt(first.Header.Get("webhook-timestamp"), 10, 64)
	t2, _ := strconv.ParseInt(manual.Header.Get("webhook-timestamp"), 10, 64)
	if t2-t1 < 50 {
		t.Errorf("webhook-timestamp %d is not fresh (first attempt %d)", t2, t1)
	}
	wh, err := standardwebhooks.NewWebhook(sub.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(manual.Body, manual.Header); err != nil {
		t.Errorf("the redelivery does not verify with the published library: %v", err)
	}

	// The same Idempotency-Key replays the answer and asks the pipeline
	// nothing more: one more attempt, not two.
	idem := map[string]string{"Idempotency-Key": "redeliver-1"}
	before := redelivers.Load()
	first2 := h.do(request{Method: http.MethodPost, Path: path, Key: key, Header: idem})
	again := h.do(request{Method: http.MethodPost, Path: path, Key: key, Header: idem})
	if first2.Status != http.StatusAccepted || again.Status != http.StatusAccepted || string(first2.Body) != string(again.Body) {
		t.Fatalf("idempotent redeliver: %d %s / %d %s", first2.Status, first2.Body, again.Status, again.Body)
	}
	if n := redelivers.Load() - before; n != 1 {
		t.Fatalf("the replayed redeliver reached the pipeline %d times, want once", n)
	}
	h.waitDelivery(key, failed.ID, "given the second manual attempt", hasAttempts(5))
	if n := len(rcv.requests()); n != 5 {
		t.Fatalf("receiver got %d requests, want 5", n)
	}
}

// TestRedeliverTwiceTwoAttempts: two redeliver calls under different
// Idempotency-Keys are two requests, and append two manual attempts.
func TestRedeliverTwiceTwoAttempts(t *testing.T) {
	t.Parallel()
	h, _ := newPipelineHarness(t)
	key := h.merchant("m1")
	rcv := newHookReceiver(t, http.StatusOK)
	h.createSubscription(key, hookBody(rcv.URL+"/hooks"))
	ev := h.publish("m1", "payout.paid", `{"id":"po_1"}`)
	del := h.waitDelivery(key, h.deliveriesOf(key, ev.ID)[0].ID, "succeeded", settled)

	path := "/v1/webhook_deliveries/" + del.ID + "/redeliver"
	for _, k := range []string{"redeliver-a", "redeliver-b"} {
		r := h.do(request{Method: http.MethodPost, Path: path, Key: key, Header: map[string]string{"Idempotency-Key": k}})
		if r.Status != http.StatusAccepted {
			t.Fatalf("redeliver %s: %d %s", k, r.Status, r.Body)
		}
	}
	got := h.waitDelivery(key, del.ID, "given two manual attempts", hasAttempts(3))
	for i, a := range got.Attempts {
		want := "manual"
		if i == 0 {
			want = "scheduled"
		}
		if a.Number != i+1 || a.Trigger != want || a.Status != "succeeded" {
			t.Fatalf("attempt %d: %+v, want number %d %s succeeded", i+1, a, i+1, want)
		}
	}
	reqs := rcv.requests()
	if len(reqs) != 3 {
		t.Fatalf("receiver got %d requests, want 3", len(reqs))
	}
	for _, r := range reqs[1:] {
		if r.Header.Get("webhook-id") != ev.ID || string(r.Body) != string(reqs[0].Body) {
			t.Errorf("manual attempt sent %q %s; want the first attempt's id and body", r.Header.Get("webhook-id"), r.Body)
		}
	}
}

// TestRedeliverToDisabledSubscription: nothing is sent to a disabled
// subscription; the merchant is told why, not asked to retry.
func TestRedeliverToDisabledSubscription(t *testing.T) {
	t.Parallel()
	h, _ := newPipelineHarness(t)
	key := h.merchant("m1")
	rcv := newHookReceiver(t, http.StatusOK)
	sub := h.createSubscription(key, hookBody(rcv.URL+"/hooks"))
	ev := h.publish("m1", "payout.paid", `{"id":"po_1"}`)
	del := h.waitDelivery(key, h.deliveriesOf(key, ev.ID)[0].ID, "succeeded", settled)
	if r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key,
		Body: map[string]any{"status": "disabled"}}); r.Status != http.StatusOK {
		t.Fatalf("disable: %d %s", r.Status, r.Body)
	}
	r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_deliveries/" + del.ID + "/redeliver", Key: key})
	m := expectError(t, r, http.StatusConflict, "conflict")
	if msg, _ := m["message"].(string); !strings.Contains(msg, "disabled or deleted") {
		t.Errorf("message %q does not say the subscription is disabled", msg)
	}
	if n := len(rcv.requests()); n != 1 {
		t.Errorf("receiver got %d requests, want only the first delivery", n)
	}
}

func TestSendTestEventRateLimitAndHealth(t *testing.T) {
	t.Parallel()
	h, _ := newPipelineHarness(t, func(c *admin.Config) { c.TestEventRate = redis_rate.PerMinute(2) })
	key := h.merchant("m1")
	otherKey := h.merchant("m2")
	rcv := newHookReceiver(t, http.StatusInternalServerError)
	sub := h.createSubscription(key, hookBody(rcv.URL+"/hooks", "payout.paid"))
	path := "/v1/webhook_subscriptions/" + sub.ID + "/send_test_event"

	// Another merchant cannot reach the subscription (and has its own budget).
	expectError(t, h.do(request{Method: http.MethodPost, Path: path, Key: otherKey}), http.StatusNotFound, "resource_not_found")

	var tests []delivery
	for range 2 {
		r := h.do(request{Method: http.MethodPost, Path: path, Key: key})
		if r.Status != http.StatusAccepted {
			t.Fatalf("send_test_event: %d %s", r.Status, r.Body)
		}
		d := decode[delivery](t, r)
		if !d.Test || d.EventType != "ping.test" || d.SubscriptionID != sub.ID || d.Status != "pending" || d.Type != "webhook_delivery" {
			t.Fatalf("test delivery %+v", d)
		}
		tests = append(tests, d)
	}
	r := h.do(request{Method: http.MethodPost, Path: path, Key: key})
	m := expectError(t, r, http.StatusTooManyRequests, "rate_limit_exceeded")
	if m["category"] != "rate_limit_error" {
		t.Errorf("category %v", m["category"])
	}
	if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 || s > 60 {
		t.Errorf("Retry-After %q, want whole seconds within the minute", r.Header.Get("Retry-After"))
	}

	// The ping.test events are ordinary events of the merchant.
	pings := listAll[event](h, key, "/v1/events?event_type=ping.test", 10)
	if len(pings) != 2 {
		t.Fatalf("%d ping.test events listed, want 2", len(pings))
	}
	var payload struct {
		SubscriptionID string `json:"subscription_id"`
		Message        string `json:"message"`
	}
	if err := json.Unmarshal(pings[0].Payload, &payload); err != nil || payload.SubscriptionID != sub.ID || payload.Message == "" {
		t.Fatalf("ping.test payload %s", pings[0].Payload)
	}
	if pings[0].APIVersion != admin.DefaultVersion {
		t.Errorf("ping.test api_version %s, want the pinned %s", pings[0].APIVersion, admin.DefaultVersion)
	}

	// Both test deliveries fail for good, through the whole schedule; the
	// subscription's health does not move.
	for _, d := range tests {
		got := h.waitDelivery(key, d.ID, "settled", settled)
		if got.Status != "failed" || got.AttemptCount != 3 {
			t.Fatalf("test delivery %s after %d attempts, want failed after 3", got.Status, got.AttemptCount)
		}
	}
	health := func() subscription {
		r := h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key})
		return decode[subscription](t, r)
	}
	if s := health(); s.Health.ConsecutiveFailures != 0 || s.Health.LastFailureAt != nil {
		t.Fatalf("health after failing test deliveries: %+v", s.Health)
	}

	// A real event failing the same way does move it.
	ev := h.publish("m1", "payout.paid", `{"id":"po_2"}`)
	h.waitDelivery(key, h.deliveriesOf(key, ev.ID)[0].ID, "settled", settled)
	if s := health(); s.Health.ConsecutiveFailures != 3 || s.Health.LastFailureAt == nil {
		t.Fatalf("health after a failing real delivery: %+v", s.Health)
	}
}

// TestRecoverReplaysFailedDeliveries: a bulk replay gives every delivery
// of the subscription that failed for good since a time one manual
// attempt, and leaves test deliveries alone.
func TestRecoverReplaysFailedDeliveries(t *testing.T) {
	t.Parallel()
	h, _ := newPipelineHarness(t)
	key := h.merchant("m1")
	otherKey := h.merchant("m2")
	rcv := newHookReceiver(t, http.StatusInternalServerError)
	sub := h.createSubscription(key, hookBody(rcv.URL+"/hooks"))
	var failed []string
	for range 2 {
		ev := h.publish("m1", "payout.paid", `{"id":"po_1"}`)
		d := h.deliveriesOf(key, ev.ID)[0]
		failed = append(failed, h.waitDelivery(key, d.ID, "failed", settled).ID)
	}
	test := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID + "/send_test_event", Key: key})
	if test.Status != http.StatusAccepted {
		t.Fatalf("send_test_event: %d %s", test.Status, test.Body)
	}
	testDelivery := decode[delivery](t, test)
	h.waitDelivery(key, testDelivery.ID, "failed", settled)

	path := "/v1/webhook_subscriptions/" + sub.ID + "/recover"
	since := map[string]any{"since": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}
	expectError(t, h.do(request{Method: http.MethodPost, Path: path, Key: key, Body: map[string]any{}}), http.StatusBadRequest, "parameter_missing")
	expectError(t, h.do(request{Method: http.MethodPost, Path: path, Key: otherKey, Body: since}), http.StatusNotFound, "resource_not_found")

	rcv.status.Store(http.StatusOK)
	r := h.do(request{Method: http.MethodPost, Path: path, Key: key, Body: since})
	if r.Status != http.StatusAccepted {
		t.Fatalf("recover: %d %s", r.Status, r.Body)
	}
	if got := r.JSON(t); got["deliveries"] != float64(2) || got["type"] != "webhook_recovery" {
		t.Fatalf("recover answered %s, want 2 deliveries replayed", r.Body)
	}
	for _, id := range failed {
		got := h.waitDelivery(key, id, "given its manual attempt", hasAttempts(4))
		if got.Status != "succeeded" || got.Attempts[3].Trigger != "manual" {
			t.Fatalf("delivery %s after recover: %+v", id, got)
		}
	}
	if got := h.waitDelivery(key, testDelivery.ID, "unchanged", settled); len(got.Attempts) != 3 {
		t.Fatalf("the test delivery was replayed: %d attempts", len(got.Attempts))
	}
}
