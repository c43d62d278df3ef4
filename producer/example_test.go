package producer_test

import (
	"context"
	"encoding/json"
	"log"

	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/producer"
)

// The core API publishes a payout.paid event when a payout settles. The
// event id is the one the core API keeps for that fact, so that retrying
// the publish after an error never makes a second event.
func Example() {
	p := producer.New(asynq.RedisClientOpt{Addr: "127.0.0.1:6379"})
	defer p.Close()

	payout, _ := json.Marshal(map[string]any{
		"id": "po_123", "status": "paid", "amount": "150.00", "currency": "EUR",
	})
	err := p.Publish(context.Background(), producer.Event{
		ID:         "0192f1c4-7a4e-7b1e-9c55-3f1d2a9b8c01",
		MerchantID: "merchant_42",
		Type:       "payout.paid",
		Payload:    payout,
	})
	if err != nil {
		log.Printf("publish payout.paid: %v", err) // retry later with the same id
	}
}
