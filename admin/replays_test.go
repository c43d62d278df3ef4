package admin_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
)

// replay is the replay resource as a client decodes it.
type replay struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Status  string `json:"status"`
	Filters struct {
		Since           time.Time `json:"since"`
		Until           time.Time `json:"until"`
		SubscriptionID  *string   `json:"subscription_id"`
		EventType       *string   `json:"event_type"`
		Status          *string   `json:"status"`
		HTTPStatusClass *string   `json:"http_status_class"`
	} `json:"filters"`
	Matched     int        `json:"matched"`
	Attempted   int        `json:"attempted"`
	Succeeded   int        `json:"succeeded"`
	Failed      int        `json:"failed"`
	CreatedAt   time.Time  `json:"created_at"`
	CompletedAt *time.Time `json:"completed_at"`
}

const replayPath = "/v1/webhook_deliveries/replay"

// replayWindow is a replay body over the last hour, with extra fields.
func replayWindow(extra map[string]any) map[string]any {
	now := time.Now().UTC()
	b := map[string]any{"since": now.Add(-time.Hour).Format(time.RFC3339), "until": now.Format(time.RFC3339Nano)}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

// TestReplayRefusesBadInput: every field is read by allow-list; a bad
// value is a 400 naming it, in the spec's error format.
func TestReplayRefusesBadInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m1")
	otherSub := h.createSubscription(h.merchant("m2"), hookBody("https://example.com/m2"))
	now := time.Now().UTC()
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	for _, tc := range []struct {
		name        string
		body        any
		code, param string
	}{
		{"no since", map[string]any{"until": at(0)}, "parameter_missing", "since"},
		{"no until", map[string]any{"since": at(-time.Hour)}, "parameter_missing", "until"},
		{"since not a time", replayWindow(map[string]any{"since": "yesterday"}), "parameter_invalid", "since"},
		{"until a date only", replayWindow(map[string]any{"until": "2026-11-27"}), "parameter_invalid", "until"},
		{"until before since", map[string]any{"since": at(-time.Hour), "until": at(-2 * time.Hour)}, "parameter_invalid", "until"},
		{"until equal to since", map[string]any{"since": at(-time.Hour), "until": at(-time.Hour)}, "parameter_invalid", "until"},
		{"until in the future", map[string]any{"since": at(-time.Hour), "until": at(time.Hour)}, "parameter_invalid", "until"},
		{"since past the retention", map[string]any{"since": at(-31 * 24 * time.Hour), "until": at(-30 * 24 * time.Hour)}, "parameter_invalid", "since"},
		{"window over 7 days", map[string]any{"since": at(-8 * 24 * time.Hour), "until": at(0)}, "parameter_invalid", "until"},
		{"subscription not a uuid", replayWindow(map[string]any{"subscription_id": "sub_1"}), "parameter_invalid", "subscription_id"},
		{"another merchant's subscription", replayWindow(map[string]any{"subscription_id": otherSub.ID}), "parameter_invalid", "subscription_id"},
		{"unknown event type", replayWindow(map[string]any{"event_type": "payout.exploded"}), "parameter_invalid", "event_type"},
		{"status pending", replayWindow(map[string]any{"status": "pending"}), "parameter_invalid", "status"},
		{"status in capitals", replayWindow(map[string]any{"status": "FAILED"}), "parameter_invalid", "status"},
		{"class 3xx", replayWindow(map[string]any{"http_status_class": "3xx"}), "parameter_invalid", "http_status_class"},
		{"class a number", replayWindow(map[string]any{"http_status_class": 500}), "parameter_invalid", "http_status_class"},
		{"unknown field", replayWindow(map[string]any{"statuses": []string{"failed"}}), "validation_error", "statuses"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, dry := range []bool{false, true} {
				body := tc.body
				if m, ok := body.(map[string]any); ok && dry {
					c := map[string]any{"dry_run": true}
					for k, v := range m {
						c[k] = v
					}
					body = c
				}
				got := expectError(t, h.do(request{Method: http.MethodPost, Path: replayPath, Key: key, Body: body}),
					http.StatusBadRequest, tc.code)
				if got["param"] != tc.param {
					t.Fatalf("param = %v, want %s", got["param"], tc.param)
				}
			}
		})
	}
	expectError(t, h.do(request{Method: http.MethodGet, Path: "/v1/replays/not-a-uuid", Key: key}), http.StatusNotFound, "resource_not_found")
	expectError(t, h.do(request{Method: http.MethodGet, Path: "/v1/replays/" + uuid.NewString(), Key: key}), http.StatusNotFound, "resource_not_found")
	readOnly := h.merchant("m1", "webhooks:read")
	expectError(t, h.do(request{Method: http.MethodPost, Path: replayPath, Key: readOnly, Body: replayWindow(nil)}), http.StatusForbidden, "insufficient_scope")
}

