package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhookd/webhookd/internal/store/storetest"
	webhookreceiver "github.com/webhookd/webhookd/receiver"
)

// These tests drive the merchant portal in headless Chromium against the
// real `webhookd serve`, Postgres and Redis, as a merchant would: they read
// what the page shows and click its buttons.

// hookReceiver is a merchant's endpoint on 127.0.0.1: it keeps every
// request and answers what the test tells it to. With secrets set, it
// verifies each delivery (Standard Webhooks library) and refuses, 400,
// those that do not verify, as a careful receiver does.
type hookReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	status   int
	body     string
	secrets  []string
	requests []hookRequest
}

// hookRequest is one request the receiver got.
type hookRequest struct {
	header http.Header
	body   []byte
}

func newHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	r := &hookReceiver{status: http.StatusNoContent}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.requests = append(r.requests, hookRequest{header: req.Header.Clone(), body: body})
		status, answer, secrets := r.status, r.body, r.secrets
		r.mu.Unlock()
		if len(secrets) > 0 && verifyWithLibrary(secrets, req.Header, body) != nil {
			status, answer = http.StatusBadRequest, "bad signature"
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(r.Close)
	return r
}

// answer sets the status and body of the next answers.
func (r *hookReceiver) answer(status int, body string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status, r.body = status, body
}

// verifying makes the receiver refuse deliveries that no secret verifies;
// none accepts everything.
func (r *hookReceiver) verifying(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secrets = secrets
}

func (r *hookReceiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.requests)
}

