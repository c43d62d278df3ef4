package main

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store/storetest"
)

// TestPortalOverviewInTheBrowser drives the portal's overview and charts
// against the real binary: a failed delivery shows among the recent
// failures within one refresh and its Resend works; the endpoint's charts
// (drawn, so uPlot ran under the Content-Security-Policy) come with tables
// whose buckets are the stats route's numbers; an attempt shows its request
// headers; the search opens an event and a delivery by id; the events list
// filters by delivery outcome; at 375 px nothing scrolls sideways; and no
// page throws or breaks the policy.
func TestPortalOverviewInTheBrowser(t *testing.T) {
	storetest.FullLane(t, "a browser test of the real binary")
	t.Parallel() // it measures no latency: the browser tests run beside each other
	// A 30 s retry delay keeps the failed delivery pending, with its next
	// retry shown, for the whole test.
	e := newEngine(t, "WEBHOOKD_RETRY_SCHEDULE=30s")
	e.start()
	key := e.keysCreate("m_glance")
	hook := newHookReceiver(t)
	hook.answer(http.StatusInternalServerError, "upstream exploded")
	status, sub := e.call("POST", "http://"+e.public+"/v1/webhook_subscriptions", key,
		map[string]any{"url": hook.URL + "/hook", "events": []string{"*"}, "description": "Ledger"})
	if status != 201 {
		t.Fatalf("create subscription: %d %v", status, sub)
	}
	subID := sub["id"].(string)
	b := newBrowser(t)
	tb := b.newTab(1280)
	base := "http://" + e.public + "/portal/"
	tb.open(base + "#token=" + key)
	tb.see("Overview", "Recent failed deliveries", "No failed deliveries.", hook.URL+"/hook")

	// The failed delivery shows after one refresh, with what failed and
	// when it is retried.
	eventID := e.publish("m_glance")
	hook.waitFor(t, 1)
	deliveryID := waitDelivery(t, e, key, eventID, func(d map[string]any) bool {
		return d["attempt_count"].(float64) == 1 && d["status"] == "pending"
	})["id"].(string)
	tb.click("Refresh")
	row := fmt.Sprintf(`//table[contains(@class, "failed-deliveries")]//tr[@data-delivery-id=%q]`, deliveryID)
	tb.see("payout.paid", "http_status (HTTP 500)")
	if !tb.present(row) {
		t.Fatalf("after one refresh the overview does not list the failed delivery; page text:\n%s", tb.text())
	}
	if next := tb.textOf(row + `/td[@data-label="Next retry"]`); next == "" || next == "—" || strings.Contains(next, "none") {
		t.Errorf("the failed delivery shows no next retry (%q)", next)
	}
	if got := tb.textOf(row + `/td[@data-label="Endpoint"]`); got != hook.URL+"/hook" {
		t.Errorf("the failed delivery's endpoint shows as %q", got)
	}
	waitFor(t, "the overview's sparkline", 15*time.Second, func() bool { return tb.present(`//div[contains(@class, "spark")]//canvas`) })
	if grown := chartsThatGrew(tb); len(grown) > 0 {
		t.Errorf("the overview's sparklines outgrew the space kept for them before drawing: %v", grown)
	}
	tb.screenshot("overview")

	// Resend: one manual attempt, which the receiver now accepts.
	hook.answer(http.StatusNoContent, "")
	tb.clickIn(row, "Resend")
	tb.see("Resent payout.paid")
	waitDelivery(t, e, key, eventID, func(d map[string]any) bool { return d["status"] == "succeeded" })
	if got := hook.waitFor(t, 2); got.header.Get("webhook-id") != eventID {
		t.Errorf("the resend delivered %q, want event %s", got.header.Get("webhook-id"), eventID)
	}

	// The endpoint's charts: drawn, and their tables say what the stats
	// route says, bucket by bucket, for both windows.
	tb.click(hook.URL + "/hook")
	tb.see("Deliveries over time", "Attempts per hour by outcome", "Response time per hour")
	for _, w := range []struct{ window, button string }{{"24h", "Last 24 hours"}, {"7d", "Last 7 days"}} {
		if w.window != "24h" {
			tb.click(w.button)
		}
		table := fmt.Sprintf(`//table[@data-window=%q]`, w.window)
		waitFor(t, "the "+w.window+" table", 15*time.Second, func() bool { return tb.present(`//details[.` + table + `]`) })
		// uPlot draws once the chart's box is laid out on the page.
		if !eventually(15*time.Second, func() bool {
			return tb.present(`//div[@data-chart="outcomes"]//canvas`) && tb.present(`//div[@data-chart="latency"]//canvas`)
		}) {
			tb.checkClean()
			t.Fatalf("%s: the charts are not drawn (uPlot %v, boxes %v); page text:\n%s", w.window,
				eval[bool](tb, `typeof uPlot === "function"`),
				eval[[]int](tb, `[...document.querySelectorAll("[data-chart]")].map((b) => b.clientWidth)`), tb.text())
		}
		if grown := chartsThatGrew(tb); len(grown) > 0 {
			t.Errorf("%s: drawn charts outgrew the space kept for them before drawing, moving what is below: %v", w.window, grown)
		}
		if label := eval[string](tb, `document.querySelector('[data-chart="outcomes"]').getAttribute('aria-label')`); !strings.Contains(label, "2 in all") {
			t.Errorf("%s: the chart's text equivalent says %q, want the window's 2 attempts", w.window, label)
		}
		_, stats := e.call("GET", "http://"+e.public+"/v1/webhook_subscriptions/"+subID+"/stats?window="+w.window, key, nil)
		shown := eval[[]map[string]string](tb, `[...document.querySelectorAll('table[data-window="`+w.window+`"] tbody tr')].map((tr) => ({
			start: tr.dataset.start,
			attempts: tr.querySelector('[data-label="Attempts"]').textContent,
			succeeded: tr.querySelector('[data-label="Succeeded"]').textContent,
			retrying: tr.querySelector('[data-label="Retrying"]').textContent,
			failed: tr.querySelector('[data-label="Failed"]').textContent}))`)
		buckets := stats["buckets"].([]any)
		if len(shown) != len(buckets) {
			t.Fatalf("%s: the table has %d rows, the API %d buckets", w.window, len(shown), len(buckets))
		}
		total := 0
		for i, raw := range buckets {
			api := raw.(map[string]any)
			for _, field := range []string{"attempts", "succeeded", "retrying", "failed"} {
				if want := strconv.Itoa(int(api[field].(float64))); shown[i][field] != want {
					t.Errorf("%s bucket %s: %s shown %s, the API says %s", w.window, api["start"], field, shown[i][field], want)
				}
			}
			if shown[i]["start"] != api["start"] {
				t.Errorf("%s bucket %d starts %s on the page, %s in the API", w.window, i, shown[i]["start"], api["start"])
			}
			total += int(api["attempts"].(float64))
		}
		if total != 2 {
			t.Errorf("%s: %d attempts in the buckets, want the failed one and the resend", w.window, total)
		}
	}
	tb.click("Table of these numbers")
	tb.screenshot("endpoint-charts")

	// An attempt's request headers, as sent.
	tb.clickIn(fmt.Sprintf(`//section[@aria-label="Deliveries"]//tr[@data-delivery-id=%q]`, deliveryID), "Attempts")
	tb.click("Request headers of attempt 1")
	tb.see("Webhook-Signature", "Webhook-Id", eventID, "application/json")

	// The search opens an event, then a delivery, by id; an unknown id
	// says so.
	// Each opened page is waited for: the next route must not find the
	// overview still showing while the page opened is on its way.
	for _, c := range []struct{ id, hash, shows string }{
		{eventID, "#/events/" + eventID, "API version"}, {deliveryID, "#/deliveries/" + deliveryID, "Its endpoint"},
	} {
		tb.route("#/overview")
		tb.see("Find an event or delivery by id")
		tb.typeInto("Find an event or delivery by id", c.id)
		tb.click("Find")
		if !eventually(15*time.Second, func() bool { return tb.hashOf() == c.hash }) {
			t.Fatalf("the search for %q did not open %s (input %q); page text:\n%s", c.id, c.hash,
				eval[string](tb, `document.getElementById("find-id").value`), tb.text())
		}
		tb.see(c.shows)
	}
	tb.see("Reload attempts")
	tb.route("#/overview")
	tb.typeInto("Find an event or delivery by id", "0190c0de-0000-7000-8000-000000000000")
	tb.click("Find")
	tb.see("No event or delivery has the id 0190c0de-0000-7000-8000-000000000000.")

	// The events list by delivery outcome.
	tb.route("#/events")
	tb.setField("A delivery", "failed")
	tb.click("Apply")
	tb.see("No events.")
	tb.setField("A delivery", "succeeded")
	tb.click("Apply")
	tb.see(eventID)

	// 375 px: neither the overview nor the endpoint's charts scroll
	// sideways.
	narrow := b.newTab(375)
	narrow.open(base + "#token=" + key)
	narrow.see("Overview", hook.URL+"/hook", "Recent failed deliveries")
	if eval[bool](narrow, `document.documentElement.scrollWidth > document.documentElement.clientWidth`) {
		t.Error("at 375 px the overview scrolls sideways")
	}
	narrow.screenshot("overview-375")
	narrow.route("#/endpoints/" + subID)
	narrow.see("Deliveries over time", "Attempts per hour by outcome")
	waitFor(t, "the narrow chart", 15*time.Second, func() bool { return narrow.present(`//div[@data-chart="outcomes"]//canvas`) })
	if eval[bool](narrow, `document.documentElement.scrollWidth > document.documentElement.clientWidth`) {
		t.Error("at 375 px the endpoint's charts scroll sideways")
	}
	tb.checkClean()
	narrow.checkClean()
}

