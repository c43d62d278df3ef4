package dispatcher_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dispatcher/deliver"
	"github.com/webhookd/webhookd/internal/store"
)

// TestRecorders: both implementations of Recorder write an attempt and the
// state it leaves its delivery in, and refuse a second record of the same
// attempt number (a worker whose lease lapsed finishing late) with
// store.ErrConflict.
func TestRecorders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.subscribe("m1", "http://127.0.0.1:9/hook", "*")
	d, _ := e.dispatcher() // never run: nothing attempts the deliveries but the test
	batch := deliver.NewBatchRecorder(e.store.Deliveries, nil)
	t.Cleanup(batch.Close)
	for _, tc := range []struct {
		name     string
		recorder deliver.Recorder
	}{
		{"inline", deliver.InlineRecorder{Store: e.store.Deliveries}},
		{"group commit", batch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			del := e.deliveries(e.publish(d, "m1", "payout.paid").ID)[0]
			status := 204
			rec := store.AttemptRecord{Delivery: del, Status: store.DeliverySucceeded,
				Attempt: store.Attempt{DeliveryID: del.ID, Number: 1, Status: store.AttemptSucceeded,
					Trigger: store.TriggerScheduled, HTTPStatus: &status, DurationMS: 3, AttemptedAt: time.Now()}}
			ctx := context.Background()
			if err := tc.recorder.Record(ctx, rec); err != nil {
				t.Fatalf("first record: %v", err)
			}
			if err := tc.recorder.Record(ctx, rec); !errors.Is(err, store.ErrConflict) {
				t.Fatalf("second record of attempt 1: %v, want ErrConflict", err)
			}
			got := e.delivery(del.ID)
			if got.Status != store.DeliverySucceeded || got.AttemptCount != 1 || len(got.Attempts) != 1 ||
				got.Attempts[0].HTTPStatus == nil || *got.Attempts[0].HTTPStatus != status {
				t.Errorf("delivery after the record: %+v", got)
			}
		})
	}
}
