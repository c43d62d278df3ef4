package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store/storetest"
)

// slackShape reshapes a payout event into a Slack incoming webhook's
// body, cancels what is not a payout, and adds a header.
const slackShape = `function handler(webhook) {
  if (!webhook.event_type.startsWith('payout.')) { webhook.cancel = true; return webhook; }
  const p = webhook.payload;
  webhook.payload = { text: 'Payout ' + p.id + ' is ' + p.status };
  webhook.headers['x-shaped-by'] = 'webhookd';
  return webhook;
}`

// brokenShape throws on every delivery, at line 2.
const brokenShape = `function handler(webhook) {
  throw new Error('not yet');
}`

// received is what the receiver verified so far: the bodies, and the
// x-shaped-by header each came with.
func (r *receiver) received() (bodies, shaped []string, bad int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.headers {
		shaped = append(shaped, h.Get("X-Shaped-By"))
	}
	return append([]string(nil), r.bodies...), shaped, r.bad
}

// TestTransformationEndToEnd runs the real binary: a transformation
// reshapes a payout into a Slack body, which the receiver verifies with
// the published Standard Webhooks library over the body it got; an event
// it cancels ends skipped, nothing sent; a broken script fails its
// attempts with transformation_error and the line, and once fixed, the
// retry is delivered; the simulate route answers each outcome.
func TestTransformationEndToEnd(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	t.Parallel() // it measures no latency
	e := newEngine(t, "WEBHOOKD_RETRY_SCHEDULE=300ms,300ms,300ms,300ms,300ms,300ms")
	e.start()
	key := e.keysCreate("m_shape")
	r := newReceiver(t)
	api := "http://" + e.public + "/v1"
	status, sub := e.call("POST", api+"/webhook_subscriptions", key, map[string]any{
		"url": r.URL + "/slack", "events": []string{"*"},
		"transformation": map[string]any{"code": slackShape}})
	if status != 201 {
		t.Fatalf("create with a transformation: %d %v", status, sub)
	}
	r.mu.Lock()
	r.secret = sub["secret"].(string)
	r.mu.Unlock()
	subID := sub["id"].(string)
	tr, _ := sub["transformation"].(map[string]any)
	if tr == nil || tr["version"] != float64(1) || tr["enabled"] != true {
		t.Fatalf("transformation read back = %v", sub["transformation"])
	}

	// Refused at save: code that does not compile, naming the field.
	status, refused := e.call("POST", api+"/webhook_subscriptions/"+subID, key,
		map[string]any{"transformation": map[string]any{"code": "function handler(w) { return w"}})
	if status != 400 || refused["param"] != "transformation.code" {
		t.Fatalf("a syntax error saved: %d %v", status, refused)
	}

	// Transformed, signed over what was sent.
	payout := e.publish("m_shape")
	if !eventually(15*time.Second, func() bool { b, _, _ := r.received(); return len(b) == 1 }) {
		_, _, bad := r.received()
		t.Fatalf("the transformed delivery did not arrive verified (%d bad signatures)\nlogs:\n%s", bad, tail(e.logs))
	}
	bodies, shaped, _ := r.received()
	if bodies[0] != `{"text":"Payout po_1 is paid"}` || shaped[0] != "webhookd" {
		t.Fatalf("received %q with x-shaped-by %q", bodies[0], shaped[0])
	}
	// The receiver has the request before the attempt's record commits
	// (a loaded CI run read the delivery with no attempt yet).
	var attempts []any
	if !eventually(15*time.Second, func() bool {
		attempts, _ = e.deliveryOf(key, payout)["attempts"].([]any)
		return len(attempts) > 0
	}) {
		t.Fatalf("the transformed delivery's attempt was never recorded")
	}
	first := attempts[0].(map[string]any)
	if first["transformation_version"] != float64(1) || first["request_body"] != bodies[0] {
		t.Fatalf("the attempt records %v / %v, want version 1 and the body sent", first["transformation_version"], first["request_body"])
	}

	// Cancelled: skipped, nothing sent.
	status, ev := e.call("POST", "http://"+e.internal+"/internal/v1/events", e2eToken,
		map[string]any{"merchant_id": "m_shape", "type": "deposit.received", "payload": map[string]any{"id": "dep_1"}})
	if status != 202 {
		t.Fatalf("publish: %d %v", status, ev)
	}
	if !eventually(15*time.Second, func() bool { return e.deliveryOf(key, ev["id"].(string))["status"] == "skipped" }) {
		t.Fatalf("the cancelled delivery = %v, want skipped", e.deliveryOf(key, ev["id"].(string)))
	}
	cancelled := e.deliveryOf(key, ev["id"].(string))["attempts"].([]any)[0].(map[string]any)
	if cancelled["status"] != "skipped" || cancelled["error"] != "transformation_cancelled" {
		t.Fatalf("the cancelled attempt = %v", cancelled)
	}
	if b, _, _ := r.received(); len(b) != 1 {
		t.Fatalf("the receiver got %d requests, want only the payout's", len(b))
	}

	// Broken, then fixed: the retry is delivered.
	if status, body := e.call("POST", api+"/webhook_subscriptions/"+subID, key,
		map[string]any{"transformation": map[string]any{"code": brokenShape}}); status != 200 {
		t.Fatalf("save the broken code: %d %v", status, body)
	}
	broken := e.publish("m_shape")
	if !eventually(15*time.Second, func() bool {
		as, _ := e.deliveryOf(key, broken)["attempts"].([]any)
		return len(as) >= 1
	}) {
		t.Fatal("no attempt of the broken transformation recorded")
	}
	failed := e.deliveryOf(key, broken)["attempts"].([]any)[0].(map[string]any)
	if failed["error"] != "transformation_error" || failed["transformation_version"] != float64(2) {
		t.Fatalf("the broken transformation's attempt = %v", failed)
	}
	if said, _ := failed["response_body"].(string); !containsAll(said, "not yet", "line 2") {
		t.Fatalf("the attempt says %q, want the error and its line", said)
	}
	if status, body := e.call("POST", api+"/webhook_subscriptions/"+subID, key,
		map[string]any{"transformation": map[string]any{"code": slackShape}}); status != 200 {
		t.Fatalf("save the fixed code: %d %v", status, body)
	}
	if !eventually(15*time.Second, func() bool { return e.deliveryOf(key, broken)["status"] == "succeeded" }) {
		t.Fatalf("the retry after the fix = %v", e.deliveryOf(key, broken))
	}
	if b, _, bad := r.received(); len(b) != 2 || bad != 0 {
		t.Fatalf("received %d verified, %d bad; want 2 and 0", len(b), bad)
	}

	// Simulate: each outcome, nothing sent.
	for _, c := range []struct {
		name string
		body map[string]any
		want func(map[string]any) bool
	}{
		{"the saved code on an event of the merchant's", map[string]any{"event_id": payout},
			func(s map[string]any) bool {
				out, _ := s["output"].(map[string]any)
				return s["outcome"] == "transformed" && s["error"] == nil && out != nil && fmt.Sprint(out["payload"]) == "map[text:Payout po_1 is paid]"
			}},
		{"unsaved code on a type's example, cancelled", map[string]any{"event_type": "deposit.received"},
			func(s map[string]any) bool { return s["outcome"] == "cancelled" }},
		{"unsaved code that throws", map[string]any{"event_type": "payout.paid", "code": brokenShape},
			func(s map[string]any) bool {
				e, _ := s["error"].(map[string]any)
				return s["outcome"] == "failed" && e != nil && e["line"] == float64(2) && e["kind"] == "thrown" && s["output"] == nil
			}},
	} {
		status, s := e.call("POST", api+"/webhook_subscriptions/"+subID+"/transformation/simulate", key, c.body)
		if status != 200 || !c.want(s) {
			t.Errorf("simulate %s: %d %v", c.name, status, s)
		}
	}
	if b, _, _ := r.received(); len(b) != 2 {
		t.Fatalf("simulations sent %d requests", len(b)-2)
	}
}

