package publish_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/dispatcher/publish"
	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
	"github.com/webhookd/webhookd/producer"
)

// TestPublisherRules is the specification of a published event, as every
// path (HTTP ingest, producer tasks, send_test_event) applies it.
func TestPublisherRules(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	d, _ := e.Dispatcher(func(c *dispatcher.Config) {
		c.MaxPayloadBytes = 64
		c.VersionUsable = func(v string, _ time.Time) bool { return v == dispatchertest.TestVersion }
	})
	good := producer.Event{MerchantID: "m1", Type: "payout.paid", Payload: json.RawMessage(` {"id": "po_1"} `)}
	cases := []struct {
		name      string
		change    func(*producer.Event)
		wantParam string
		wantRule  string // "" when the event is good
	}{
		{"a good event", func(*producer.Event) {}, "", ""},
		{"with its own id", func(e *producer.Event) { e.ID = uuid.NewString() }, "", ""},
		{"at a usable version", func(e *producer.Event) { e.APIVersion = dispatchertest.TestVersion }, "", ""},
		{"no merchant", func(e *producer.Event) { e.MerchantID = "" }, "merchant_id", "missing"},
		{"a merchant id with a NUL", func(e *producer.Event) { e.MerchantID = "m\x001" }, "merchant_id", "merchant_id_malformed"},
		{"a merchant id not UTF-8", func(e *producer.Event) { e.MerchantID = "m\xff" }, "merchant_id", "merchant_id_malformed"},
		{"no type", func(e *producer.Event) { e.Type = "" }, "type", "missing"},
		{"an unknown type", func(e *producer.Event) { e.Type = "payout.lost" }, "type", "type_unknown"},
		{"the reserved ping.test", func(e *producer.Event) { e.Type = publish.TestEventType }, "type", "type_reserved"},
		{"no payload", func(e *producer.Event) { e.Payload = nil }, "payload", "missing"},
		{"a null payload", func(e *producer.Event) { e.Payload = json.RawMessage(`null`) }, "payload", "missing"},
		{"an array payload", func(e *producer.Event) { e.Payload = json.RawMessage(`[1]`) }, "payload", "payload_not_object"},
		{"a payload over the limit", func(e *producer.Event) {
			e.Payload = json.RawMessage(`{"memo": "` + string(make([]byte, 64)) + `"}`)
		}, "payload", invalid.RuleTooLarge},
		{"a broken payload", func(e *producer.Event) { e.Payload = json.RawMessage(`{"a":}`) }, "payload", "payload_not_json"},
		{"a payload string with a NUL", func(e *producer.Event) { e.Payload = json.RawMessage(`{"memo": "a\u0000b"}`) }, "payload.memo", invalid.RuleNUL},
		{"a payload key not UTF-8", func(e *producer.Event) { e.Payload = json.RawMessage("{\"m\xffo\": 1}") }, "payload", invalid.RuleNotUTF8},
		{"a payload with a lone surrogate", func(e *producer.Event) { e.Payload = json.RawMessage(`{"memo": "\ud800"}`) }, "payload.memo", invalid.RuleNotUTF8},
		{"an id not a UUID", func(e *producer.Event) { e.ID = "po_1" }, "id", "id_not_uuid"},
		{"an unusable version", func(e *producer.Event) { e.APIVersion = "1999-01-01" }, "api_version", "api_version_unknown"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := good
			tc.change(&ev)
			err := d.Publisher.Check(ev)
			bad := invalid.As(err)
			switch {
			case tc.wantRule == "" && err != nil:
				t.Fatalf("Check refused a good event: %v", err)
			case tc.wantRule != "" && (bad == nil || bad.Param != tc.wantParam || bad.Rule != tc.wantRule):
				t.Fatalf("Check = %v, want param %s rule %s", err, tc.wantParam, tc.wantRule)
			}
			_, _, perr := d.Publisher.Publish(context.Background(), ev)
			if (err == nil) != (perr == nil) {
				t.Fatalf("Publish = %v, Check = %v: they must agree", perr, err)
			}
		})
	}
}

// TestProducerEventsFollowThePublishersRules: an event published with the
// producer package that breaks a rule (an unknown type, the reserved
// ping.test…) is refused by the worker, with a metric and a refusal the
// producer reads, and never reaches a receiver, even a ["*"] one.
func TestProducerEventsFollowThePublishersRules(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusOK))
	e.Subscribe("m1", rcv.URL, "*")
	d, reg := e.Dispatcher()
	e.Run(d)
	p := producer.New(e.Cfg.Redis)
	t.Cleanup(func() { p.Close() })
	ctx := context.Background()

	bad := []struct {
		event producer.Event
		rule  string
	}{
		{producer.Event{Type: "payout.lost"}, "type_unknown"},
		{producer.Event{Type: publish.TestEventType}, "type_reserved"},
		{producer.Event{Type: "payout.paid", Payload: json.RawMessage(`[1]`)}, "payload_not_object"},
		{producer.Event{Type: "payout.paid", MerchantID: "-"}, "missing"},
	}
	for i := range bad {
		ev := &bad[i].event
		ev.ID = uuid.NewString()
		if ev.MerchantID == "" {
			ev.MerchantID = "m1"
		} else {
			ev.MerchantID = ""
		}
		if ev.Payload == nil {
			ev.Payload = json.RawMessage(`{"id":"po_1"}`)
		}
		if err := p.Publish(ctx, *ev); err != nil {
			t.Fatalf("Publish(%s): %v", ev.Type, err)
		}
	}
	good := producer.Event{ID: uuid.NewString(), MerchantID: "m1", Type: "payout.paid", Payload: json.RawMessage(`{"id":"po_2"}`)}
	if err := p.Publish(ctx, good); err != nil {
		t.Fatal(err)
	}

	for _, b := range bad {
		var refused *producer.Refused
		e.WaitFor("the refusal of "+b.event.Type, 10*time.Second, func() bool {
			var err error
			refused, err = p.Refusal(ctx, b.event.ID)
			return err == nil && refused != nil
		})
		if refused.Rule != b.rule {
			t.Errorf("%s refused for %s, want %s", b.event.Type, refused.Rule, b.rule)
		}
		if _, err := e.Store.Views.GetEvent(ctx, "m1", uuid.MustParse(b.event.ID)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("refused event %s was stored (%v)", b.event.Type, err)
		}
		if got := dispatchertest.CounterWith(t, reg, "webhookd_events_refused_total", "rule", b.rule); got < 1 {
			t.Errorf("webhookd_events_refused_total{rule=%q} = %v", b.rule, got)
		}
	}
	e.WaitFor("the good event's delivery", 10*time.Second, func() bool { return len(rcv.Got()) >= 1 })
	// Every task has run (the refusals are written before their tasks
	// end, the good one delivered): the receiver's log is final.
	for _, r := range rcv.Got() {
		if id := r.Header.Get("webhook-id"); id != good.ID {
			t.Errorf("the receiver got event %s, a refused one", id)
		}
	}

	// The core API corrects the first refused event and publishes it again
	// under its id: it is stored and delivered, and its refusal is gone.
	fixed := bad[0].event
	fixed.Type = "payout.paid"
	if err := p.Publish(ctx, fixed); err != nil {
		t.Fatal(err)
	}
	e.WaitFor("the corrected event's delivery", 10*time.Second, func() bool { return len(rcv.Got()) >= 2 })
	e.WaitFor("its refusal to be cleared", 10*time.Second, func() bool {
		r, err := p.Refusal(ctx, fixed.ID)
		return err == nil && r == nil
	})
}
