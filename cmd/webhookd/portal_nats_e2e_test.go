package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/webhookd/webhookd/internal/store/storetest"
)

// portalNATS is the machine's NATS with JetStream (.ci/services.sh starts
// it): the test makes a stream of its own and deletes it.
const portalNATS = "nats://127.0.0.1:4222"

// TestPortalNATSDestinationInTheBrowser: a kind the portal has no code
// for is offered, filled in and shown from its metadata alone. A person
// picks NATS JetStream, types its servers (a list) and subject, leaves
// TLS unticked and makes the endpoint; the page shows its kind, what a
// delivery becomes and its fields; a test event reaches the stream and
// its attempt shows JetStream's acknowledgement.
func TestPortalNATSDestinationInTheBrowser(t *testing.T) {
	storetest.FullLane(t, "a browser test of the real binary")
	t.Parallel() // it measures no latency: the browser tests run beside each other
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nc, err := nats.Connect(portalNATS)
	if err != nil {
		t.Fatalf("NATS on %s (bash .ci/services.sh starts it): %v", portalNATS, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	name := "portal_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	subject := "webhooks.portal." + name
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })

	e := newEngine(t, "WEBHOOKD_DESTINATIONS=webhook,nats")
	e.start()
	key := e.keysCreate("m_nats")
	b := newBrowser(t)
	tb := b.newTab(1280)
	defer tb.checkClean()
	tb.open("http://" + e.public + "/portal/#token=" + key)
	tb.see("Endpoints")

	tb.route("#/endpoints/new")
	tb.see("Deliver to", "Where deliveries go")
	tb.setField("Where deliveries go", "nats")
	tb.see("Servers", "Subject", "TLS")
	tb.typeInto("Servers", "127.0.0.1:4222")
	tb.typeInto("Subject", subject)
	tb.click("Create endpoint")
	tb.see("Endpoint created.", "NATS", "Delivers to", subject, "127.0.0.1:4222")
	subID := strings.TrimPrefix(tb.hashOf(), "#/endpoints/")
	_, sub := e.call("GET", "http://"+e.public+"/v1/webhook_subscriptions/"+subID, key, nil)
	if d, _ := sub["destination"].(map[string]any); d["type"] != "nats" || d["subject"] != subject {
		t.Fatalf("the form made %v", sub)
	}

	tb.click("Send test event")
	tb.see("Test event sent.")
	consumer, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := consumer.Next(jetstream.FetchMaxWait(20 * time.Second))
	if err != nil {
		t.Fatalf("no message reached the stream: %v", err)
	}
	if !strings.Contains(string(m.Data()), `"ping.test"`) || m.Headers().Get("webhook-signature") == "" {
		t.Errorf("the stream got %s with headers %v, want the signed test event", m.Data(), m.Headers())
	}
	succeeded := func(d map[string]any) bool { return d["status"] == "succeeded" }
	openNewestAttempts(t, tb, e, key, subID, succeeded)
	tb.see("JetStream")
	tb.screenshot("endpoint-nats")
}