// waitFor waits for the n-th request (from 1) and returns it.
func (r *hookReceiver) waitFor(t *testing.T, n int) hookRequest {
	t.Helper()
	if !eventually(15*time.Second, func() bool { return r.count() >= n }) {
		t.Fatalf("the receiver got %d requests, want %d", r.count(), n)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests[n-1]
}

// verifyWithLibrary checks a delivery with the published Standard Webhooks
// library: nil when one of the secrets verifies it.
func verifyWithLibrary(secrets []string, h http.Header, body []byte) error {
	var err error
	for _, s := range secrets {
		var wh *standardwebhooks.Webhook
		if wh, err = standardwebhooks.NewWebhook(s); err == nil {
			if err = wh.Verify(body, h); err == nil {
				return nil
			}
		}
	}
	return err
}

// verifyWithReceiver checks a delivery against one secret with webhookd's
// own verifier, package receiver's, at now.
func verifyWithReceiver(secret string, h http.Header, body []byte, now time.Time) error {
	v, err := webhookreceiver.NewVerifier(webhookreceiver.VerifierConfig{Secrets: []string{secret}, Now: func() time.Time { return now }})
	if err != nil {
		return err
	}
	return v.Verify(h, body)
}

// mustVerify checks a delivery against one secret with the published
// library and with webhookd's own verifier.
func mustVerify(t *testing.T, what, secret string, req hookRequest) {
	t.Helper()
	if err := verifyWithLibrary([]string{secret}, req.header, req.body); err != nil {
		t.Errorf("%s: the Standard Webhooks library does not verify the delivery: %v", what, err)
	}
	if err := verifyWithReceiver(secret, req.header, req.body, time.Now()); err != nil {
		t.Errorf("%s: webhookd's verifier does not verify the delivery: %v", what, err)
	}
}

// keysCreateScoped runs `webhookd keys create` with the given scopes.
func (e *engine) keysCreateScoped(merchant, scopes string) string {
	e.t.Helper()
	cmd := exec.Command(e.bin, "keys", "create", "--merchant", merchant, "--scopes", scopes)
	cmd.Env = e.env
	out, err := cmd.Output()
	if err != nil {
		e.t.Fatalf("keys create: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

// hashOf is the page's route, such as "#/endpoints/<id>".
func (tb *tab) hashOf() string {
	tb.t.Helper()
	return eval[string](tb, `location.hash`)
}

// route navigates the single-page application to a hash route.
func (tb *tab) route(hash string) {
	tb.t.Helper()
	eval[string](tb, `location.hash = `+jsString(hash))
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

// fetchStatus makes a request from the page with token, as a person could
// from the browser's console, and answers the status and error code.
func (tb *tab) fetchStatus(method, path, token string) (int, string) {
	tb.t.Helper()
	res := eval[struct {
		Status int    `json:"status"`
		Code   string `json:"code"`
	}](tb, `fetch(`+jsString(path)+`, {method: `+jsString(method)+`, headers: {
		Authorization: "Bearer " + `+jsString(token)+`, "Content-Type": "application/json",
		"Idempotency-Key": crypto.randomUUID()}, body: `+map[bool]string{true: `"{}"`, false: `undefined`}[method == "POST"]+`})
		.then(async (r) => ({status: r.status, code: ((await r.json().catch(() => ({}))) || {}).code || ""}))`)
	return res.Status, res.Code
}

func TestPortalInTheBrowser(t *testing.T) {
	storetest.FullLane(t, "a browser test of the real binary")
	t.Parallel() // it measures no latency: the browser tests run beside each other
	// A 30 s retry delay keeps a failed delivery pending, with its next
	// attempt shown, for the whole test.
	e := newEngine(t, "WEBHOOKD_RETRY_SCHEDULE=30s", "WEBHOOKD_TEST_EVENT_RATE=100/m")
	e.start()
	key := e.keysCreate("m_portal")
	hook := newHookReceiver(t)
	b := newBrowser(t)
	tb := b.newTab(1280)
	base := "http://" + e.public + "/portal/"

	// Opening the link: the token moves from the address bar to the tab's
	// session storage.
	tb.open(base + "#token=" + key)
	tb.see("Endpoints", "No endpoints yet.", "Sandbox", "Sign out")
	href := eval[string](tb, `location.href`)
	stored := eval[string](tb, `sessionStorage.getItem("webhookd.portal.token")`)
	if strings.Contains(href, "token") || strings.Contains(href, key) {
		t.Errorf("the address bar still holds the token: %s", href)
	}
	if stored != key {
		t.Errorf("sessionStorage holds %q, want the token", stored)
	}

	// Creating an endpoint, with the keyboard alone: Tab to the button,
	// Enter to follow it.
	for range 20 {
		tb.run(chromedp.KeyEvent(kb.Tab))
		if eval[string](tb, `document.activeElement.textContent.trim()`) == "Add endpoint" {
			break
		}
	}
	if ring := eval[string](tb, `getComputedStyle(document.activeElement).outlineStyle`); ring == "none" {
		t.Error("the focused button shows no focus ring")
	}
	tb.run(chromedp.KeyEvent(kb.Enter))
	tb.see("Add endpoint", "URL", "Event types", "Every event type, future ones included")
	// The API's own words explain a refusal.
	tb.typeInto("URL", "ftp://example.com/hook")
	tb.click("Create endpoint")
	tb.see("parameter_invalid", "reference ")
	tb.clearField("URL")
	tb.typeInto("URL", hook.URL+"/hook")
	tb.typeInto("Description", "Orders service")
	tb.click("Create endpoint")
	tb.see("Endpoint created.", "Signing secret", hook.URL+"/hook", "Orders service", "enabled")
	secret := tb.textOf(`//*[@id="signing-secret"]`)
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("the page shows the secret %q, want whsec_…", secret)
	}
	subID := strings.TrimPrefix(tb.hashOf(), "#/endpoints/")

	// Sending a test event: its delivery and its attempt show.
	tb.click("Send test event")
	tb.see("Test event sent.")
	tb.until("", "Refresh", deliveryRow("succeeded", 1))
	mustVerify(t, "test event", secret, hook.waitFor(t, 1))
	tb.click("Attempts")
	tb.see("scheduled", "204", "Answer (first 1 KiB)")
	tb.click("Attempts") // closes it again

	// A receiver answering 500: the failed attempt and the next retry show.
	hook.answer(http.StatusInternalServerError, "upstream exploded")
	tb.click("Send test event")
	tb.until("", "Refresh", deliveryRow("pending", 1))
	pendingID := eval[string](tb, `document.evaluate(`+jsString(deliveryRow("pending", 1))+
		`, document, null, XPathResult.FIRST_ORDERED_NODE_TYPE, null).singleNodeValue.dataset.deliveryId`)
	pendingRow := fmt.Sprintf(`//tr[@data-delivery-id=%q]`, pendingID)
	pendingDetail := pendingRow + `/following-sibling::tr[1]`
	tb.clickIn(pendingRow, "Attempts")
	tb.see("upstream exploded", "500")
	// A redraw of the list (Refresh, or a reload still on its way from an
	// earlier click) keeps the attempts the person opened open.
	tb.clickIn(`//section[@aria-label="Deliveries"]`, "Refresh")
	tb.gone(`//button[normalize-space()="Refresh"][@disabled]`)
	if !tb.present(pendingDetail+`//button[normalize-space()="Reload attempts"]`) ||
		!tb.present(pendingRow+`//button[normalize-space()="Attempts"][@aria-expanded="true"]`) {
		t.Fatalf("Refresh closed the delivery's open attempts; page text:\n%s", tb.text())
	}
	if next := tb.textOf(pendingDetail + `//dt[normalize-space()="Next attempt"]/following-sibling::dd[1]`); next == "—" || next == "" {
		t.Errorf("the failed delivery shows no next attempt (%q)", next)
	}
	tb.screenshot("failed-delivery")

	// Resend: one manual attempt, which the receiver now accepts.
	hook.answer(http.StatusNoContent, "")
	tb.clickIn(pendingDetail, "Resend")
	tb.see("Resent: a worker makes one more attempt now.")
	tb.until(pendingDetail, "Reload attempts", pendingDetail+
		`//tr[td[@data-label="Trigger"][.="manual"]][td[@data-label="Result"][normalize-space()="succeeded"]]`)
	// The list's row says what the detail says: two attempts, succeeded.
	if attempts, status := tb.textOf(pendingRow+`/td[@data-label="Attempts"]`), tb.textOf(pendingRow+`/td[@data-label="Status"]`); attempts != "2" || status != "succeeded" {
		t.Errorf("after the resend the row says %s attempt(s), %s; its detail says 2, succeeded", attempts, status)
	}

	// Recover since a date: an event whose delivery failed for good (410
	// ends it at once and disables the endpoint) gets another attempt.
	since := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	hook.answer(http.StatusGone, "")
	n := hook.count()
	eventID := e.publish("m_portal")
	hook.waitFor(t, n+1)
	waitStatus(t, e, key, subID, "disabled")
	tb.run(chromedp.Reload())
	tb.see("disabled", "Recover every failed delivery since")
	tb.click("Enable")
	tb.see("Endpoint enabled.")
	tb.gone(`//button[normalize-space()="Enable"]`)
	hook.answer(http.StatusNoContent, "")
	tb.setField("Recover every failed delivery since", since.Format("2006-01-02T15:04:05"))
	tb.click("Recover")
	tb.see("1 failed delivery gets another attempt now.")
	if got := hook.waitFor(t, n+2); got.header.Get("webhook-id") != eventID {
		t.Errorf("recovered delivery of %q, want event %s", got.header.Get("webhook-id"), eventID)
	}

	// Rotating the secret: for the overlap, deliveries carry both
	// signatures and each secret verifies them.
	tb.click("Rotate signing secret")
	tb.click("Rotate secret")
	tb.see("New signing secret", "keeps signing deliveries, alongside the new one")
	rotated := tb.textOf(`//*[@id="signing-secret"]`)
	if !strings.HasPrefix(rotated, "whsec_") || rotated == secret {
		t.Fatalf("the page shows the new secret %q, want another whsec_…", rotated)
	}
	// The next action's answer replaces the panel, and the rotation's
	// message goes with it.
	tb.see("Signing secret rotated.")
	tb.click("Check my endpoint")
	tb.see("Three test deliveries were sent")
	tb.notSee("Signing secret rotated.", "New signing secret")
	n = hook.count()
	tb.click("Send test event")
	delivered := hook.waitFor(t, n+1)
	mustVerify(t, "after rotation, old secret", secret, delivered)
	mustVerify(t, "after rotation, new secret", rotated, delivered)

	// Filtering deliveries: by status, then by date.
	tb.setField("Status", "failed")
	tb.until("", "Apply", `//p[normalize-space()="No deliveries."]`)
	tb.setField("Status", "succeeded")
	tb.setField("Created since", since.Format("2006-01-02T15:04:05"))
	tb.click("Apply")
	tb.until("", "Refresh", deliveryRow("succeeded", 1))
	if tb.present(`//td[@data-label="Status"][normalize-space()!="succeeded"]`) {
		t.Errorf("filtered on succeeded, the list shows another status:\n%s", tb.text())
	}
	tb.setField("Created since", time.Now().UTC().Add(time.Hour).Format("2006-01-02T15:04:05"))
	tb.click("Apply")
	tb.see("No deliveries.")

	// Paging with the API's cursors: 21 more deliveries make a second page.
	batch := make([]map[string]any, 21)
	for i := range batch {
		batch[i] = map[string]any{"merchant_id": "m_portal", "type": "payout.created", "payload": map[string]any{"id": fmt.Sprintf("po_%d", i)}}
	}
	n = hook.count()
	if status, res := e.call("POST", "http://"+e.internal+"/internal/v1/events/batch", e2eToken, map[string]any{"events": batch}); status != 202 {
		t.Fatalf("publish a batch: %d %v", status, res)
	}
	hook.waitFor(t, n+len(batch))
	// The receiver has them; their attempts are recorded a moment later.
	// Until then a row may change from pending between two looks at the
	// first page.
	waitNonePending(t, e, key, subID, "payout.created")
	tb.run(chromedp.Reload())
	tb.see("Deliveries", "Older")
	rows := func() int { return eval[int](tb, `document.querySelectorAll("tr[data-delivery-id]").length`) }
	if got := rows(); got != 20 {
		t.Errorf("the first page shows %d deliveries, want 20", got)
	}
	// The first page is the same deliveries in the same order when Newer
	// brings it back (their other text, such as a retry's status, may
	// move on meanwhile).
	pageIDs := func() string {
		return eval[string](tb, `[...document.querySelectorAll("tr[data-delivery-id]")].map(r => r.dataset.deliveryId).join(",")`)
	}
	firstPage := pageIDs()
	tb.click("Older")
	tb.see("Newer")
	tb.gone(`//button[normalize-space()="Older"]`)
	if got := rows(); got == 0 || got > 20 {
		t.Errorf("the second page shows %d deliveries", got)
	}
	tb.click("Newer")
	tb.see("Older")
	if got := pageIDs(); got != firstPage {
		t.Errorf("Newer does not show the first page again: %s, was %s", got, firstPage)
	}

	// Events: the list, one event's exact payload and its deliveries.
	exact := e.publishRaw("m_portal", "payout.paid", `{"id":"po_2","amount":1.10,"fee":12345678901234567890,"status":"paid"}`)
	// The newest event a test event, so that it is on the list's first page.
	if status, res := e.call("POST", "http://"+e.public+"/v1/webhook_subscriptions/"+subID+"/send_test_event", key, nil); status/100 != 2 {
		t.Fatalf("send_test_event: %d %v", status, res)
	}
	tb.click("Events")
	tb.see("Events", "payout.paid", "ping.test")
	// Test events (send_test_event, Check my endpoint) are marked as such.
	testEventRow := `//td[@data-label="Type"][starts-with(normalize-space(), "ping.test")]`
	if marked := tb.textOf(testEventRow); marked != "ping.test test" {
		t.Errorf("a ping.test event's type cell reads %q, want it marked test", marked)
	}
	tb.setField("Event type", "payout.paid")
	tb.click("Apply")
	tb.gone(testEventRow)
	tb.click(eventID)
	tb.see("Payload", `"status": "paid"`, "Deliveries", "Open endpoint")
	tb.screenshot("event")
	// The payload shows as it was delivered, numbers as written.
	tb.route("#/events/" + exact)
	tb.see(`"amount": 1.10,`, `"fee": 12345678901234567890,`)

	// Another merchant's ids are unreachable from this session.
	otherKey := e.keysCreate("m_other")
	status, other := e.call("POST", "http://"+e.public+"/v1/webhook_subscriptions", otherKey,
		map[string]any{"url": hook.URL + "/other", "events": []string{"*"}})
	if status != 201 {
		t.Fatalf("create the other merchant's subscription: %d %v", status, other)
	}
	otherEvent := e.publish("m_other")
	for _, hash := range []string{"#/endpoints/" + other["id"].(string), "#/events/" + otherEvent} {
		tb.route(hash)
		tb.see("Not found", "No such resource.")
		tb.notSee(hook.URL + "/other")
	}
	if status, code := tb.fetchStatus("POST", "/v1/webhook_subscriptions/"+other["id"].(string)+"/send_test_event", key); status != 404 || code != "resource_not_found" {
		t.Errorf("another merchant's subscription from the page: %d %s, want 404 resource_not_found", status, code)
	}

	// A key that may only read: the API refuses what it may not do.
	readKey := e.keysCreateScoped("m_portal", "webhooks:read")
	if status, code := tb.fetchStatus("POST", "/v1/webhook_subscriptions/"+subID+"/send_test_event", readKey); status != 403 || code != "insufficient_scope" {
		t.Errorf("send_test_event with a read-only key: %d %s, want 403 insufficient_scope", status, code)
	}

	// 375 px wide: the list fits without scrolling sideways.
	narrow := b.newTab(375)
	narrow.open(base + "#token=" + key)
	narrow.see("Endpoints", hook.URL+"/hook", "Success rate (24 h)")
	if eval[bool](narrow, `document.documentElement.scrollWidth > document.documentElement.clientWidth`) {
		t.Error("at 375 px the page scrolls sideways")
	}
	narrow.screenshot("endpoints-375")
	narrow.click(hook.URL + "/hook")
	narrow.see("Deliveries", "Send test event")
	if eval[bool](narrow, `document.documentElement.scrollWidth > document.documentElement.clientWidth`) {
		t.Error("at 375 px the endpoint's page scrolls sideways")
	}
	tb.route("#/endpoints")
	tb.see("Endpoints", "Orders service")

	// Editing an endpoint, its delivery controls included. Headers are set
	// through the API: the page shows them masked, and an edit that does
	// not touch them keeps them.
	const gateway = "Bearer gw_7f3c9a1d2e8b4c6f"
	if status, res := e.call("POST", "http://"+e.public+"/v1/webhook_subscriptions/"+subID, key,
		map[string]any{"headers": map[string]string{"Authorization": gateway}}); status != 200 {
		t.Fatalf("set headers: %d %v", status, res)
	}
	tb.click("Edit")
	tb.see("Edit endpoint", "Delivery controls")
	tb.clearField("Description")
	tb.typeInto("Description", "Orders service, v2")
	// The API's own words explain a filter it refuses.
	tb.typeInto("Filter", "amount > 1000")
	tb.click("Save changes")
	tb.see("parameter_invalid", "undeclared reference to 'amount'")
	tb.clearField("Filter")
	tb.typeInto("Filter", `payload.status == "paid"`)
	tb.typeInto("Rate limit", "5")
	tb.typeInto("Ordering key", "payload.id")
	tb.screenshot("endpoint-form")
	tb.click("Save changes")
	tb.see("Endpoint saved.", "Orders service, v2", `payload.status == "paid"`, "5 per second", "By payload.id", "Authorization: Bearer ••••••")
	tb.notSee(gateway)
	tb.screenshotViewport("endpoint-controls")
	_, saved := e.call("GET", "http://"+e.public+"/v1/webhook_subscriptions/"+subID, key, nil)
	if headers, _ := saved["headers"].(map[string]any); headers["Authorization"] != "Bearer ••••••" {
		t.Errorf("after the edit the subscription's headers are %v, want Authorization kept", saved["headers"])
	}
	// An event matching the endpoint while it is disabled is kept as a
	// skipped delivery.
	tb.click("Disable")
	tb.see("Endpoint disabled.")
	e.publish("m_portal")
	tb.setField("Status", "skipped")
	tb.until("", "Apply", deliveryRow("skipped", 0))

	// Deleting an endpoint.
	tb.click("Delete")
	tb.see("Its pending deliveries end as failed.")
	tb.click("Delete endpoint")
	tb.see("Endpoint deleted.", "No endpoints yet.")

	// Sign out: the tab forgets its token.
	tb.click("Sign out")
	tb.see("Signed out")
	stored = eval[string](tb, `String(sessionStorage.getItem("webhookd.portal.token"))`)
	if stored != "null" {
		t.Errorf("after signing out sessionStorage still holds %q", stored)
	}
	tb.checkClean()
	narrow.checkClean()
}

// deliveryRow is the XPath of a delivery's row in a list, by its status
// and number of attempts.
func deliveryRow(status string, attempts int) string {
	return fmt.Sprintf(`//tr[td[@data-label="Status"][normalize-space()=%q]][td[@data-label="Attempts"][normalize-space()="%d"]]`, status, attempts)
}

// waitStatus waits until the API shows the subscription in status.
func waitStatus(t *testing.T, e *engine, key, id, status string) {
	t.Helper()
	waitFor(t, "subscription "+id+" to become "+status, 10*time.Second, func() bool {
		_, sub := e.call("GET", "http://"+e.public+"/v1/webhook_subscriptions/"+id, key, nil)
		return sub["status"] == status
	})
}

// waitNonePending waits until the API lists no pending delivery of
// eventType for the subscription.
func waitNonePending(t *testing.T, e *engine, key, subID, eventType string) {
	t.Helper()
	var (
		status, pending int
		page            map[string]any
	)
	if !eventually(10*time.Second, func() bool {
		status, page = e.call("GET", "http://"+e.public+"/v1/webhook_deliveries?status=pending&limit=100&subscription_id="+subID, key, nil)
		data, _ := page["data"].([]any)
		pending = 0
		for _, d := range data {
			if d.(map[string]any)["event_type"] == eventType {
				pending++
			}
		}
		return status == 200 && pending == 0
	}) {
		t.Fatalf("%d deliveries of %s are still pending (%d): %v", pending, eventType, status, page)
	}
}

// publishRaw publishes an event whose payload is the JSON text payload,
// byte for byte, and answers its id.
func (e *engine) publishRaw(merchant, eventType, payload string) string {
	e.t.Helper()
	status, ev := e.call("POST", "http://"+e.internal+"/internal/v1/events", e2eToken,
		map[string]any{"merchant_id": merchant, "type": eventType, "payload": json.RawMessage(payload)})
	if status != 202 {
		e.t.Fatalf("publish: %d %v", status, ev)
	}
	return ev["id"].(string)
}

// mintSession issues a portal session for merchant on the internal
// listener, as the core API does, and answers its link and token.
func (e *engine) mintSession(merchant string, body map[string]any) (link, token string) {
	e.t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	status, sess := e.call("POST", "http://"+e.internal+"/internal/v1/merchants/"+merchant+"/portal_sessions", e2eToken, body)
	if status != 201 {
		e.t.Fatalf("mint a portal session: %d %v", status, sess)
	}
	return sess["url"].(string), sess["token"].(string)
}

// waitRefused waits until the public API refuses token with 401.
func waitRefused(t *testing.T, e *engine, token string) {
	t.Helper()
	waitFor(t, "the API to refuse the session", 10*time.Second, func() bool {
		status, _ := e.call("GET", "http://"+e.public+"/v1/portal_sessions/current", token, nil)
		return status == 401
	})
}

func TestPortalSessionsInTheBrowser(t *testing.T) {
	storetest.FullLane(t, "a browser test of the real binary")
	t.Parallel() // it measures no latency: the browser tests run beside each other
	e := newEngine(t, "WEBHOOKD_TEST_EVENT_RATE=100/m")
	e.start()
	const merchant = "m_sessions"
	key := e.keysCreate(merchant)
	hook := newHookReceiver(t)
	status, sub := e.call("POST", "http://"+e.public+"/v1/webhook_subscriptions", key,
		map[string]any{"url": hook.URL + "/hook", "events": []string{"*"}, "description": "Ledger"})
	if status != 201 {
		t.Fatalf("create subscription: %d %v", status, sub)
	}
	subID, secret := sub["id"].(string), sub["secret"].(string)
	// A second endpoint, whose receiver answers 500: it is failing.
	broken := newHookReceiver(t)
	broken.answer(http.StatusInternalServerError, "down")
	status, failing := e.call("POST", "http://"+e.public+"/v1/webhook_subscriptions", key,
		map[string]any{"url": broken.URL + "/hook", "events": []string{"*"}, "description": "Payments"})
	if status != 201 {
		t.Fatalf("create subscription: %d %v", status, failing)
	}
	// One delivery (not a test one, which health leaves out), so that the
	// endpoint has a 24 h success rate.
	e.publish(merchant)
	hook.waitFor(t, 1)
	broken.waitFor(t, 1)
	if !eventually(10*time.Second, func() bool {
		_, failing = e.call("GET", "http://"+e.public+"/v1/webhook_subscriptions/"+failing["id"].(string), key, nil)
		h, _ := failing["health"].(map[string]any)
		n, _ := h["consecutive_failures"].(float64)
		return n >= 1 // retries may have failed too by now
	}) {
		t.Fatalf("health never counted the failure: %v", failing)
	}
	var health map[string]any
	if !eventually(10*time.Second, func() bool {
		_, health = e.call("GET", "http://"+e.public+"/v1/webhook_subscriptions/"+subID+"/health", key, nil)
		return health["succeeded_24h"] == float64(1)
	}) {
		t.Fatalf("health never counted the delivery: %v", health)
	}
	b := newBrowser(t)

	// A session with every capability and the merchant's colour: health,
	// catalogue, secret, and a check of the endpoint.
	link, token := e.mintSession(merchant, map[string]any{
		"capabilities": []string{"view", "manage_endpoints", "view_secret", "resend"},
		"branding":     map[string]any{"accent_color": "#0a7d4f"},
	})
	tb := b.newTab(1280)
	tb.open(link)
	tb.see("Endpoints", hook.URL+"/hook", "Ledger", "Session ends", "Success rate (24 h)", "100 % (1 of 1 attempt)")
	// The failing endpoint says so beside its status, the healthy one not.
	tb.see("Payments", "failing: ", " in a row")
	if n := eval[int](tb, `document.querySelectorAll(".badge.failing").length`); n != 1 {
		t.Errorf("%d failing badges, want the one of the endpoint whose attempt failed", n)
	}
	if accent := eval[string](tb, `getComputedStyle(document.documentElement).getPropertyValue("--accent").trim()`); accent != "#0a7d4f" {
		t.Errorf("accent colour %q, want the session's #0a7d4f", accent)
	}
	tb.screenshot("endpoints-branded")

	tb.click("Event types")
	tb.see("Event types", "payout.paid", "Example payload", "deposit.received")
	tb.click("Example payload")
	tb.see(`"currency": "EUR"`)
	tb.screenshotViewport("event-types")
	// In the sandbox, any type's example can be sent to the endpoints.
	before := hook.count()
	tb.clickIn(`//section[@aria-label="deposit.received"]`, "Send an example")
	tb.see("Sent deposit.received")
	if got := hook.waitFor(t, before+1); !strings.Contains(string(got.body), `"type":"deposit.received"`) {
		t.Errorf("the example sent reached the endpoint as %s", got.body)
	}

	tb.click("Endpoints")
	tb.click(hook.URL + "/hook")
	tb.click("Verify these deliveries")
	tb.see("receiver.NewVerifier", "npm install standardwebhooks", "pip install standardwebhooks")
	tb.click("Reveal signing secret")
	tb.see("Signing secret")
	if shown := tb.textOf(`//*[@id="signing-secret"]`); shown != secret {
		t.Errorf("revealed secret %q, want the subscription's %q", shown, secret)
	}

	// Check my endpoint: a receiver that accepts everything is flagged...
	tb.click("Check my endpoint")
	tb.see("Three test deliveries were sent", "Wrong signature", "Stale timestamp", "Does not verify signatures.", "How to verify signatures")
	tb.screenshot("check-flagged")
	// ...one that verifies is not.
	hook.verifying(secret)
	tb.click("Check my endpoint")
	tb.see("Your endpoint verifies signatures")
	tb.notSee("Does not verify signatures.")

	// Sign out ends the session on the server: the link no longer opens.
	tb.click("Sign out")
	tb.see("Signed out")
	waitRefused(t, e, token)
	tb.open(link)
	tb.see("Session ended", "Ask for a new link")
	tb.checkClean()

	// A read-only session sees no button that would fail, and the API
	// refuses it what it may not do.
	readLink, readToken := e.mintSession(merchant, map[string]any{"capabilities": []string{"view"}})
	ro := b.newTab(1280)
	ro.open(readLink)
	ro.see("Endpoints", hook.URL+"/hook", "Success rate (24 h)")
	ro.notSee("Add endpoint", "Edit", "Disable", "Delete")
	ro.click(hook.URL + "/hook")
	ro.see("Deliveries", "payout.paid")
	ro.clickIn(`//tr[td[@data-label="Event type"][starts-with(normalize-space(), "payout.paid")]]`, "Attempts")
	ro.see("Reload attempts", "scheduled")
	ro.notSee("Send test event", "Check my endpoint", "Reveal signing secret", "Rotate signing secret",
		"Recover every failed delivery since", "Resend", "Disable", "Delete")
	ro.screenshot("endpoint-read-only")
	for _, c := range []struct{ method, path string }{
		{"POST", "/v1/webhook_subscriptions/" + subID + "/send_test_event"},
		{"POST", "/v1/webhook_subscriptions/" + subID + "/rotate_secret"},
		{"GET", "/v1/webhook_subscriptions/" + subID + "/secret"},
		{"DELETE", "/v1/webhook_subscriptions/" + subID},
	} {
		if status, code := ro.fetchStatus(c.method, c.path, readToken); status != 403 || code != "insufficient_scope" {
			t.Errorf("read-only session %s %s: %d %s, want 403 insufficient_scope", c.method, c.path, status, code)
		}
	}
	ro.checkClean()

	// Times name their zone, and the reader picks theirs or UTC (a reader
	// in Paris, this tab; the choice is kept for the next page).
	zt := b.newTab(1280)
	if _, err := chromedp.Call(zt.ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Europe/Paris"}); err != nil {
		t.Fatalf("browser: set the tab's time zone: %v", err)
	}
	zt.open(readLink)
	zt.see("Session ends")
	sessionEnds := `//*[@id="session-ends"]/time`
	if shown := zt.textOf(sessionEnds); !strings.Contains(shown, "GMT+1") {
		t.Errorf("session end %q: want the reader's zone named (GMT+1 in Paris in November)", shown)
	}
	zt.setField("Times in", "utc")
	if !eventually(stepTimeout, func() bool { return strings.HasSuffix(zt.textOf(sessionEnds), "UTC") }) {
		t.Errorf("after picking UTC the session end reads %q", zt.textOf(sessionEnds))
	}
	zt.checkClean()

	// A session revoked while open: the next page says so.
	// It shows the session's logo too: the policy allows https images.
	const logo = "https://logo.invalid/merchant.png"
	revLink, revToken := e.mintSession(merchant, map[string]any{"branding": map[string]any{"logo_url": logo}})
	rv := b.newTab(1280)
	rv.open(revLink)
	rv.see("Endpoints", hook.URL+"/hook")
	if !rv.present(`//img[@id="logo"]`) || eval[string](rv, `document.getElementById("logo").src`) != logo {
		t.Errorf("the session's logo is not shown:\n%s", eval[string](rv, `document.querySelector(".brand").outerHTML`))
	}
	if status, _ := e.call("DELETE", "http://"+e.internal+"/internal/v1/merchants/"+merchant+"/portal_sessions", e2eToken, nil); status != 204 {
		t.Fatalf("revoke the merchant's sessions: %d", status)
	}
	waitRefused(t, e, revToken)
	rv.click("Events")
	rv.see("Session ended", "expired or was signed out")
	rv.notSee("Sign out")

	// An expired session is refused.
	expLink, expToken := e.mintSession(merchant, map[string]any{"ttl_seconds": 1})
	waitRefused(t, e, expToken)
	ex := b.newTab(1280)
	ex.open(expLink)
	ex.see("Session ended", "Ask for a new link")
	ex.notSee(hook.URL + "/hook")
	rv.checkClean()
	ex.checkClean()
}
