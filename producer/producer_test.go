package producer_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/producer"
)

// newProducer is a Producer on a private Redis, with an inspector on it.
func newProducer(t *testing.T) (*producer.Producer, *asynq.Inspector, asynq.RedisConnOpt) {
	t.Helper()
	rd := storetest.NewRedis(t)
	opt := asynq.RedisClientOpt{Network: "unix", Addr: rd.Socket}
	p := producer.New(opt)
	t.Cleanup(func() { p.Close() })
	insp := asynq.NewInspector(opt)
	t.Cleanup(func() { insp.Close() })
	return p, insp, opt
}

// TestPublishIsIdempotent publishes the same event twice and expects one
// task.
func TestPublishIsIdempotent(t *testing.T) {
	p, insp, _ := newProducer(t)
	ctx := context.Background()
	e := producer.Event{ID: uuid.NewString(), MerchantID: "m1", Type: "payout.paid", Payload: json.RawMessage(`{"id":"po_1"}`)}
	if err := p.PublishBatch(ctx, []producer.Event{e, e}); err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(ctx, producer.Event{MerchantID: "m1", Type: "payout.paid", Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	tasks, err := insp.ListPendingTasks(producer.Queue)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 2 {
		t.Fatalf("%d pending tasks, want 2 (the duplicate publish adds none)", len(tasks))
	}
}

// TestPublishRefusesWhatCannotBeATask: Publish refuses only what it cannot
// build a task from, with the field, rule and message of HTTP ingest
// (admin's TestProducerRefusesAsHTTPIngest compares them); every other
// rule is the worker's (dispatcher's
// TestProducerEventsFollowThePublishersRules).
func TestPublishRefusesWhatCannotBeATask(t *testing.T) {
	p, insp, _ := newProducer(t)
	for _, tc := range []struct {
		name        string
		event       producer.Event
		param, rule string
	}{
		{"id not a UUID", producer.Event{ID: "not-a-uuid", MerchantID: "m1", Type: "payout.paid", Payload: json.RawMessage(`{}`)}, "id", producer.RuleIDNotUUID},
		{"id in braces", producer.Event{ID: "{" + uuid.NewString() + "}", MerchantID: "m1", Type: "payout.paid", Payload: json.RawMessage(`{}`)}, "id", producer.RuleIDNotUUID},
		{"payload not JSON", producer.Event{MerchantID: "m1", Type: "payout.paid", Payload: json.RawMessage(`{`)}, "payload", producer.RulePayloadNotJSON},
		{"payload left absent", producer.Event{MerchantID: "m1", Type: "payout.paid"}, "payload", producer.RuleMissing},
		{"payload blank", producer.Event{MerchantID: "m1", Type: "payout.paid", Payload: json.RawMessage(" \n")}, "payload", producer.RuleMissing},
		// Text webhookd cannot store, which encoding the task would keep
		// (the payload) or turn into U+FFFD (a string).
		{"NUL deep in the payload", producer.Event{MerchantID: "m1", Type: "payout.paid", Payload: json.RawMessage(`{"a":{"b":["x","\u0000"]}}`)}, "payload.a.b[1]", producer.RuleTextNUL},
		{"NUL in a payload key", producer.Event{MerchantID: "m1", Type: "payout.paid", Payload: json.RawMessage(`{"a":{"\u0000":1}}`)}, "payload.a", producer.RuleTextNUL},
		{"invalid UTF-8 in the payload", producer.Event{MerchantID: "m1", Type: "payout.paid", Payload: json.RawMessage("{\"a\":\"\xff\"}")}, "payload.a", producer.RuleTextNotUTF8},
		{"lone surrogate in the payload", producer.Event{MerchantID: "m1", Type: "payout.paid", Payload: json.RawMessage(`{"a":"\udc00"}`)}, "payload.a", producer.RuleTextNotUTF8},
		{"NUL in the merchant id", producer.Event{MerchantID: "m\x00", Type: "payout.paid", Payload: json.RawMessage(`{}`)}, "merchant_id", producer.RuleTextNUL},
		{"invalid UTF-8 in the merchant id", producer.Event{MerchantID: "m\xff", Type: "payout.paid", Payload: json.RawMessage(`{}`)}, "merchant_id", producer.RuleTextNotUTF8},
		{"NUL in the type", producer.Event{MerchantID: "m1", Type: "payout.paid\x00", Payload: json.RawMessage(`{}`)}, "type", producer.RuleTextNUL},
		{"invalid UTF-8 in the api_version", producer.Event{MerchantID: "m1", Type: "payout.paid", Payload: json.RawMessage(`{}`), APIVersion: "\xc3"}, "api_version", producer.RuleTextNotUTF8},
	} {
		err := p.Publish(context.Background(), tc.event)
		var refused *producer.Refused
		if !errors.As(err, &refused) || refused.Param != tc.param || refused.Rule != tc.rule {
			t.Errorf("%s: Publish = %v, want a refusal of %s for %s", tc.name, err, tc.param, tc.rule)
		}
	}
	if tasks, err := insp.ListPendingTasks(producer.Queue); err == nil && len(tasks) != 0 {
		t.Errorf("%d tasks enqueued for refused events", len(tasks))
	}
}

// TestRepublishRunsAnArchivedTask: a task of the event's id that asynq
// archived does not swallow the re-publish; it runs again.
func TestRepublishRunsAnArchivedTask(t *testing.T) {
	p, insp, _ := newProducer(t)
	ctx := context.Background()
	e := producer.Event{ID: uuid.NewString(), MerchantID: "m1", Type: "payout.paid", Payload: json.RawMessage(`{}`)}
	if err := p.Publish(ctx, e); err != nil {
		t.Fatal(err)
	}
	if err := insp.ArchiveTask(producer.Queue, "e:"+e.ID); err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(ctx, e); err != nil {
		t.Fatal(err)
	}
	info, err := insp.GetTaskInfo(producer.Queue, "e:"+e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if info.State != asynq.TaskStatePending {
		t.Fatalf("the re-published event's task is %v, want pending", info.State)
	}
}

// TestRefusal reads back what the worker kept of a refused event, until
// the worker clears it (once a corrected event of that id is stored:
// dispatcher's TestProducerEventsFollowThePublishersRules).
func TestRefusal(t *testing.T) {
	p, _, opt := newProducer(t)
	ctx := context.Background()
	id := uuid.NewString()
	if r, err := p.Refusal(ctx, id); err != nil || r != nil {
		t.Fatalf("Refusal of an unknown event = %v, %v; want nil, nil", r, err)
	}
	rdb := opt.MakeRedisClient().(redis.UniversalClient)
	defer rdb.Close()
	want := producer.Refused{Param: "type", Rule: "type_unknown", Message: `Unknown event type "payout.lost".`}
	if err := producer.KeepRefusal(ctx, rdb, id, want); err != nil {
		t.Fatal(err)
	}
	got, err := p.Refusal(ctx, id)
	if err != nil || got == nil || *got != want {
		t.Fatalf("Refusal = %+v, %v; want %+v", got, err, want)
	}
	if err := producer.ClearRefusal(ctx, rdb, id); err != nil {
		t.Fatal(err)
	}
	if got, err := p.Refusal(ctx, id); err != nil || got != nil {
		t.Fatalf("Refusal once cleared = %+v, %v; want none", got, err)
	}
}

// TestDeliverAtOnTheProducersClock: deliver_at is judged by the clock the
// Producer is given: a time an hour ahead of the wall clock is refused by
// a producer whose clock reads two hours ahead, and taken by one on the
// system's.
func TestDeliverAtOnTheProducersClock(t *testing.T) {
	rd := storetest.NewRedis(t)
	opt := asynq.RedisClientOpt{Network: "unix", Addr: rd.Socket}
	ahead := producer.New(opt, producer.WithClock(func() time.Time { return time.Now().Add(2 * time.Hour) }))
	t.Cleanup(func() { ahead.Close() })
	wall := producer.New(opt)
	t.Cleanup(func() { wall.Close() })
	at := time.Now().Add(time.Hour)
	e := producer.Event{MerchantID: "m1", Type: "payout.paid", Payload: json.RawMessage(`{}`), DeliverAt: &at}
	var refused *producer.Refused
	if err := ahead.Publish(context.Background(), e); !errors.As(err, &refused) || refused.Param != "deliver_at" {
		t.Fatalf("deliver_at an hour behind the producer's clock: %v, want refused naming deliver_at", err)
	}
	if err := wall.Publish(context.Background(), e); err != nil {
		t.Fatalf("deliver_at an hour ahead: %v", err)
	}
}
