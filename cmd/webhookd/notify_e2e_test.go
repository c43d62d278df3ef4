package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/internal/testfixtures/smtpsink"
)

// TestFailureEmailAfterTheAddressIsSet: a delivery that fails for good
// while the merchant has no notification address sends nothing and claims
// nothing; once the address is set through PUT /internal/v1/merchants/{id},
// the next delivery that fails for good sends the e-mail.
func TestFailureEmailAfterTheAddressIsSet(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	t.Parallel()
	sink := smtpsink.New(t)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)
	e := newEngine(t, "WEBHOOKD_SMTP_URL="+sink.URL(), "WEBHOOKD_NOTIFY_FROM=webhookd@example.test",
		"WEBHOOKD_LOG_LEVEL=debug")
	e.start()
	key := e.keysCreate("m_mail")
	e.subscribeURL(key, failing.URL+"/hook")

	// failedForGood waits until the event's delivery failed for good and
	// returns its id.
	failedForGood := func(eventID string) string {
		t.Helper()
		var (
			status int
			list   map[string]any
			id     string
		)
		if !eventually(15*time.Second, func() bool {
			status, list = e.call("GET", "http://"+e.public+"/v1/webhook_deliveries?event_id="+eventID, key, nil)
			if data, _ := list["data"].([]any); status == http.StatusOK && len(data) == 1 {
				if d, _ := data[0].(map[string]any); d["status"] == "failed" {
					id = d["id"].(string)
				}
			}
			return id != ""
		}) {
			t.Fatalf("the delivery of %s did not fail for good: %d %v", eventID, status, list)
		}
		return id
	}

	first := failedForGood(e.publish("m_mail"))
	// The notifier has had its say about the first failure (its log line),
	// before the address is set.
	waitFor(t, "the notifier's line about delivery "+first, 10*time.Second, func() bool { return notifierSpoke(e.logs.String(), first) })
	if n := len(sink.Messages()); n != 0 {
		t.Fatalf("%d e-mails without an address", n)
	}
	status, body := e.call("PUT", "http://"+e.internal+"/internal/v1/merchants/m_mail", e2eToken,
		map[string]any{"notification_email": "ops@merchant.test"})
	if status != http.StatusOK {
		t.Fatalf("set the notification address: %d %v", status, body)
	}
	failedForGood(e.publish("m_mail"))
	waitFor(t, "a failure e-mail after the address was set", 10*time.Second, func() bool { return len(sink.Messages()) > 0 })
	msgs := sink.Messages()
	if len(msgs) != 1 || len(msgs[0].To) != 1 || !strings.Contains(msgs[0].To[0], "ops@merchant.test") {
		t.Errorf("e-mails %+v, want one to ops@merchant.test", msgs)
	}
}

// notifierSpoke tells whether the logs hold the notifier's line about a
// delivery without an address to write to.
func notifierSpoke(logs, deliveryID string) bool {
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, deliveryID) && strings.Contains(line, "no notification address") {
			return true
		}
	}
	return false
}
