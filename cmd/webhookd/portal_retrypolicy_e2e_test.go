package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/internal/store/storetest"
)

// TestPortalRetryPolicyInTheBrowser: the endpoint form sets a retry
// policy (a schedule as a list, a timeout); a delay the API refuses shows
// its refusal beside the schedule; the endpoint's page shows the policy,
// the API holds it, and clearing both fields returns to the engine's.
func TestPortalRetryPolicyInTheBrowser(t *testing.T) {
	storetest.FullLane(t, "a browser test of the real binary")
	t.Parallel() // it measures no latency: the browser tests run beside each other
	e := newEngine(t)
	e.start()
	key := e.keysCreate("m_retry_portal")
	b := newBrowser(t)
	tb := b.newTab(1280)
	defer tb.checkClean()
	tb.open("http://" + e.public + "/portal/#token=" + key)
	tb.see("Endpoints")

	tb.route("#/endpoints/new")
	tb.see("Retries")
	tb.typeInto("URL", "https://example.com/hook")
	tb.typeInto("Retry schedule", "5s, 1.5h")
	tb.typeInto("Attempt timeout", "10")
	tb.click("Create endpoint")
	refusal := `//label[@for="endpoint-retry-schedule"]/following-sibling::p[@class="field-error"]`
	if got := tb.textOf(refusal); !strings.Contains(got, "retry_policy.schedule[1]") {
		t.Errorf("next to the schedule: %q, want the API's refusal of retry_policy.schedule[1]", got)
	}
	tb.clearField("Retry schedule")
	tb.typeInto("Retry schedule", "5s, 90s, 2h")
	tb.click("Create endpoint")
	tb.see("Endpoint created.", "4 attempts, then waiting 5s, 1m30s, 2h", "10 s")
	subID := strings.TrimPrefix(tb.hashOf(), "#/endpoints/")
	_, sub := e.call("GET", "http://"+e.public+"/v1/webhook_subscriptions/"+subID, key, nil)
	if got := fmt.Sprint(sub["retry_policy"]); got != "map[schedule:[5s 1m30s 2h] timeout_seconds:10]" {
		t.Fatalf("the form made retry_policy %s", got)
	}

	tb.route("#/endpoints/" + subID + "/edit")
	tb.see("Retries")
	tb.clearField("Retry schedule")
	tb.clearField("Attempt timeout")
	tb.click("Save changes")
	tb.see("Endpoint saved.", "The engine's: up to 15 attempts")
	if _, sub = e.call("GET", "http://"+e.public+"/v1/webhook_subscriptions/"+subID, key, nil); sub["retry_policy"] != nil {
		t.Fatalf("after clearing, retry_policy %v, want null", sub["retry_policy"])
	}
}
