package publish_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/payloadschema"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
	"github.com/webhookd/webhookd/producer"
)

// With WEBHOOKD_PAYLOAD_VALIDATION=enforce, a producer event whose payload
// does not match its type's schema is refused by the worker like any
// other broken rule: a refusal of rule payload_schema naming the member,
// which the producer reads, and the refusal metric. (The producer itself
// checks no schema: the catalogue is webhookd's configuration.)
func TestProducerEventsAreJudgedByTheirSchema(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	d, reg := e.Dispatcher(func(c *dispatcher.Config) {
		v, err := payloadschema.New(payloadschema.Config{Mode: payloadschema.Enforce, Types: catalogue.New(catalogue.Names()).Entries()})
		if err != nil {
			t.Fatal(err)
		}
		c.Payloads = v
	})
	e.Run(d)
	p := producer.New(e.Cfg.Redis)
	t.Cleanup(func() { p.Close() })
	ctx := context.Background()

	var payload map[string]any
	if err := json.Unmarshal(catalogue.New(catalogue.Names()).Example("payout.paid"), &payload); err != nil {
		t.Fatal(err)
	}
	payload["currency"] = "JPY"
	b, _ := json.Marshal(payload)
	ev := producer.Event{ID: uuid.NewString(), MerchantID: "m1", Type: "payout.paid", Payload: b}
	if err := p.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	var refused *producer.Refused
	e.WaitFor("the refusal", 10*time.Second, func() bool {
		var err error
		refused, err = p.Refusal(ctx, ev.ID)
		return err == nil && refused != nil
	})
	if refused.Rule != payloadschema.Rule || refused.Param != "payload.currency" {
		t.Errorf("refusal %+v, want rule %s on payload.currency", refused, payloadschema.Rule)
	}
	if got := dispatchertest.CounterWith(t, reg, "webhookd_events_refused_total", "rule", payloadschema.Rule); got != 1 {
		t.Errorf("webhookd_events_refused_total{rule=%q} = %v", payloadschema.Rule, got)
	}
}
