package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store/storetest"
)

// TestPortalReplayInTheBrowser: a person opens "Replay failed deliveries
// in a time range", chooses the endpoint, sees how many deliveries would
// get another attempt, confirms, and watches the replay complete; the
// receiver gets each of them once more.
func TestPortalReplayInTheBrowser(t *testing.T) {
	storetest.FullLane(t, "a browser test of the real binary")
	t.Parallel() // it measures no latency: the browser tests run beside each other
	e := newEngine(t, "WEBHOOKD_RETRY_SCHEDULE=100ms")
	hook := newReplayHook(t)
	hook.failing.Store(true)
	e.start()
	key := e.keysCreate("m_portal_replay")
	status, sub := e.call("POST", "http://"+e.public+"/v1/webhook_subscriptions", key,
		map[string]any{"url": hook.URL + "/hook", "events": []string{"*"}, "description": "Orders service"})
	if status != http.StatusCreated {
		t.Fatalf("subscribe: %d %v", status, sub)
	}
	subID := sub["id"].(string)
	var ids []string
	for range 3 {
		ids = append(ids, e.publishRaw("m_portal_replay", "payout.paid", `{"id":"po_1"}`))
	}
	if !eventually(20*time.Second, func() bool {
		status, list := e.call("GET", "http://"+e.public+"/v1/webhook_deliveries?status=failed&limit=100", key, nil)
		return status == http.StatusOK && len(list["data"].([]any)) == len(ids)
	}) {
		t.Fatal("the deliveries did not fail for good")
	}
	hook.failing.Store(false)

	b := newBrowser(t)
	tb := b.newTab(1280)
	tb.open("http://" + e.public + "/portal/#token=" + key)
	tb.see("Endpoints")
	tb.click("Replay")
	tb.see("Replay failed deliveries in a time range", "From", "To", "Endpoint", "Delivery status", "Last answer")
	tb.setField("Endpoint", subID)
	tb.click("Count deliveries")
	tb.see("3 deliveries will get another attempt.")
	tb.click("Replay 3 deliveries")
	tb.see("Replay complete", "3 of 3 deliveries attempted: 3 succeeded, 0 failed.")
	for _, id := range ids {
		if n := hook.of(id); n != 3 {
			t.Errorf("event %s: %d requests, want 2 scheduled and 1 replayed", id, n)
		}
	}
	// A second count finds nothing left to replay among the failed.
	tb.click("Count deliveries")
	tb.see("No delivery in this time range matches these filters.")
	tb.checkClean()
}