// TestReplayOneAtATimeAndIdempotent: the count before confirming, a
// replay answered 202 and readable by its merchant alone, the same
// Idempotency-Key answering the same replay, and a second replay while
// one runs refused with 409. No worker runs here, so the replay stays
// running.
func TestReplayOneAtATimeAndIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t)
	key := h.merchant("m1")
	sub := h.createSubscription(key, hookBody("https://example.com/m1"))
	for range 3 {
		if _, _, _, err := h.store.Events.CreateEvent(ctx, store.Event{ID: uuid.Must(uuid.NewV7()), MerchantID: "m1",
			Type: "payout.paid", APIVersion: "2026-05-01", Body: []byte(`{}`), CreatedAt: time.Now().Add(-time.Minute)},
			store.Audience{}); err != nil {
			t.Fatal(err)
		}
	}
	body := replayWindow(map[string]any{"subscription_id": sub.ID, "event_type": "payout.paid"})

	dry := replayWindow(map[string]any{"subscription_id": sub.ID, "dry_run": true})
	r := h.do(request{Method: http.MethodPost, Path: replayPath, Key: key, Body: dry})
	if got := r.JSON(t); r.Status != http.StatusOK || got["matched"] != float64(3) || got["type"] != "webhook_replay_estimate" {
		t.Fatalf("dry run: %d %s", r.Status, r.Body)
	}
	if none := h.do(request{Method: http.MethodPost, Path: replayPath, Key: key,
		Body: replayWindow(map[string]any{"status": "failed", "dry_run": true})}).JSON(t); none["matched"] != float64(0) {
		t.Fatalf("dry run of failed deliveries: %v, want 0", none)
	}

	idem := map[string]string{"Idempotency-Key": "replay-" + uuid.NewString()}
	r = h.do(request{Method: http.MethodPost, Path: replayPath, Key: key, Body: body, Header: idem})
	if r.Status != http.StatusAccepted {
		t.Fatalf("replay: %d %s", r.Status, r.Body)
	}
	rp := decode[replay](t, r)
	if rp.Type != "webhook_replay" || rp.Status != "running" || rp.Matched != 3 || rp.CompletedAt != nil ||
		rp.Filters.SubscriptionID == nil || *rp.Filters.SubscriptionID != sub.ID || rp.Filters.Status != nil {
		t.Fatalf("replay = %s", r.Body)
	}
	again := h.do(request{Method: http.MethodPost, Path: replayPath, Key: key, Body: body, Header: idem})
	if again.Status != http.StatusAccepted || decode[replay](t, again).ID != rp.ID {
		t.Fatalf("the same key again: %d %s, want the same replay", again.Status, again.Body)
	}
	expectError(t, h.do(request{Method: http.MethodPost, Path: replayPath, Key: key, Body: body}), http.StatusConflict, "conflict")

	got := h.do(request{Method: http.MethodGet, Path: "/v1/replays/" + rp.ID, Key: key})
	if got.Status != http.StatusOK || decode[replay](t, got).ID != rp.ID {
		t.Fatalf("GET: %d %s", got.Status, got.Body)
	}
	other := h.merchant("m2")
	expectError(t, h.do(request{Method: http.MethodGet, Path: "/v1/replays/" + rp.ID, Key: other}), http.StatusNotFound, "resource_not_found")
	// Another merchant replays at the same time.
	if r := h.do(request{Method: http.MethodPost, Path: replayPath, Key: other, Body: replayWindow(nil)}); r.Status != http.StatusAccepted {
		t.Fatalf("another merchant's replay: %d %s", r.Status, r.Body)
	}
}

// TestReplayAttemptsWhatItMatches: through the real pipeline, a replay of
// the failed deliveries of one subscription makes one manual attempt of
// each, none of the others, and reports them counted.
func TestReplayAttemptsWhatItMatches(t *testing.T) {
	t.Parallel()
	h, _ := newPipelineHarness(t)
	key := h.merchant("m1")
	failing := newHookReceiver(t, http.StatusInternalServerError)
	healthy := newHookReceiver(t, http.StatusOK)
	sub := h.createSubscription(key, hookBody(failing.URL+"/hooks", "payout.paid"))
	h.createSubscription(key, hookBody(healthy.URL+"/hooks", "payout.paid"))
	var failed []string
	var succeeded string
	for range 3 {
		ev := h.publish("m1", "payout.paid", `{"id":"po_1"}`)
		for _, d := range h.deliveriesOf(key, ev.ID) {
			got := h.waitDelivery(key, d.ID, "settled", settled)
			if d.SubscriptionID == sub.ID {
				failed = append(failed, got.ID)
			} else {
				succeeded = got.ID
			}
		}
	}
	failing.status.Store(http.StatusOK)
	r := h.do(request{Method: http.MethodPost, Path: replayPath, Key: key, Body: replayWindow(map[string]any{
		"status": "failed", "http_status_class": "5xx"})})
	if r.Status != http.StatusAccepted {
		t.Fatalf("replay: %d %s", r.Status, r.Body)
	}
	rp := decode[replay](t, r)
	if rp.Matched != 3 {
		t.Fatalf("matched %d, want 3", rp.Matched)
	}
	var done replay
	if !eventually(20*time.Second, func() bool {
		done = decode[replay](t, h.do(request{Method: http.MethodGet, Path: "/v1/replays/" + rp.ID, Key: key}))
		return done.CompletedAt != nil
	}) {
		t.Fatalf("the replay did not complete: %+v", done)
	}
	if done.Status != "completed" || done.Attempted != 3 || done.Succeeded != 3 || done.Failed != 0 {
		t.Fatalf("completed replay = %+v", done)
	}
	for _, id := range failed {
		got := h.waitDelivery(key, id, "settled", settled)
		manual := 0
		for _, a := range got.Attempts {
			if a.Trigger == "manual" {
				manual++
			}
		}
		if manual != 1 || got.Status != "succeeded" {
			t.Fatalf("delivery %s: %d manual attempts, %s", id, manual, got.Status)
		}
	}
	if got := h.waitDelivery(key, succeeded, "settled", settled); len(got.Attempts) != 1 {
		t.Fatalf("a delivery the filters leave out was attempted again: %+v", got)
	}
}
