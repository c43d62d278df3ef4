package deliver_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/dispatcher/deliver"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
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
	batch := deliver.NewBatchRecorder(e.Store.Deliveries, nil, 0)
	t.Cleanup(batch.Close)
	for _, tc := range []struct {
		name     string
		recorder deliver.Recorder
	}{
		{"inline", deliver.InlineRecorder{Store: e.Store.Deliveries}},
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

// TestOutcomeWaitsForPostgres: Postgres goes away while the receiver holds
// the attempt, and comes back two seconds later, within the attempt's
// lease. The outcome is recorded when it is back; the receiver is not asked
// again.
func TestOutcomeWaitsForPostgres(t *testing.T) {
	t.Parallel()
	pg := storetest.NewPostgres(t)
	e := dispatchertest.NewOnPostgres(t, pg)
	known := make(chan struct{}) // the test has read the delivery's id
	rcv := dispatchertest.NewReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			<-known
			pg.Stop()
			go func() {
				time.Sleep(2 * time.Second)
				pg.Start()
			}()
		}
		w.WriteHeader(http.StatusOK)
	})
	e.Subscribe("m1", rcv.URL, "*")
	// The outcome waits for Postgres while the attempt's lease holds (the
	// delivery timeout plus a margin, 30 s here, counted from the
	// publish, which leases the first attempt); an outage longer than the
	// lease lets another worker make the attempt again, at least once
	// being the guarantee past it. The outage below is 2 s plus a stop and
	// a restart with crash recovery, each of which waits for the CPU on a
	// loaded CI machine (a run failed here after 23 s with a 7.5 s lease).
	d, reg := e.Dispatcher(func(c *dispatcher.Config) { c.DeliveryTimeout = 20 * time.Second })
	e.Run(d)
	ev := e.Publish(d, "m1", "payout.paid")
	del := e.Deliveries(ev.ID)[0]
	close(known)
	var got store.Delivery
	e.WaitFor("the delivery to settle once Postgres is back", 30*time.Second, func() bool {
		var err error
		got, err = e.Store.Deliveries.DeliveryByID(context.Background(), del.ID)
		return err == nil && got.Status != store.DeliveryPending
	})
	if got.Status != store.DeliverySucceeded || got.AttemptCount != 1 {
		t.Fatalf("delivery: %s after %d attempts, want succeeded after 1", got.Status, got.AttemptCount)
	}
	e.WaitSwept(reg) // a duplicate attempt, if any, would have been made
	if n := len(rcv.Got()); n != 1 {
		t.Errorf("the receiver was asked %d times, want once", n)
	}
}
