package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store/storetest"
)

// TestOperationalEventsEndToEnd: the merchant disables subscription A
// through the API, and its other subscription B receives, signed,
// webhook_endpoint.disabled about A within seconds; enabling A again
// sends webhook_endpoint.enabled; A, subscribed to both types, receives
// neither (they are about itself).
func TestOperationalEventsEndToEnd(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	t.Parallel()
	e := newEngine(t)
	e.start()
	key := e.keysCreate("m_ops")
	a, b := newReceiver(t), newReceiver(t)
	ops := []string{"webhook_endpoint.disabled", "webhook_endpoint.enabled"}
	status, subA := e.call(http.MethodPost, "http://"+e.public+"/v1/webhook_subscriptions", key, map[string]any{
		"url": a.URL + "/hook", "events": append([]string{"payout.paid"}, ops...)})
	if status != http.StatusCreated {
		t.Fatalf("subscribe A: %d %v", status, subA)
	}
	aID := subA["id"].(string)
	status, sub := e.call(http.MethodPost, "http://"+e.public+"/v1/webhook_subscriptions", key, map[string]any{
		"url": b.URL + "/hook", "events": ops})
	if status != http.StatusCreated {
		t.Fatalf("subscribe B: %d %v", status, sub)
	}
	b.mu.Lock()
	b.secret, _ = sub["secret"].(string)
	b.mu.Unlock()

	types := func() []string {
		bodies, _, _ := b.received()
		var out []string
		for _, body := range bodies {
			var env struct {
				Type    string         `json:"type"`
				Payload map[string]any `json:"payload"`
			}
			if err := json.Unmarshal([]byte(body), &env); err != nil || env.Payload["subscription_id"] != aID {
				t.Fatalf("B got %s (%v), want an event about A", body, err)
			}
			out = append(out, env.Type)
		}
		return out
	}
	for _, step := range []struct{ status, want string }{
		{"disabled", "webhook_endpoint.disabled"},
		{"enabled", "webhook_endpoint.enabled"},
	} {
		started := time.Now()
		if status, body := e.call(http.MethodPost, "http://"+e.public+"/v1/webhook_subscriptions/"+aID, key,
			map[string]any{"status": step.status}); status != http.StatusOK {
			t.Fatalf("set A %s: %d %v", step.status, status, body)
		}
		waitFor(t, step.want+" at B", 5*time.Second, func() bool {
			got := types()
			return len(got) > 0 && got[len(got)-1] == step.want
		})
		t.Logf("%s at B %s after the change", step.want, time.Since(started).Round(time.Millisecond))
	}
	if got := types(); strings.Join(got, ",") != "webhook_endpoint.disabled,webhook_endpoint.enabled" {
		t.Errorf("B got %v, want one event per change", got)
	}
	if bodies, _, bad := a.received(); len(bodies) != 0 || bad != 0 {
		t.Errorf("A got %d events about itself (%d badly signed)", len(bodies), bad)
	}
}
