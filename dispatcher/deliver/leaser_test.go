package deliver_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
)

// TestCrashedWorkerLeaseExpires simulates a worker that leased an attempt
// and died: its lease blocks the attempt (the task that comes to run it is
// a duplicate and is dropped) until the lease lapses, then the sweeper
// brings it back and the delivery completes.
func TestCrashedWorkerLeaseExpires(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusOK))
	e.Subscribe("m1", rcv.URL, "*")
	d, _ := e.Dispatcher()
	ev := e.Publish(d, "m1", "payout.paid") // not running yet: the task waits in Redis
	del := e.Deliveries(ev.ID)[0]
	const lease = 1500 * time.Millisecond
	leased, err := e.Store.Deliveries.LeaseDelivery(context.Background(), del.ID, del.CreatedAt, 1, time.Now(), lease)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	e.Run(d)
	got := e.WaitSettled(del.ID, 10*time.Second)
	took := time.Since(start)
	if got.Status != store.DeliverySucceeded || got.AttemptCount != 1 {
		t.Fatalf("delivery %s after %d attempts, want succeeded after 1", got.Status, got.AttemptCount)
	}
	if arrived := rcv.Got()[0].At; arrived.Before(leased.LeaseUntil) {
		t.Fatalf("attempt ran at %v while the dead worker's lease held until %v", arrived, leased.LeaseUntil)
	}
	t.Logf("delivered %v after start, after the dead worker's lease of %v lapsed", took.Round(time.Millisecond), lease)
}