// waitDelivery waits until the API shows event's one delivery as done
// says, and answers it.
func waitDelivery(t *testing.T, e *engine, key, eventID string, done func(map[string]any) bool) map[string]any {
	t.Helper()
	var d map[string]any
	waitFor(t, "the delivery of "+eventID, 15*time.Second, func() bool {
		_, page := e.call("GET", "http://"+e.public+"/v1/webhook_deliveries?event_id="+eventID, key, nil)
		data, _ := page["data"].([]any)
		if len(data) != 1 {
			return false
		}
		d = data[0].(map[string]any)
		return done(d)
	})
	return d
}

// chartsThatGrew names each drawn chart on the page that is taller than
// the space its box kept before uPlot drew it. A chart is drawn only once
// its page is on screen: one that then grew its box would move the
// buttons below it just as a person (or a test) clicks them, as "Send test
// event" moved under a click (CI, TestPortalRabbitMQDestinationInTheBrowser).
func chartsThatGrew(tb *tab) []string {
	tb.t.Helper()
	return eval[[]string](tb, `[...document.querySelectorAll(".spark, .chart")].flatMap((box) => {
		const drawn = box.querySelector(".uplot");
		if (!drawn) return [];
		const kept = parseFloat(getComputedStyle(box).minHeight) || 0;
		const height = drawn.getBoundingClientRect().height;
		return height > kept ? [(box.dataset.chart || "spark") + ": " + height + " px drawn in " + kept + " px"] : [];
	})`)
}
