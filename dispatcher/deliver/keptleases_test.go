package deliver

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/store"
)

// leaseAt is a first attempt's delivery as a publish at t leased it for a
// minute, with a body of size bytes.
func leaseAt(t time.Time, size int) store.LeasedDelivery {
	return store.LeasedDelivery{Delivery: store.Delivery{ID: uuid.New()}, Body: make([]byte, size),
		LeaseUntil: t.Add(time.Minute)}
}

// handedOver is the attempt the schedule gives back for l.
func handedOver(l store.LeasedDelivery) queue.Attempt {
	return queue.Attempt{DeliveryID: l.ID, Number: 1, Handover: l.LeaseUntil}
}

// TestKeptLeases: a lease kept for a refused first attempt serves once,
// for the attempt that hands that very lease over, within the window after
// it was kept; never for another attempt number, another lease, later, or
// once a change emptied the store. (An attempt it does not serve leaves
// it to age out.)
func TestKeptLeases(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	window := 5 * time.Second
	cases := []struct {
		name   string
		window time.Duration
		// attempt makes the attempt taken from the lease kept.
		attempt func(store.LeasedDelivery) queue.Attempt
		after   time.Duration // from keep to take
		empty   bool          // a change announced between
		want    bool
	}{
		{name: "taken back at once", window: window, attempt: handedOver, want: true},
		{name: "taken back at the window's end", window: window, attempt: handedOver, after: window, want: true},
		{name: "taken back after the window", window: window, attempt: handedOver, after: window + time.Millisecond},
		{name: "another lease handed over", window: window, attempt: func(l store.LeasedDelivery) queue.Attempt {
			a := handedOver(l)
			a.Handover = a.Handover.Add(time.Second)
			return a
		}},
		{name: "no handover", window: window, attempt: func(l store.LeasedDelivery) queue.Attempt {
			a := handedOver(l)
			a.Handover = time.Time{}
			return a
		}},
		{name: "a later attempt", window: window, attempt: func(l store.LeasedDelivery) queue.Attempt {
			a := handedOver(l)
			a.Number = 2
			return a
		}},
		{name: "another delivery", window: window, attempt: func(l store.LeasedDelivery) queue.Attempt {
			a := handedOver(l)
			a.DeliveryID = uuid.New()
			return a
		}},
		{name: "a subscription changed meanwhile", window: window, attempt: handedOver, empty: true},
		{name: "no window keeps nothing", attempt: handedOver},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k := newKeptLeases(tc.window)
			l := leaseAt(now, 100)
			k.keep(l, now)
			if tc.empty {
				k.empty()
			}
			got, ok := k.take(tc.attempt(l), now.Add(tc.after))
			if ok != tc.want {
				t.Fatalf("take = %v, want %v", ok, tc.want)
			}
			if ok && (got.ID != l.ID || !got.LeaseUntil.Equal(l.LeaseUntil)) {
				t.Errorf("took %v until %v, kept %v until %v", got.ID, got.LeaseUntil, l.ID, l.LeaseUntil)
			}
			if !ok {
				return
			}
			if _, again := k.take(handedOver(l), now); again {
				t.Error("a kept lease served twice")
			}
			if n := k.len(); n != 0 {
				t.Errorf("%d leases still kept", n)
			}
		})
	}
}

// TestKeptLeasesBounds: the store keeps at most keptLeasesMax leases and
// keptLeasesBytes bytes, the oldest dropped first, and drops what is past
// the window when it keeps more; a lease of a later attempt, or larger
// than the whole budget, is not kept.
func TestKeptLeasesBounds(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	t.Run("count", func(t *testing.T) {
		t.Parallel()
		k := newKeptLeases(time.Minute)
		first := leaseAt(now, 0)
		k.keep(first, now)
		for range keptLeasesMax {
			k.keep(leaseAt(now, 0), now)
		}
		if n := k.len(); n != keptLeasesMax {
			t.Errorf("%d kept, want %d", n, keptLeasesMax)
		}
		if _, ok := k.take(handedOver(first), now); ok {
			t.Error("the oldest lease was kept beyond the bound")
		}
	})
	t.Run("bytes", func(t *testing.T) {
		t.Parallel()
		k := newKeptLeases(time.Minute)
		size := keptLeasesBytes / 4
		ls := make([]store.LeasedDelivery, 5)
		for i := range ls {
			ls[i] = leaseAt(now, size)
			k.keep(ls[i], now)
		}
		if n := k.len(); n != 3 {
			t.Errorf("%d leases of a quarter of the budget and more kept, want 3", n)
		}
		for i, l := range ls {
			if _, ok := k.take(handedOver(l), now); ok != (i >= 2) {
				t.Errorf("lease %d served: %v", i, ok)
			}
		}
		k.keep(leaseAt(now, keptLeasesBytes), now)
		if n := k.len(); n != 0 {
			t.Error("a lease larger than the budget was kept")
		}
	})
	t.Run("age", func(t *testing.T) {
		t.Parallel()
		k := newKeptLeases(time.Second)
		for range 100 {
			k.keep(leaseAt(now, 10), now)
		}
		later := leaseAt(now.Add(2*time.Second), 10)
		k.keep(later, now.Add(2*time.Second))
		if n := k.len(); n != 1 {
			t.Errorf("%d kept after the window passed, want the new one alone", n)
		}
		if _, ok := k.take(handedOver(later), now.Add(2*time.Second)); !ok {
			t.Error("the lease kept last did not serve")
		}
	})
	t.Run("later attempts", func(t *testing.T) {
		t.Parallel()
		k := newKeptLeases(time.Minute)
		l := leaseAt(now, 10)
		l.AttemptCount = 1
		k.keep(l, now)
		if n := k.len(); n != 0 {
			t.Error("a lease of a later attempt was kept")
		}
	})
}
