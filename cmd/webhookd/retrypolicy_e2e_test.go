package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store/storetest"
)

// TestSubscriptionRetryPolicyEndToEnd: a subscription with its own retry
// policy (["1s", "2s"], a 1 s timeout) is attempted on it, not on the
// engine's (a single delay of an hour, a 5 s timeout), against a receiver
// that never answers: three attempts, each ended by the policy's timeout,
// the gaps between them the policy's delays within their jitter, as the
// attempt log's timestamps show. The API shows the policy and refuses
// a bad delay naming it.
func TestSubscriptionRetryPolicyEndToEnd(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	e := newEngine(t, "WEBHOOKD_RETRY_SCHEDULE=1h", "WEBHOOKD_DELIVERY_TIMEOUT=5s")
	e.start()
	key := e.keysCreate("m_retry")
	var hits atomic.Int32
	done := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The receiver under test hangs: it answers only once the
		// attempt has given up, or the test is over.
		hits.Add(1)
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(done) }) // before Close: cleanups run last first
	subs := "http://" + e.public + "/v1/webhook_subscriptions"

	status, refused := e.call("POST", subs, key, map[string]any{"url": hang.URL, "events": []string{"*"},
		"retry_policy": map[string]any{"schedule": []string{"1s", "1.5s"}}})
	if status != 400 || refused["param"] != "retry_policy.schedule[1]" {
		t.Fatalf("a fractional delay: %d %v, want 400 naming retry_policy.schedule[1]", status, refused)
	}
	status, sub := e.call("POST", subs, key, map[string]any{"url": hang.URL, "events": []string{"payout.paid"},
		"retry_policy": map[string]any{"schedule": []string{"1s", "2s"}, "timeout_seconds": 1}})
	if status != 201 || fmt.Sprint(sub["retry_policy"]) != "map[schedule:[1s 2s] timeout_seconds:1]" {
		t.Fatalf("create: %d %v", status, sub["retry_policy"])
	}
	if status, read := e.call("GET", subs+"/"+sub["id"].(string), key, nil); status != 200 || fmt.Sprint(read["retry_policy"]) != fmt.Sprint(sub["retry_policy"]) {
		t.Fatalf("read: %d %v", status, read["retry_policy"])
	}

	id := e.publish("m_retry")
	var del map[string]any
	waitFor(t, "the delivery to fail after the policy's three attempts", 15*time.Second, func() bool {
		_, list := e.call("GET", "http://"+e.public+"/v1/webhook_deliveries?event_id="+id, key, nil)
		data, _ := list["data"].([]any)
		if len(data) != 1 {
			return false
		}
		_, del = e.call("GET", "http://"+e.public+"/v1/webhook_deliveries/"+data[0].(map[string]any)["id"].(string), key, nil)
		return del["status"] == "failed"
	})
	attempts, _ := del["attempts"].([]any)
	if len(attempts) != 3 || del["attempt_count"] != 3.0 {
		t.Fatalf("the delivery failed after %d attempts (count %v), want 3: %v", len(attempts), del["attempt_count"], del)
	}
	delays := []time.Duration{time.Second, 2 * time.Second}
	var prevEnd time.Time
	for i, raw := range attempts {
		a := raw.(map[string]any)
		at, err := time.Parse(time.RFC3339Nano, a["attempted_at"].(string))
		if err != nil {
			t.Fatal(err)
		}
		took := time.Duration(a["duration_ms"].(float64)) * time.Millisecond
		if a["error"] != "timeout" || took < 900*time.Millisecond || took > 2500*time.Millisecond {
			t.Errorf("attempt %d: error %v after %v, want a timeout after the policy's 1 s (the engine's is 5 s)", i+1, a["error"], took)
		}
		if i > 0 {
			// Due a jittered delay after the previous attempt ended; the
			// workers pick it up within moments.
			gap, d := at.Sub(prevEnd), delays[i-1]
			if gap < d*9/10-10*time.Millisecond || gap > d*11/10+time.Second {
				t.Errorf("attempt %d started %v after attempt %d ended, want the policy's %v ±10 %%", i+1, gap, i, d)
			}
		}
		prevEnd = at.Add(took)
	}
	if n := hits.Load(); n != 3 {
		t.Errorf("the receiver was called %d times, want 3", n)
	}
}
