package dispatcher_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dispatcher/deliver"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
)

// TestRecorders: both implementations of Recorder write an attempt and the
// state it leaves its delivery in, and refuse a second record of the same
// attempt number (a worker whose lease lapsed finishing late) with
// store.ErrConflict.
func TestRecorders(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	e.Subscribe("m1", "http://127.0.0.1:9/hook", "*")
	d, _ := e.Dispatcher() // never run: nothing attempts the deliveries but the test
	batch := deliver.NewBatchRecorder(e.Store, nil)
	t.Cleanup(batch.Close)
	for _, tc := range []struct {
		name     string
		recorder deliver.Recorder
	}{
		{"inline", deliver.InlineRecorder{Store: e.Store}},
		{"group commit", batch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			del := e.Deliveries(e.Publish(d, "m1", "payout.paid").ID)[0]
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
			got := e.Delivery(del.ID)
			if got.Status != store.DeliverySucceeded || got.AttemptCount != 1 || len(got.Attempts) != 1 ||
				got.Attempts[0].HTTPStatus == nil || *got.Attempts[0].HTTPStatus != status {
				t.Errorf("delivery after the record: %+v", got)
			}
		})
	}
}
