package producer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

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
