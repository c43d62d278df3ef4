package producer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/producer"
)

// The core API publishes a payout.paid event when a payout settles. The
// event id is the one the core API keeps for that fact, so that retrying
// the publish after an error never makes a second event. Later it can ask
// whether webhookd refused the event, and why.
func Example() {
	// webhookd's Redis (database 13 here, so that the example stays out of
	// a running engine's queues).
	p := producer.New(asynq.RedisClientOpt{Addr: "127.0.0.1:6379", DB: 13})
	defer p.Close()
	ctx := context.Background()

	payout, _ := json.Marshal(map[string]any{
		"id": "po_123", "status": "paid", "amount": "150.00", "currency": "EUR",
	})
	event := producer.Event{
		ID:         "0192f1c4-7a4e-7b1e-9c55-3f1d2a9b8c01",
		MerchantID: "merchant_42",
		Type:       "payout.paid",
		Payload:    payout,
	}
	if err := p.Publish(ctx, event); err != nil {
		log.Fatalf("publish payout.paid: %v", err) // retry later with the same id
	}
	fmt.Println("published", event.ID)

	refused, err := p.Refusal(ctx, event.ID)
	if err != nil {
		log.Fatalf("refusal of %s: %v", event.ID, err)
	}
	fmt.Println("refused:", refused != nil)
	// Output:
	// published 0192f1c4-7a4e-7b1e-9c55-3f1d2a9b8c01
	// refused: false
}

// The core API connects with the URL webhookd itself is given as
// WEBHOOKD_REDIS_URL (redis://, rediss:// or unix://), and handles a
// refusal Publish makes itself like one the worker makes later: a
// *producer.Refused naming the field, the rule and why.
func ExampleNewFromURL() {
	// Database 13 here, so that the example stays out of a running
	// engine's queues; in the core API, the engine's WEBHOOKD_REDIS_URL.
	p, err := producer.NewFromURL("redis://127.0.0.1:6379/13")
	if err != nil {
		log.Fatalf("webhookd producer: %v", err) // a malformed URL: a configuration error
	}
	defer p.Close()
	ctx := context.Background()

	err = p.Publish(ctx, producer.Event{
		ID:         "0192f1c4-7a4e-7b1e-9c55-3f1d2a9b8c02",
		MerchantID: "merchant_42",
		Type:       "deposit.received",
		Payload:    json.RawMessage(`{"id":"dep_9","amount":"20.00","currency":"EUR"}`),
	})
	fmt.Println("deposit.received published:", err == nil)

	err = p.Publish(ctx, producer.Event{ID: "dep_9", MerchantID: "merchant_42", Type: "deposit.received",
		Payload: json.RawMessage(`{}`)})
	var refused *producer.Refused
	if errors.As(err, &refused) {
		fmt.Printf("refused: %s (%s): %s\n", refused.Param, refused.Rule, refused.Message)
	}
	// Output:
	// deposit.received published: true
	// refused: id (id_not_uuid): id must be a UUID.
}

// The core API schedules a reminder event for ten minutes from now: it is
// stored at once and delivered then (cancel it with POST
// /internal/v1/events/{id}/cancel). A DeliverAt that is not in the future
// is refused by Publish itself.
func ExampleProducer_Publish_scheduled() {
	// Database 13 here, so that the example stays out of a running
	// engine's queues.
	p := producer.New(asynq.RedisClientOpt{Addr: "127.0.0.1:6379", DB: 13})
	defer p.Close()
	ctx := context.Background()

	at := time.Now().Add(10 * time.Minute)
	err := p.Publish(ctx, producer.Event{
		ID:         "0192f1c4-7a4e-7b1e-9c55-3f1d2a9b8c03",
		MerchantID: "merchant_42",
		Type:       "payout.paid",
		Payload:    json.RawMessage(`{"id":"po_124","status":"paid"}`),
		DeliverAt:  &at,
	})
	fmt.Println("scheduled:", err == nil)

	past := time.Now().Add(-time.Minute)
	err = p.Publish(ctx, producer.Event{ID: "0192f1c4-7a4e-7b1e-9c55-3f1d2a9b8c04", MerchantID: "merchant_42",
		Type: "payout.paid", Payload: json.RawMessage(`{}`), DeliverAt: &past})
	var refused *producer.Refused
	if errors.As(err, &refused) {
		fmt.Printf("refused: %s (%s): %s\n", refused.Param, refused.Rule, refused.Message)
	}
	// Output:
	// scheduled: true
	// refused: deliver_at (deliver_at_past): deliver_at must be in the future; omit it to deliver at once.
}
