package admin_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/retry"
	"github.com/webhookd/webhookd/signer"
)

// newIngestHarness is the API with the real dispatcher as its Publisher
// (not running: these tests check what is stored, not what is sent).
func newIngestHarness(t *testing.T) *harness {
	t.Helper()
	return newHarness(t, withIngestPipeline(t))
}

// withIngestPipeline makes the real dispatcher the harness's Publisher
// and bounds payloads at 1 KiB; configure may change the dispatcher's
// Config, given the API's.
func withIngestPipeline(t testing.TB, configure ...func(*admin.Config, *dispatcher.Config)) func(*admin.Config) {
	return func(cfg *admin.Config) {
		sealer, err := signer.NewSealer(cfg.MasterKey)
		if err != nil {
			t.Fatal(err)
		}
		opt := cfg.Redis.(*redis.Client).Options()
		dc := dispatcher.Config{
			Store: cfg.Store, Redis: asynq.RedisClientOpt{Network: opt.Network, Addr: opt.Addr},
			Schedule: retry.Schedule{Delays: []time.Duration{time.Second}}, Sealer: sealer,
			DefaultAPIVersion: admin.DefaultVersion, EventTypes: cfg.EventTypes, MaxPayloadBytes: 1024,
			VersionUsable: cfg.Versions.Usable,
		}
		for _, c := range configure {
			c(cfg, &dc)
		}
		d, err := dispatcher.New(dc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		usePipeline(cfg, d)
	}
}

func TestIngestEventIsIdempotent(t *testing.T) {
	t.Parallel()
	h := newIngestHarness(t)
	h.merchant("m1")
	id := uuid.NewString()
	body := map[string]any{"id": id, "merchant_id": "m1", "type": "payout.paid",
		"payload": map[string]any{"id": "po_1", "amount": "10.00"}}

	first := h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/events", Body: body})
	if first.Status != http.StatusAccepted {
		t.Fatalf("first publish: %d %s, want 202", first.Status, first.Body)
	}
	ev := first.JSON(t)
	if ev["id"] != id || ev["type"] != "payout.paid" || ev["api_version"] != admin.DefaultVersion {
		t.Errorf("event %s", first.Body)
	}
	if p, _ := ev["payload"].(map[string]any); p["id"] != "po_1" {
		t.Errorf("payload %v", ev["payload"])
	}
	created, err := time.Parse(time.RFC3339Nano, ev["created_at"].(string))
	if err != nil || time.Since(created).Abs() > time.Minute {
		t.Errorf("created_at %v", ev["created_at"])
	}

	second := h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/events", Body: body})
	if second.Status != http.StatusOK || !bytes.Equal(second.Body, first.Body) {
		t.Fatalf("republish: %d %s, want 200 with the same event %s", second.Status, second.Body, first.Body)
	}
	var n int
	if err := h.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM events`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d events stored (%v), want 1", n, err)
	}

	// An unknown merchant is created, pinned to the latest version; a
	// named version is kept.
	other := h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/events", Body: map[string]any{
		"merchant_id": "new-merchant", "type": "deposit.received", "payload": map[string]any{}, "api_version": admin.DefaultVersion}})
	if other.Status != http.StatusAccepted {
		t.Fatalf("publish for a new merchant: %d %s", other.Status, other.Body)
	}
	if m, err := h.store.Merchants.GetMerchant(context.Background(), "new-merchant"); err != nil || m.APIVersion != admin.DefaultVersion {
		t.Errorf("new merchant %+v, %v", m, err)
	}
}

func TestIngestEventValidation(t *testing.T) {
	t.Parallel()
	h := newIngestHarness(t)
	valid := func() map[string]any {
		return map[string]any{"merchant_id": "m1", "type": "payout.paid", "payload": map[string]any{"a": 1}}
	}
	with := func(k string, v any) map[string]any {
		b := valid()
		if v == nil {
			delete(b, k)
		} else {
			b[k] = v
		}
		return b
	}
	cases := []struct {
		name   string
		body   any
		status int
		code   string
		param  string
	}{
		{"missing merchant", with("merchant_id", nil), 400, "parameter_missing", "merchant_id"},
		{"missing type", with("type", nil), 400, "parameter_missing", "type"},
		{"unknown type", with("type", "payout.exploded"), 400, "parameter_invalid", "type"},
		{"reserved ping.test", with("type", "ping.test"), 400, "parameter_invalid", "type"},
		{"missing payload", with("payload", nil), 400, "parameter_missing", "payload"},
		{"payload not an object", with("payload", []int{1}), 400, "parameter_invalid", "payload"},
		{"id not a uuid", with("id", "evt_123"), 400, "parameter_invalid", "id"},
		{"unknown api version", with("api_version", "1999-01-01"), 400, "parameter_invalid", "api_version"},
		{"unknown field", with("colour", "red"), 400, "validation_error", "colour"},
		{"payload over the limit", with("payload", map[string]any{"big": strings.Repeat("x", 1100)}), 413, "payload_too_large", "payload"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/events", Body: tc.body})
			m := expectError(t, r, tc.status, tc.code)
			if m["param"] != tc.param {
				t.Errorf("param %v, want %s", m["param"], tc.param)
			}
		})
	}
	var n int
	if err := h.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM events`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d events stored by refused requests", n)
	}
	// Without the ingest token nothing is accepted.
	r := h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/events", Body: valid(),
		Header: map[string]string{"Authorization": "Bearer wrong"}})
	expectError(t, r, http.StatusUnauthorized, "authentication_required")
}

func TestIngestBatch(t *testing.T) {
	t.Parallel()
	h := newIngestHarness(t)
	ids := []string{uuid.NewString(), uuid.NewString()}
	batch := map[string]any{"events": []map[string]any{
		{"id": ids[0], "merchant_id": "m1", "type": "payout.paid", "payload": map[string]any{"n": 1}},
		{"id": ids[1], "merchant_id": "m2", "type": "payout.failed", "payload": map[string]any{"n": 2}},
	}}
	r := h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/events/batch", Body: batch})
	if r.Status != http.StatusAccepted {
		t.Fatalf("batch: %d %s", r.Status, r.Body)
	}
	data, _ := r.JSON(t)["data"].([]any)
	if len(data) != 2 || data[0].(map[string]any)["id"] != ids[0] || data[1].(map[string]any)["id"] != ids[1] {
		t.Fatalf("batch answer %s", r.Body)
	}
	again := h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/events/batch", Body: batch})
	if again.Status != http.StatusOK || !bytes.Equal(again.Body, r.Body) {
		t.Fatalf("repeated batch: %d %s, want 200 with the same events", again.Status, again.Body)
	}
	bad := map[string]any{"events": []map[string]any{
		{"merchant_id": "m1", "type": "payout.paid", "payload": map[string]any{}},
		{"merchant_id": "m1", "type": "nope", "payload": map[string]any{}},
	}}
	m := expectError(t, h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/events/batch", Body: bad}),
		http.StatusBadRequest, "parameter_invalid")
	if m["param"] != "events[1].type" {
		t.Errorf("param %v, want events[1].type", m["param"])
	}
	var n int
	if err := h.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM events`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d events stored, want 2 (an invalid batch stores nothing)", n)
	}
}
