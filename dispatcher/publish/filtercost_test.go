package publish_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
	"github.com/webhookd/webhookd/producer"
)

// TestCostlyFiltersDelayOnlyTheirMerchant: a merchant whose filters take
// as long as they like (held here until the test lets them judge) does not
// hold up another merchant's publishes, although they share the group
// commit: the other merchant's events are stored and delivered meanwhile.
// Once judged, the slow merchant's events are written with the verdict,
// in their order, and delivered to the subscriptions they passed only.
func TestCostlyFiltersDelayOnlyTheirMerchant(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	ctx := context.Background()
	rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusOK))
	passed, _ := e.Subscribe("slow", rcv.URL, "*")
	refused, _ := e.Subscribe("slow", rcv.URL, "*")
	for _, f := range []struct {
		sub  store.Subscription
		expr string
	}{{passed, `payload.amount == "10"`}, {refused, `payload.amount == "99"`}} {
		if _, err := e.Store.Subscriptions.UpdateSubscription(ctx, "slow", f.sub.ID, store.SubscriptionUpdate{SetFilter: true, Filter: &f.expr}); err != nil {
			t.Fatal(err)
		}
	}
	e.Subscribe("quick", rcv.URL, "*")
	release := make(chan struct{})
	d, reg := e.Dispatcher(dispatchertest.HoldFilters("slow", release))
	e.Run(d)

	payload := json.RawMessage(`{"amount": "10"}`)
	slow := make(chan []error, 1)
	go func() {
		_, _, errs := d.Publisher.PublishAll(ctx, []producer.Event{
			{MerchantID: "slow", Type: "payout.paid", Payload: payload},
			{MerchantID: "slow", Type: "payout.failed", Payload: payload},
		})
		slow <- errs
	}()
	e.WaitFor("the slow merchant's publish to be judged outside its group", 10*time.Second, func() bool {
		return dispatchertest.Counter(t, reg, "webhookd_publish_filters_deferred_total") >= 1
	})
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			if _, _, err := d.Publisher.Publish(ctx, producer.Event{MerchantID: "quick", Type: "payout.paid", Payload: payload}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	e.WaitFor("the quick merchant's deliveries while the slow filters judge", 10*time.Second, func() bool {
		return len(rcv.Got()) == 5
	})
	select {
	case <-slow:
		t.Fatal("the slow merchant's publish returned before its filters judged")
	default:
	}

	close(release)
	if errs := <-slow; errs[0] != nil || errs[1] != nil {
		t.Fatalf("slow merchant's publish: %v", errs)
	}
	e.WaitFor("the slow merchant's deliveries", 10*time.Second, func() bool { return len(rcv.Got()) == 7 })
	var types []string
	for _, r := range rcv.Got()[5:] {
		if r.Header.Get("webhook-id") == "" {
			t.Error("a delivery without its webhook-id")
		}
		var body struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatal(err)
		}
		types = append(types, body.Type)
	}
	if len(types) != 2 || types[0] == types[1] {
		t.Errorf("the slow merchant's events arrived as %v, want payout.paid and payout.failed once each", types)
	}
	var n int
	if err := e.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE subscription_id = $1`, refused.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the subscription whose filter refused the events got %d deliveries", n)
	}
}
