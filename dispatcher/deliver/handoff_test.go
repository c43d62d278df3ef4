package deliver

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
)

// handOffScheduler is a scheduler, not running, with a pool of 4, a
// merchant share of 2 and a subscription cap of 1.
func handOffScheduler(attempt func(context.Context, queue.LaneItem, *heldSlots)) *Scheduler {
	s, err := NewScheduler(SchedulerConfig{Concurrency: 4, Share: 2, SubscriptionCap: 1, CircuitAfter: 3,
		Reserve: 1, AttemptTimeout: time.Minute, Held: time.Minute},
		SchedulerDeps{Attempt: attempt, Clock: clock.System{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	return s
}

// holdRunning holds the slots of attempts running before a hand-off:
// onSub of merchant m1 on sub, onOther of m1 on other, and elsewhere of
// merchant m2, each on a subscription of its own.
func holdRunning(s *Scheduler, sub, other uuid.UUID, onSub, onOther, elsewhere int) {
	for range onSub {
		s.hold(lineItem("m1", sub).Task)
	}
	for range onOther {
		s.hold(lineItem("m1", other).Task)
	}
	for range elsewhere {
		s.hold(lineItem("m2", uuid.New()).Task)
	}
}

func lineItem(merchant string, sub uuid.UUID) queue.LaneItem {
	return queue.LaneItem{ID: uuid.NewString(), Task: queue.Attempt{DeliveryID: uuid.New(), MerchantID: merchant, SubscriptionID: sub, Number: 1}}
}

// The next attempt of a line goes on in the slot of the attempt that ended
// the line only where a take would have given it a slot without lending:
// its merchant under its share, its subscription under its cap, and the
// pool not full.
func TestHandOffKeepsSharesAndCaps(t *testing.T) {
	sub, other := uuid.New(), uuid.New()
	for _, tc := range []struct {
		name string
		// running: attempts held (past their exchange or not) before the
		// ending attempt hands off: merchant m1's on sub, on other, and
		// another merchant's.
		onSub, onOther, elsewhere int
		ok                        bool
	}{
		{"room", 0, 0, 0, true},
		{"subscription at its cap", 1, 0, 0, false},
		{"merchant at its share", 0, 2, 0, false},
		{"pool full", 0, 1, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := handOffScheduler(nil)
			ending := s.hold(lineItem("m1", sub).Task)
			ending.exchanged(false) // its exchange is over: only the pool slot is held
			holdRunning(s, sub, other, tc.onSub, tc.onOther, tc.elsewhere)
			busy := s.busy
			if got := ending.handOff(lineItem("m1", sub)); got != tc.ok {
				t.Fatalf("handOff = %v, want %v", got, tc.ok)
			}
			ending.release()
			want := busy - 1
			if tc.ok {
				want = busy // the slot went on, not back
				if s.merchants["m1"] != 1+tc.onSub+tc.onOther || s.subs[sub.String()] != 1+tc.onSub {
					t.Fatalf("merchant %d, subscription %d held after the hand-off", s.merchants["m1"], s.subs[sub.String()])
				}
				if ending.handOff(lineItem("m1", other)) {
					t.Fatal("a second hand-off from one attempt")
				}
			}
			if s.busy != want {
				t.Fatalf("pool busy %d after the ending attempt, want %d", s.busy, want)
			}
		})
	}
}

// The handed-off attempt runs in the same pool slot once the attempt that
// ended the line returns, and gives the slot back when it ends.
func TestHandOffRunsNextInTheSlot(t *testing.T) {
	sub := uuid.New()
	first, second := lineItem("m1", sub), lineItem("m1", sub)
	var ran []string
	var s *Scheduler
	s = handOffScheduler(func(_ context.Context, it queue.LaneItem, held *heldSlots) {
		ran = append(ran, it.ID)
		held.exchanged(false)
		if it.ID == first.ID && !held.handOff(second) {
			t.Error("hand-off refused with room")
		}
		if it.ID == second.ID && s.busy != 1 {
			t.Errorf("pool busy %d while the handed-off attempt runs, want 1", s.busy)
		}
	})
	s.run1(context.Background(), first, s.hold(first.Task))
	if len(ran) != 2 || ran[0] != first.ID || ran[1] != second.ID {
		t.Fatalf("ran %v, want the first then the handed-off one", ran)
	}
	if s.busy != 0 || len(s.merchants) != 0 || len(s.subs) != 0 {
		t.Fatalf("after both: busy %d, merchants %v, subscriptions %v", s.busy, s.merchants, s.subs)
	}
}

// A first attempt its publisher hands to the pool starts at once only
// where a take would have given it a slot without lending, and only for
// an attempt the schedule has nothing to do for (pacing, batching, a due
// time); else nothing is held and the publisher parks it.
func TestStartTakesWhatATakeWouldGive(t *testing.T) {
	sub, other := uuid.New(), uuid.New()
	first := func(tune func(*queue.Attempt)) queue.LaneItem {
		it := lineItem("m1", sub)
		it.Task.Trigger, it.Task.Due = store.TriggerScheduled, time.Now()
		if tune != nil {
			tune(&it.Task)
		}
		return it
	}
	for _, tc := range []struct {
		name string
		// onSub, onOther, elsewhere: attempts running before, as in
		// TestHandOffKeepsSharesAndCaps.
		onSub, onOther, elsewhere int
		tune                      func(*queue.Attempt)
		stopped                   bool
		ok                        bool
	}{
		{name: "room", ok: true},
		{name: "subscription at its cap", onSub: 1},
		{name: "merchant at its share", onOther: 2},
		{name: "pool full", onOther: 1, elsewhere: 3},
		{name: "rate limited", tune: func(a *queue.Attempt) { a.RateLimit = 5 }},
		{name: "batched", tune: func(a *queue.Attempt) { a.BatchSize, a.BatchWaitMS = 10, 100 }},
		{name: "due later", tune: func(a *queue.Attempt) { a.Due = time.Now().Add(time.Minute) }},
		{name: "manual", tune: func(a *queue.Attempt) { a.Trigger = store.TriggerManual }},
		{name: "pool stopping", stopped: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			started := make(chan string, 1)
			s := handOffScheduler(func(_ context.Context, it queue.LaneItem, held *heldSlots) {
				held.exchanged(false)
				started <- it.ID
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s.run = &schedulerRun{ctx: ctx, attempts: newGoroutines(goroutineKeep)}
			if tc.stopped {
				cancel()
			}
			holdRunning(s, sub, other, tc.onSub, tc.onOther, tc.elsewhere)
			busy := s.busy
			it := first(tc.tune)
			if got := s.Start(it); got != tc.ok {
				t.Fatalf("Start = %v, want %v", got, tc.ok)
			}
			if !tc.ok {
				if s.busy != busy || s.subs[sub.String()] != tc.onSub {
					t.Fatalf("refused, yet busy %d (was %d), subscription %d held", s.busy, busy, s.subs[sub.String()])
				}
				return
			}
			if got := <-started; got != it.ID {
				t.Fatalf("ran %s, want %s", got, it.ID)
			}
			s.run.attempts.Wait()
			if s.busy != busy || len(s.subs) != 0 {
				t.Fatalf("after the attempt: busy %d, want %d; subscriptions %v", s.busy, busy, s.subs)
			}
		})
	}
}

// No attempt is started once Run has ended: Run waits for the attempts it
// started, and one added after would run unwatched.
func TestStartRefusesOutsideRun(t *testing.T) {
	s := handOffScheduler(func(context.Context, queue.LaneItem, *heldSlots) { t.Error("an attempt ran outside Run") })
	it := lineItem("m1", uuid.New())
	it.Task.Trigger, it.Task.Due = store.TriggerScheduled, time.Now()
	if s.Start(it) {
		t.Fatal("Start took an attempt with no Run in progress")
	}
}