// deliveryOf reads the merchant's one delivery of event id.
func (e *engine) deliveryOf(key, eventID string) map[string]any {
	e.t.Helper()
	status, page := e.call("GET", "http://"+e.public+"/v1/webhook_deliveries?event_id="+eventID, key, nil)
	data, _ := page["data"].([]any)
	if status != 200 || len(data) != 1 {
		return map[string]any{"status": fmt.Sprintf("no delivery (%d %v)", status, page)}
	}
	id := data[0].(map[string]any)["id"].(string)
	_, d := e.call("GET", "http://"+e.public+"/v1/webhook_deliveries/"+id, key, nil)
	return d
}

// containsAll tells whether s holds every one of parts.
func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(strings.ToLower(s), strings.ToLower(p)) {
			return false
		}
	}
	return true
}

// TestTransformationInABatch: a batched subscription's transformation
// reshapes each member of the batch; the batch of the transformed bodies
// is signed as one request, which the receiver verifies with the
// published Standard Webhooks library; a member the transformation
// cancels leaves the batch and ends skipped.
func TestTransformationInABatch(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	t.Parallel() // it measures no latency
	e := newEngine(t)
	e.start()
	key := e.keysCreate("m_shape_batch")
	r := newReceiver(t)
	status, sub := e.call("POST", "http://"+e.public+"/v1/webhook_subscriptions", key, map[string]any{
		"url": r.URL + "/batch", "events": []string{"*"}, "batch": map[string]any{"max_size": 3, "max_wait_ms": 2000},
		"transformation": map[string]any{"code": `function handler(webhook) {
  if (webhook.payload.id === 'po_skip') { webhook.cancel = true; return webhook; }
  webhook.payload = { payout: webhook.payload.id };
  return webhook;
}`}})
	if status != 201 {
		t.Fatalf("create: %d %v", status, sub)
	}
	r.mu.Lock()
	r.secret = sub["secret"].(string)
	r.mu.Unlock()
	var ids []string
	for _, payout := range []string{"po_a", "po_skip", "po_b"} {
		status, ev := e.call("POST", "http://"+e.internal+"/internal/v1/events", e2eToken,
			map[string]any{"merchant_id": "m_shape_batch", "type": "payout.paid", "payload": map[string]any{"id": payout}})
		if status != 202 {
			t.Fatalf("publish: %d %v", status, ev)
		}
		ids = append(ids, ev["id"].(string))
	}
	if !eventually(20*time.Second, func() bool { b, _, _ := r.received(); return len(b) >= 1 }) {
		t.Fatalf("no batch arrived verified\nlogs:\n%s", tail(e.logs))
	}
	if !eventually(10*time.Second, func() bool { return e.deliveryOf(key, ids[1])["status"] == "skipped" }) {
		t.Fatalf("the cancelled member = %v, want skipped", e.deliveryOf(key, ids[1]))
	}
	bodies, _, bad := r.received()
	var got []string
	for _, b := range bodies {
		var batch struct {
			Data []struct {
				Payout string `json:"payout"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(b), &batch); err != nil {
			t.Fatalf("a batch %q: %v", b, err)
		}
		for _, d := range batch.Data {
			got = append(got, d.Payout)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"po_a", "po_b"}) || bad != 0 {
		t.Fatalf("the batches carried %v (%d bad signatures), want po_a and po_b transformed", got, bad)
	}
}
