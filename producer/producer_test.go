package producer_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/producer"
	"github.com/webhookd/webhookd/store/storetest"
)

// TestPublishIsIdempotent publishes the same event twice and expects one
// task; a bad event is refused before it reaches Redis.
func TestPublishIsIdempotent(t *testing.T) {
	rd := storetest.NewRedis(t)
	opt := asynq.RedisClientOpt{Network: "unix", Addr: rd.Socket}
	p := producer.New(opt)
	defer p.Close()
	ctx := context.Background()
	e := producer.Event{ID: uuid.NewString(), MerchantID: "m1", Type: "payout.paid", Payload: json.RawMessage(`{"id":"po_1"}`)}
	if err := p.PublishBatch(ctx, []producer.Event{e, e}); err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(ctx, producer.Event{MerchantID: "m1", Type: "payout.paid", Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	insp := asynq.NewInspector(opt)
	defer insp.Close()
	tasks, err := insp.ListPendingTasks(producer.Queue)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 2 {
		t.Fatalf("%d pending tasks, want 2 (the duplicate publish adds none)", len(tasks))
	}
	for _, bad := range []producer.Event{
		{ID: "not-a-uuid", MerchantID: "m1", Type: "payout.paid", Payload: json.RawMessage(`{}`)},
		{MerchantID: "", Type: "payout.paid", Payload: json.RawMessage(`{}`)},
		{MerchantID: "m1", Type: "payout.paid", Payload: json.RawMessage(`{`)},
	} {
		if err := p.Publish(ctx, bad); err == nil {
			t.Errorf("Publish(%+v) accepted a bad event", bad)
		}
	}
}
