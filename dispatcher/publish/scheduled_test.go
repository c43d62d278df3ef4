package publish_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
	"github.com/webhookd/webhookd/producer"
)

// TestProducerScheduledEvent: an event the producer publishes with
// DeliverAt is stored by the worker as scheduled, its first attempt due
// then, and made once the engine's clock reaches it; one whose DeliverAt
// passed before a worker stored it (a backlog) is delivered at once.
func TestProducerScheduledEvent(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusOK))
	e.Subscribe("m1", rcv.URL, "*")
	d, clk := e.DispatcherAhead()
	e.Run(d)
	p := producer.New(e.Cfg.Redis)
	t.Cleanup(func() { p.Close() })
	ctx := context.Background()
	publish := func() (uuid.UUID, time.Time) {
		at := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
		ev := producer.Event{ID: uuid.NewString(), MerchantID: "m1", Type: "payout.paid", Payload: json.RawMessage(`{"id":"po_1"}`), DeliverAt: &at}
		if err := p.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
		id := uuid.MustParse(ev.ID)
		e.WaitFor("the event stored", 10*time.Second, func() bool { return len(e.Deliveries(id)) == 1 })
		return id, at
	}
	scheduled, at := publish()
	del := e.Deliveries(scheduled)[0]
	stored, err := e.Store.Views.GetEvent(ctx, "m1", scheduled)
	if err != nil || stored.DeliverAt == nil || !stored.DeliverAt.Equal(at) || !del.NextAttemptAt.Equal(at) {
		t.Fatalf("stored deliver_at %v (%v), first attempt due %v; want both %v", stored.DeliverAt, err, del.NextAttemptAt, at)
	}
	if got, _ := e.Store.Views.GetDelivery(ctx, "m1", del.ID); got.Status != store.DeliveryScheduled {
		t.Errorf("delivery reads %s, want scheduled", got.Status)
	}

	clk.Set(2 * time.Hour) // the engine's clock is past both deliver_at
	late, _ := publish()
	if stored, err := e.Store.Views.GetEvent(ctx, "m1", late); err != nil || stored.DeliverAt != nil {
		t.Errorf("an event stored after its deliver_at keeps deliver_at %v (%v), want delivered at once", stored.DeliverAt, err)
	}
	for _, id := range []uuid.UUID{scheduled, late} {
		if got := e.WaitSettled(e.Deliveries(id)[0].ID, 10*time.Second); got.Status != store.DeliverySucceeded {
			t.Errorf("event %s: delivery %s", id, got.Status)
		}
	}
}
