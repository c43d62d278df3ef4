package maintain_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
	"github.com/webhookd/webhookd/producer"
)

// TestScheduledDeliveriesAreSweptOnTimeOnly: a scheduled event's first
// attempts wait parked until deliver_at; once the schedule is lost (Redis
// flushed), the sweeper parks none of them before deliver_at, parks each
// one still scheduled after it, and never a cancelled one.
func TestScheduledDeliveriesAreSweptOnTimeOnly(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusOK))
	e.Subscribe("m1", rcv.URL, "*")
	d, clk := e.DispatcherAhead()
	ctx := context.Background()
	at := time.Now().Add(time.Hour)
	publish := func() store.Delivery {
		ev, created, err := d.Publisher.Publish(ctx, producer.Event{MerchantID: "m1", Type: "payout.paid",
			Payload: json.RawMessage(`{"id": "po_1"}`), DeliverAt: &at})
		if err != nil || !created {
			t.Fatalf("publish: %v (created %v)", err, created)
		}
		return e.Deliveries(ev.ID)[0]
	}
	kept, cancelled := publish(), publish()
	if ok, err := dispatchertest.Parked(ctx, e.RC, kept, 1); err != nil || !ok {
		t.Fatalf("the first attempt is not parked (%v)", err)
	}
	if _, _, err := e.Store.Events.CancelScheduled(ctx, "m1", cancelled.EventID); err != nil {
		t.Fatal(err)
	}

	clk.Set(30 * time.Minute) // well past the grace, before deliver_at
	if n, err := dispatcher.SweepOnce(ctx, d); err != nil || n != 0 {
		t.Fatalf("the sweeper parked %d deliveries waiting for their deliver_at (%v)", n, err)
	}
	if err := e.RC.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := dispatcher.SweepOnce(ctx, d); err != nil || n != 0 {
		t.Fatalf("schedule lost: the sweeper parked %d deliveries before their deliver_at (%v)", n, err)
	}
	clk.Set(time.Hour + time.Minute)
	if n, err := dispatcher.SweepOnce(ctx, d); err != nil || n != 1 {
		t.Fatalf("after deliver_at the sweeper parked %d deliveries (%v), want the one not cancelled", n, err)
	}
	if ok, err := dispatchertest.Parked(ctx, e.RC, kept, 1); err != nil || !ok {
		t.Errorf("the scheduled delivery is not parked after the sweep (%v)", err)
	}
	if ok, err := dispatchertest.Parked(ctx, e.RC, cancelled, 1); err != nil || ok {
		t.Errorf("the cancelled delivery is parked after the sweep (%v)", err)
	}
}
