package main

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store/storetest"
)

// TestScheduledEventsEndToEnd publishes three scheduled events to one
// endpoint of the real binary: the first is delivered within a second of
// its deliver_at (the receiver's clock against deliver_at); the second,
// cancelled before its time, never is: the third, due after it on the same
// subscription, arrives, while the cancelled one reads cancelled with no
// attempt. The latency metric counts from deliver_at.
func TestScheduledEventsEndToEnd(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	e := newEngine(t)
	e.start()
	key := e.keysCreate("m_sched")
	rcv := newControlledReceiver(t, nil)
	e.subscribeWith(key, rcv, nil)

	start := time.Now().UTC().Truncate(time.Millisecond)
	publish := func(after time.Duration) (string, time.Time) {
		t.Helper()
		at := start.Add(after)
		status, ev := e.call(http.MethodPost, "http://"+e.internal+"/internal/v1/events", e2eToken, map[string]any{
			"merchant_id": "m_sched", "type": "payout.paid", "payload": map[string]any{"id": "po_1"},
			"deliver_at": at.Format(time.RFC3339Nano)})
		if status != http.StatusAccepted {
			t.Fatalf("publish: %d %v", status, ev)
		}
		return ev["id"].(string), at
	}
	onTime, onTimeAt := publish(2 * time.Second)
	cancelled, _ := publish(2500 * time.Millisecond)
	sentinel, _ := publish(3 * time.Second)
	deliveryOf := func(eventID string) map[string]any {
		t.Helper()
		status, page := e.call(http.MethodGet, "http://"+e.public+"/v1/webhook_deliveries?"+url.Values{"event_id": {eventID}}.Encode(), key, nil)
		data, _ := page["data"].([]any)
		if status != http.StatusOK || len(data) != 1 {
			t.Fatalf("deliveries of %s: %d %v", eventID, status, page)
		}
		return data[0].(map[string]any)
	}
	if d := deliveryOf(cancelled); d["status"] != "scheduled" {
		t.Fatalf("before its time the delivery reads %v, want scheduled", d["status"])
	}
	if status, body := e.call(http.MethodPost, "http://"+e.public+"/v1/events/"+cancelled+"/cancel", key, nil); status != http.StatusOK {
		t.Fatalf("cancel: %d %v", status, body)
	}

	var arrived map[string]time.Time
	if !eventually(15*time.Second, func() bool {
		arrived = map[string]time.Time{}
		for _, a := range rcv.arrivals() {
			arrived[a.id] = a.at
		}
		_, ok := arrived[sentinel]
		return ok
	}) {
		t.Fatalf("the sentinel event was not delivered; arrivals %v", arrived)
	}
	got, ok := arrived[onTime]
	if late := got.Sub(onTimeAt); !ok || late < 0 || late > time.Second {
		t.Errorf("the scheduled event arrived %v after its deliver_at (delivered %v), want within 1 s, not before", late, ok)
	}
	if _, ok := arrived[cancelled]; ok {
		t.Errorf("the cancelled event was delivered")
	}
	d := deliveryOf(cancelled)
	if attempts, _ := d["attempts"].([]any); d["status"] != "cancelled" || d["attempt_count"] != 0.0 || len(attempts) != 0 {
		t.Errorf("the cancelled delivery: status %v, %v attempts %v", d["status"], d["attempt_count"], attempts)
	}
	// Their latency counts from deliver_at, not from publication (2 and 3 s
	// before).
	var series map[string]float64
	eventually(10*time.Second, func() bool {
		_, series = scrape(t, "http://"+e.internal+"/metrics")
		return series["webhookd_delivery_latency_seconds_count"] >= 2
	})
	if n, sum := series["webhookd_delivery_latency_seconds_count"], series["webhookd_delivery_latency_seconds_sum"]; n != 2 || sum > 2 {
		t.Errorf("delivery latency: %v observations summing to %v s, want 2 counted from deliver_at", n, sum)
	}
	t.Logf("delivered %v after deliver_at", got.Sub(onTimeAt))
}
