package main

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store/storetest"
)

// replayHook is a receiver that counts the requests of each webhook-id
// and answers 500 while failing is set, 204 otherwise.
type replayHook struct {
	*httptest.Server
	failing atomic.Bool
	mu      sync.Mutex
	count   map[string]int
}

func newReplayHook(t *testing.T) *replayHook {
	c := &replayHook{count: map[string]int{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.count[r.Header.Get("webhook-id")]++
		c.mu.Unlock()
		if c.failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *replayHook) of(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count[id]
}

// TestReplayAttemptsExactlyTheMatchingDeliveries: a replay of a window
// with every filter attempts each matching delivery once (its receiver
// counts one request more per webhook-id), and nothing else; another
// merchant's deliveries keep arriving while it runs.
func TestReplayAttemptsExactlyTheMatchingDeliveries(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	e := newEngine(t)
	failing, other, calm := newReplayHook(t), newReplayHook(t), newArrivals(t)
	failing.failing.Store(true)
	e.start()
	key := e.keysCreate("m_replay")
	status, sub := e.call("POST", "http://"+e.public+"/v1/webhook_subscriptions", key,
		map[string]any{"url": failing.URL + "/hook", "events": []string{"*"}})
	if status != http.StatusCreated {
		t.Fatalf("subscribe: %d %v", status, sub)
	}
	subID := sub["id"].(string)
	e.subscribeURL(key, other.URL+"/hook")
	e.subscribeURL(e.keysCreate("m_calm"), calm.URL+"/hook")

	since := time.Now().Add(-time.Second).UTC()
	publish := func(typ string) string {
		status, ev := e.call("POST", "http://"+e.internal+"/internal/v1/events", e2eToken,
			map[string]any{"merchant_id": "m_replay", "type": typ, "payload": map[string]any{"id": "po_1"}})
		if status != http.StatusAccepted {
			t.Fatalf("publish: %d %v", status, ev)
		}
		return ev["id"].(string)
	}
	var matching, leftOut []string
	for range 10 {
		matching = append(matching, publish("payout.paid"))
	}
	for range 2 {
		leftOut = append(leftOut, publish("payout.failed"))
	}
	// Every attempt of the schedule (three) fails, and the other
	// subscription's delivery succeeds.
	all := append(append([]string(nil), matching...), leftOut...)
	if !eventually(20*time.Second, func() bool {
		for _, id := range all {
			if failing.of(id) < 3 || other.of(id) < 1 {
				return false
			}
		}
		status, list := e.call("GET", "http://"+e.public+"/v1/webhook_deliveries?status=failed&subscription_id="+subID+"&limit=100", key, nil)
		return status == http.StatusOK && len(list["data"].([]any)) == len(all)
	}) {
		t.Fatal("the deliveries did not fail for good")
	}
	failing.failing.Store(false)

	status, rp := e.call("POST", "http://"+e.public+"/v1/webhook_deliveries/replay", key, map[string]any{
		"since": since.Format(time.RFC3339Nano), "until": time.Now().UTC().Format(time.RFC3339Nano),
		"subscription_id": subID, "event_type": "payout.paid", "status": "failed", "http_status_class": "5xx"})
	if status != http.StatusAccepted || rp["matched"] != float64(len(matching)) {
		t.Fatalf("replay: %d %v", status, rp)
	}
	// Another merchant publishes while the replay runs.
	p99 := calm.p99(t, e.publishSteadily("m_calm", 20, 2*time.Second), 30*time.Second)
	t.Logf("m_calm publish → arrival p99 during the replay: %v", p99)
	if p99 > 5*time.Second {
		t.Errorf("m_calm's p99 during the replay %v, more than 5 s", p99)
	}

	var done map[string]any
	if !eventually(20*time.Second, func() bool {
		_, done = e.call("GET", "http://"+e.public+"/v1/replays/"+rp["id"].(string), key, nil)
		return done["completed_at"] != nil
	}) {
		t.Fatalf("the replay did not complete: %v", done)
	}
	if done["attempted"] != float64(len(matching)) || done["succeeded"] != float64(len(matching)) || done["failed"] != float64(0) {
		t.Fatalf("completed replay = %v", done)
	}
	for _, id := range matching {
		if n := failing.of(id); n != 4 {
			t.Errorf("event %s: %d requests to the replayed subscription, want 3 scheduled and 1 replayed", id, n)
		}
	}
	for _, id := range leftOut {
		if n := failing.of(id); n != 3 {
			t.Errorf("event %s of another type: %d requests, want its 3 scheduled alone", id, n)
		}
	}
	for _, id := range all {
		if n := other.of(id); n != 1 {
			t.Errorf("event %s: %d requests to the other subscription, want 1", id, n)
		}
	}
}
