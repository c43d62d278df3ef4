package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/webhookd/webhookd/internal/store/storetest"
)

// portalRabbitMQ is the machine's RabbitMQ (.ci/services.sh starts it):
// the test uses a queue of its own and never stops the server.
const portalRabbitMQ = "127.0.0.1:5672"

// rabbitQueueFor declares an exclusive queue of the test's own (it goes
// when the test's connection closes) and answers its name and what
// reaches it.
func rabbitQueueFor(t *testing.T) (string, <-chan amqp.Delivery) {
	t.Helper()
	conn, err := amqp.Dial("amqp://guest:guest@" + portalRabbitMQ + "/")
	if err != nil {
		t.Fatalf("RabbitMQ on %s (bash .ci/services.sh starts it): %v", portalRabbitMQ, err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare("webhookd-portal-"+uuid.NewString(), false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q.Name, msgs
}

// openNewestAttempts opens the attempts of the subscription's newest delivery on
// its endpoint page, once the API shows it settled as want says, and
// answers the XPath of its detail row.
func openNewestAttempts(t *testing.T, tb *tab, e *engine, key, subID string, want func(d map[string]any) bool) string {
	t.Helper()
	var id string
	waitFor(t, "the newest delivery of "+subID, 20*time.Second, func() bool {
		list := e.subscriptionDeliveries(key, subID)
		if len(list) == 0 || !want(list[0]) {
			return false
		}
		id = list[0]["id"].(string)
		return true
	})
	row := fmt.Sprintf(`//tr[@data-delivery-id=%q]`, id)
	tb.until(`//section[@aria-label="Deliveries"]`, "Refresh", row)
	tb.clickIn(row, "Attempts")
	detail := row + `/following-sibling::tr[1]`
	waitFor(t, "the attempts of "+id, stepTimeout, func() bool { return tb.present(detail + `//table[contains(@class, "attempts")]`) })
	return detail
}

// TestPortalRabbitMQDestinationInTheBrowser: the endpoint form offers the
// kinds the server enables, drawn from the registry's metadata, refuses a
// batch beside a broker with the API's own words next to the field, and
// makes a RabbitMQ subscription from what a person types; the pages show
// its kind, its target and its fields that are not credentials, and never
// its password; a test event reaches the queue and its attempt shows the
// broker's answer. An edit that leaves the destination alone keeps its
// credentials; one that changes it asks for the broker URL (which holds
// the password) again, and an unroutable routing key then shows the
// broker's refusal.
func TestPortalRabbitMQDestinationInTheBrowser(t *testing.T) {
	storetest.FullLane(t, "a browser test of the real binary")
	t.Parallel() // it measures no latency: the browser tests run beside each other
	queue, messages := rabbitQueueFor(t)
	// The operator turns SQS off, so that the form is seen to offer the
	// kinds the server allows and no other.
	e := newEngine(t, "WEBHOOKD_DESTINATIONS=webhook,rabbitmq,kafka,gcp_pubsub")
	e.start()
	key := e.keysCreate("m_broker")
	b := newBrowser(t)
	tb := b.newTab(1280)
	defer tb.checkClean()
	tb.open("http://" + e.public + "/portal/#token=" + key)
	tb.see("Endpoints")

	// The kinds offered are the server's (WEBHOOKD_DESTINATIONS above).
	tb.route("#/endpoints/new")
	tb.see("Deliver to", "Where deliveries go", "Payload and batching")
	kinds := eval[[]string](tb, `[...document.querySelectorAll("#endpoint-kind option")].map((o) => o.textContent)`)
	if want := []string{"HTTP endpoint", "RabbitMQ", "Kafka", "Google Cloud Pub/Sub"}; !slices.Equal(kinds, want) {
		t.Errorf("the form offers %v, want %v", kinds, want)
	}

	// routingKeyFact is the endpoint page's routing key, one of the
	// facts drawn from the kind's fields.
	routingKeyFact := `//dt[normalize-space()="Routing key"]/following-sibling::dd[1]`

	// A broker with a batch: the API's refusal shows next to the field.
	tb.setField("Where deliveries go", "rabbitmq")
	tb.see("Broker URL", "Routing key")
	if tb.present(`//label[@for="endpoint-url"]`) {
		t.Error("the URL field still shows for a RabbitMQ destination")
	}
	brokerURL := "amqp://guest:guest@" + portalRabbitMQ + "/"
	tb.typeInto("Broker URL", brokerURL)
	tb.typeInto("Routing key", queue)
	tb.setField("Batching", "on")
	tb.click("Create endpoint")
	refusal := `//label[@for="endpoint-batch"]/following-sibling::p[@class="field-error"]`
	if got := tb.textOf(refusal); !strings.Contains(got, "batch is for HTTP endpoints") {
		t.Errorf("next to the batch field: %q, want the API's refusal", got)
	}
	tb.screenshot("endpoint-broker-refused-batch")

	// Without the batch it is made.
	tb.setField("Batching", "off")
	tb.click("Create endpoint")
	// The target shows without its user and password, the facts without
	// the broker URL (a credential) and with the routing key.
	tb.see("Endpoint created.", "RabbitMQ", "amqp://"+portalRabbitMQ, "Delivers to", "Routing key", queue,
		"Payload", "Full: the event with its payload", "Batching", "Off: one event per request")
	tb.notSee("guest", "xxxxx")
	if got := tb.textOf(routingKeyFact); got != queue {
		t.Errorf("the routing key shows as %q, want %q", got, queue)
	}
	if tb.present(`//dt[normalize-space()="Broker URL"]`) {
		t.Error("the endpoint's facts show the broker URL, which holds the password")
	}
	if tb.present(`//button[normalize-space()="Check my endpoint"]`) {
		t.Error("a broker endpoint offers Check my endpoint, which the API refuses for it")
	}
	subID := strings.TrimPrefix(tb.hashOf(), "#/endpoints/")
	_, sub := e.call("GET", "http://"+e.public+"/v1/webhook_subscriptions/"+subID, key, nil)
	if d, _ := sub["destination"].(map[string]any); d["type"] != "rabbitmq" || d["routing_key"] != queue {
		t.Fatalf("the form made %v", sub)
	}

	// A test event: on the queue, and the attempt shows the broker's
	// answer in place of an HTTP status.
	tb.click("Send test event")
	tb.see("Test event sent.")
	select {
	case m := <-messages:
		if !strings.Contains(string(m.Body), `"ping.test"`) {
			t.Errorf("the queue got %s, want the test event", m.Body)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no message reached the queue")
	}
	succeeded := func(d map[string]any) bool { return d["status"] == "succeeded" }
	detail := openNewestAttempts(t, tb, e, key, subID, succeeded)
	tb.see("Broker answer", "Broker message", "confirmed by broker")
	if got := tb.textOf(detail + `//td[@data-label="Broker answer"]`); got != "confirmed" {
		t.Errorf("the broker's answer shows as %q, want confirmed", got)
	}
	if tb.present(detail + `//th[normalize-space()="HTTP status"]`) {
		t.Error("a broker attempt shows an HTTP status column")
	}
	tb.screenshot("endpoint-rabbitmq")

	// The list names it by kind and target, without credentials.
	tb.route("#/endpoints")
	tb.see("RabbitMQ", "amqp://"+portalRabbitMQ)
	tb.notSee("guest", "xxxxx")
	tb.screenshot("endpoints-broker")

	// An edit that leaves the destination alone keeps it, password
	// included: the next test event is confirmed again.
	tb.route("#/endpoints/" + subID + "/edit")
	tb.see("Deliver to", "One is set: leave this empty to keep the destination as it is.")
	tb.typeInto("Description", "Ledger queue")
	tb.click("Save changes")
	tb.see("Endpoint saved.", "Ledger queue", "RabbitMQ")
	tb.click("Send test event")
	tb.see("Test event sent.")
	select {
	case <-messages:
	case <-time.After(20 * time.Second):
		t.Fatal("after an edit that kept the destination, no message reached the queue")
	}

	// A changed destination is sent whole, as the API replaces it: the
	// broker URL, which holds the password, is asked for again, then a routing key no queue is bound
	// to is refused by the broker, and the attempt says so.
	tb.route("#/endpoints/" + subID + "/edit")
	tb.see("Deliver to")
	tb.clearField("Routing key")
	tb.typeInto("Routing key", "no-such-queue-"+queue)
	tb.click("Save changes")
	if got := tb.textOf(`//label[@for="dest-rabbitmq-url"]/following-sibling::p[@class="field-error"]`); !strings.Contains(got, "enter its credential again") {
		t.Errorf("next to the broker URL: %q, want it asked for again", got)
	}
	tb.typeInto("Broker URL", brokerURL)
	tb.click("Save changes")
	tb.see("Endpoint saved.", "Routing key", "no-such-queue-"+queue)
	if got := tb.textOf(routingKeyFact); got != "no-such-queue-"+queue {
		t.Errorf("the changed routing key shows as %q, want no-such-queue-%s", got, queue)
	}
	tb.notSee("guest", "xxxxx")
	tb.click("Send test event")
	tb.see("Test event sent.")
	failed := func(d map[string]any) bool { return d["status"] == "failed" && d["attempt_count"].(float64) == 3 }
	detail = openNewestAttempts(t, tb, e, key, subID, failed)
	tb.see("refused", "NO_ROUTE")
	if got := tb.textOf(detail + `//tr[td[@data-label="Attempt"][normalize-space()="1"]]/td[@data-label="Broker answer"]`); got != "refused" {
		t.Errorf("the unroutable attempt's answer shows as %q, want refused", got)
	}
}

// TestPortalThinBatchedEndpointInTheBrowser: the form makes a thin,
// batched HTTP endpoint; its page shows both settings; the receiver gets
// thin events in batches; and an attempt shows its batch's id, which
// Copy puts on the clipboard, and how many deliveries the batch carried.
func TestPortalThinBatchedEndpointInTheBrowser(t *testing.T) {
	storetest.FullLane(t, "a browser test of the real binary")
	t.Parallel() // it measures no latency: the browser tests run beside each other
	e := newEngine(t)
	e.start()
	key := e.keysCreate("m_batch")
	hook := newHookReceiver(t)
	b := newBrowser(t)
	tb := b.newTab(1280)
	defer tb.checkClean()
	origin := "http://" + e.public
	tb.open(origin + "/portal/#token=" + key)
	tb.see("Endpoints")

	tb.route("#/endpoints/new")
	tb.see("Payload and batching")
	tb.typeInto("URL", hook.URL+"/hook")
	tb.setField("Payload style", "thin")
	tb.setField("Batching", "on")
	tb.clearField("Most events per request")
	tb.typeInto("Most events per request", "5")
	tb.clearField("Longest wait")
	tb.typeInto("Longest wait", "1000")
	tb.click("Create endpoint")
	tb.see("Endpoint created.", hook.URL+"/hook", "thin", "without its payload", "Up to 5 events per request, waiting at most 1000 ms for them")
	subID := strings.TrimPrefix(tb.hashOf(), "#/endpoints/")
	_, sub := e.call("GET", "http://"+e.public+"/v1/webhook_subscriptions/"+subID, key, nil)
	if sub["payload_style"] != "thin" || fmt.Sprint(sub["batch"]) != "map[max_size:5 max_wait_ms:1000]" {
		t.Fatalf("the form made payload_style %v, batch %v", sub["payload_style"], sub["batch"])
	}
	tb.screenshot("endpoint-thin-batched")

	// Three events published together go in batches of thin envelopes.
	event := map[string]any{"merchant_id": "m_batch", "type": "payout.paid", "payload": map[string]any{"id": "po_1", "status": "paid"}}
	e.publishBatch([]map[string]any{event, event, event})
	var batchID, size string
	waitFor(t, "the three deliveries, batched", 20*time.Second, func() bool {
		list := e.subscriptionDeliveries(key, subID)
		if len(list) != 3 {
			return false
		}
		for _, d := range list {
			if d["status"] != "succeeded" {
				return false
			}
		}
		_, full := e.call("GET", "http://"+e.public+"/v1/webhook_deliveries/"+list[0]["id"].(string), key, nil)
		a := full["attempts"].([]any)[0].(map[string]any)
		batchID, _ = a["batch_id"].(string)
		headers, _ := a["request_headers"].(map[string]any)
		for k, v := range headers {
			if strings.EqualFold(k, "webhook-batch-size") {
				size, _ = v.(string)
			}
		}
		return true
	})
	if !strings.HasPrefix(batchID, "batch_") || size == "" {
		t.Fatalf("the newest delivery's attempt has batch id %q, size %q; want a batch", batchID, size)
	}
	first := hook.waitFor(t, 1)
	var envelope struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(first.body, &envelope); err != nil || len(envelope.Data) == 0 || envelope.Data[0]["payload"] != nil {
		t.Errorf("the receiver got %s (%v), want a batch of thin envelopes", first.body, err)
	}

	// The attempt shows its batch, copyable, and the batch's size.
	detail := openNewestAttempts(t, tb, e, key, subID, func(d map[string]any) bool { return d["status"] == "succeeded" })
	n := size + " deliveries in this batch"
	if size == "1" {
		n = "1 delivery in this batch"
	}
	tb.see("Batch", batchID, n)
	for _, name := range []string{"clipboard-read", "clipboard-write"} {
		if _, err := chromedp.CallBrowser(tb.ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
			Permission: &cdpbrowser.PermissionDescriptor{Name: name}, Setting: cdpbrowser.PermissionSettingGranted, Origin: origin}); err != nil {
			t.Fatalf("grant %s: %v", name, err)
		}
	}
	tb.clickIn(detail, "Copy")
	tb.see("Copied.")
	ctx, cancel := context.WithTimeout(tb.ctx, stepTimeout)
	defer cancel()
	copied, err := chromedp.Run(ctx, chromedp.Evaluate[string](`navigator.clipboard.readText()`, chromedp.EvalAwaitPromise))
	if err != nil || copied != batchID {
		t.Errorf("the clipboard holds %q (%v), want the batch id %s", copied, err, batchID)
	}
	tb.screenshot("attempt-batch")
	if hook.count() >= 3 {
		t.Errorf("the receiver got %d requests for 3 events, want fewer: batches", hook.count())
	}
}

// TestPortalPollSubscriptionInTheBrowser: a poll subscription is named by
// what it is, read by the merchant's server, with its backlog and its
// last read, on the endpoints page and its own.
func TestPortalPollSubscriptionInTheBrowser(t *testing.T) {
	storetest.FullLane(t, "a browser test of the real binary")
	t.Parallel() // it measures no latency: the browser tests run beside each other
	e := newEngine(t)
	e.start()
	key := e.keysCreate("m_poll")
	status, sub := e.call("POST", "http://"+e.public+"/v1/webhook_subscriptions", key,
		map[string]any{"events": []string{"*"}, "destination": map[string]any{"type": "poll"}})
	if status != 201 {
		t.Fatalf("create poll subscription: %d %v", status, sub)
	}
	for range 3 {
		e.publish("m_poll")
	}
	b := newBrowser(t)
	tb := b.newTab(1280)
	defer tb.checkClean()
	tb.open("http://" + e.public + "/portal/#token=" + key)
	tb.see("Endpoints", "read by your server", "Backlog", "3 deliveries not acknowledged", "Never read")
	tb.route("#/endpoints/" + sub["id"].(string))
	tb.see("nothing is sent: your server reads the deliveries", "3 deliveries not acknowledged", "Never read")
}
