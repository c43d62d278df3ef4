package publish_test

import (
	"context"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/dispatcher/publish"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
)

// standingClock stands where a test puts it.
type standingClock struct{ at atomic.Int64 }

func (c *standingClock) Now() time.Time          { return time.Unix(0, c.at.Load()) }
func (c *standingClock) Advance(d time.Duration) { c.at.Add(int64(d)) }
func newStandingClock(at time.Time) *standingClock {
	c := &standingClock{}
	c.at.Store(at.UnixNano())
	return c
}

// changeHeard bounds the time from a change's announcement to its hearing
// in another process: one Redis pub/sub hop, milliseconds; the bound is
// loose for a loaded machine.
const changeHeard = 5 * time.Second

// A publish keeps the merchant and its filters it read for the next
// publishes, and a change of the merchant's subscriptions or settings made
// through another process (its Publisher's SubscriptionsChanged, which the
// API's handlers call after each change) reaches this process's next
// publish once the announcement is heard, whatever the clock says. A change
// that is not announced is seen once the kept merchant lapses
// (MerchantCacheTTL). Two Dispatchers on one database and one Redis are the
// two processes; the publishing one's clock stands still, so that only an
// announcement can make it read again.
func TestChangesReachTheOtherProcesssPublishes(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	ctx := context.Background()
	rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(204))
	paid, failed := `payload.status == "paid"`, `payload.status == "failed"`
	filtered, _ := e.Subscribe("m1", rcv.URL, "*")
	setFilter(t, e, filtered.ID, paid)

	changer, _ := e.Dispatcher()
	clk := newStandingClock(time.Now())
	publisher, _ := e.Dispatcher(func(c *dispatcher.Config) { c.Clock = clk })
	e.WaitFor("the publishing process to hear changes", changeHeard, publisher.Publisher.KeepsMerchants)

	// delivered publishes through the publishing process and says which
	// subscriptions got a delivery, with its status, and the event's
	// api_version.
	delivered := func() (map[uuid.UUID]store.DeliveryStatus, string) {
		t.Helper()
		ev := e.Publish(publisher, "m1", "payout.paid")
		got := map[uuid.UUID]store.DeliveryStatus{}
		for _, d := range e.Deliveries(ev.ID) {
			got[d.SubscriptionID] = d.Status
		}
		return got, ev.APIVersion
	}
	// announce is the API's change through the other process: the
	// announcement, and its hearing by the publishing one.
	announce := func() {
		t.Helper()
		before := publisher.Publisher.MerchantsEmptied()
		changer.Publisher.SubscriptionsChanged(ctx, "m1")
		e.WaitFor("the change to be heard", changeHeard, func() bool { return publisher.Publisher.MerchantsEmptied() > before })
	}
	want := func(step string, got map[uuid.UUID]store.DeliveryStatus, subs ...uuid.UUID) {
		t.Helper()
		if ids := sortedIDs(slices.Collect(maps.Keys(got))); !slices.Equal(ids, sortedIDs(subs)) {
			t.Fatalf("%s: deliveries to %v, want to %v", step, got, subs)
		}
	}

	got, _ := delivered()
	want("a filter passed", got, filtered.ID)

	// Not announced: the kept filter still judges, until it lapses.
	setFilter(t, e, filtered.ID, failed)
	got, _ = delivered()
	want("a filter changed and not announced", got, filtered.ID)
	clk.Advance(publish.MerchantCacheTTL)
	got, _ = delivered()
	want("a filter changed and not announced, once the kept one lapsed", got)

	setFilter(t, e, filtered.ID, paid)
	announce()
	got, _ = delivered()
	want("a filter changed", got, filtered.ID)

	added, _ := e.Subscribe("m1", rcv.URL, "*")
	setFilter(t, e, added.ID, paid)
	announce()
	got, _ = delivered()
	want("a filtered subscription created", got, filtered.ID, added.ID)

	disabled := store.SubscriptionDisabled
	if _, err := e.Store.Subscriptions.UpdateSubscription(ctx, "m1", added.ID, store.SubscriptionUpdate{Status: &disabled}); err != nil {
		t.Fatal(err)
	}
	announce()
	got, _ = delivered()
	if want("a filtered subscription disabled", got, filtered.ID, added.ID); got[added.ID] != store.DeliverySkipped {
		t.Fatalf("the disabled subscription's delivery is %s, want skipped", got[added.ID])
	}

	if err := e.Store.Subscriptions.DeleteSubscription(ctx, "m1", added.ID); err != nil {
		t.Fatal(err)
	}
	announce()
	got, _ = delivered()
	want("a filtered subscription deleted", got, filtered.ID)

	version := "2026-06-01"
	if _, err := e.Store.Merchants.UpdateMerchant(ctx, "m1", dispatchertest.TestVersion, store.MerchantSettings{APIVersion: &version}); err != nil {
		t.Fatal(err)
	}
	announce()
	if _, v := delivered(); v != version {
		t.Fatalf("the event's api_version after the merchant's changed: %s, want %s", v, version)
	}
}

func setFilter(t *testing.T, e *dispatchertest.Env, id uuid.UUID, expr string) {
	t.Helper()
	if _, err := e.Store.Subscriptions.UpdateSubscription(context.Background(), "m1", id, store.SubscriptionUpdate{SetFilter: true, Filter: &expr}); err != nil {
		t.Fatal(err)
	}
}

func sortedIDs(ids []uuid.UUID) []uuid.UUID {
	return slices.SortedFunc(slices.Values(ids), func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
}
