package main

import (
	"strings"
	"testing"

	"github.com/webhookd/webhookd/internal/store/storetest"
)

// TestPortalTransformationInTheBrowser: a person writes a transformation
// on the endpoint's page, simulates it and sees the line where it
// throws, fixes it and sees the input and the output side by side, saves
// it, sends a test event and sees, in the attempt, the body the
// transformation made, which the endpoint verified with the published
// Standard Webhooks library.
func TestPortalTransformationInTheBrowser(t *testing.T) {
	storetest.FullLane(t, "a browser test of the real binary")
	t.Parallel() // it measures no latency: the browser tests run beside each other
	e := newEngine(t)
	e.start()
	key := e.keysCreate("m_portal_shape")
	r := newReceiver(t)
	status, sub := e.call("POST", "http://"+e.public+"/v1/webhook_subscriptions", key,
		map[string]any{"url": r.URL + "/hook", "events": []string{"*"}})
	if status != 201 {
		t.Fatalf("create subscription: %d %v", status, sub)
	}
	r.mu.Lock()
	r.secret = sub["secret"].(string)
	r.mu.Unlock()
	subID := sub["id"].(string)

	b := newBrowser(t)
	tb := b.newTab(1280)
	defer tb.checkClean()
	tb.open("http://" + e.public + "/portal/#token=" + key)
	tb.see("Endpoints")
	tb.route("#/endpoints/" + subID)
	tb.see("Transformation", "None: deliveries are sent as they are.")

	tb.clearField("Code")
	tb.typeInto("Code", "function handler(webhook) {\nconst n = webhook.payload.nope.deeper;\nreturn webhook;\n}")
	tb.click("Simulate")
	tb.see("Line 2, column")

	tb.clearField("Code")
	tb.setField("Try it on the example of", "payout.paid")
	tb.typeInto("Code", "function handler(webhook) {\nwebhook.payload = { text: 'shaped ' + webhook.event_type };\nreturn webhook;\n}")
	tb.click("Simulate")
	tb.see("Input", "Output", `"text": "shaped payout.paid"`)
	tb.notSee("Line 2, column")
	tb.click("Save")
	tb.see("Transformation saved", "Version 1, running on every delivery.")

	tb.click("Send test event")
	tb.see("Test event sent.")
	detail := openNewestAttempts(t, tb, e, key, subID, func(d map[string]any) bool { return d["status"] == "succeeded" })
	tb.see("Body sent by attempt 1 (transformation version 1)")
	if got := tb.textOf(detail + `//details[contains(@class, "sent-body")]//pre`); !strings.Contains(got, `"shaped ping.test"`) {
		t.Fatalf("the attempt shows the body %q, want the transformed one", got)
	}
	if bodies, _, bad := r.received(); len(bodies) != 1 || bodies[0] != `{"text":"shaped ping.test"}` || bad != 0 {
		t.Fatalf("the endpoint verified %q (%d bad signatures)", bodies, bad)
	}
	tb.screenshot("endpoint-transformation")
}
