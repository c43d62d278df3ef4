package maintain_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher/maintain"
	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
)

// movedClock is a clock the test moves.
type movedClock struct{ ns atomic.Int64 }

func (c *movedClock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *movedClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// TestReplayerResumesAfterRestart: a replay's job requests at most
// InFlight attempts at a time; a new Replayer (a restarted worker) resumes
// from the cursor stored by the last, and in the end every matching
// delivery had exactly one manual attempt, counted; the replay is deleted
// once past the retention.
func TestReplayerResumesAfterRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := dispatchertest.New(t)
	st := e.Store
	clk := &movedClock{}
	clk.ns.Store(time.Now().UnixNano())
	e.Subscribe("m1", "https://example.com/h", "*")

	// Seven deliveries that failed, a minute apart, and one that
	// succeeded, which the status filter leaves out.
	start := clk.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var failed []store.Delivery
	for i := range 8 {
		at := start.Add(time.Duration(i+1) * time.Minute)
		_, ds, _, err := st.Events.CreateEvent(ctx, store.Event{ID: uuid.Must(uuid.NewV7()), MerchantID: "m1", Type: "payout.paid",
			APIVersion: dispatchertest.TestVersion, Body: []byte(`{}`), CreatedAt: at}, store.Audience{})
		if err != nil || len(ds) != 1 {
			t.Fatalf("event: %d deliveries, %v", len(ds), err)
		}
		status, attempt := store.DeliveryFailed, store.AttemptFailed
		if i == 3 {
			status, attempt = store.DeliverySucceeded, store.AttemptSucceeded
		}
		code := 500
		if err := st.Deliveries.RecordAttempt(ctx, store.AttemptRecord{Delivery: ds[0], Status: status, Attempt: store.Attempt{
			Number: 1, Status: attempt, Trigger: store.TriggerScheduled, HTTPStatus: &code, AttemptedAt: at}}); err != nil {
			t.Fatal(err)
		}
		if status == store.DeliveryFailed {
			failed = append(failed, ds[0])
		}
	}
	f := store.ReplayFilter{Since: start, Until: start.Add(time.Hour), Status: store.DeliveryFailed}
	rp, err := st.Replays.CreateReplay(ctx, "m1", f, len(failed), clk.Now())
	if err != nil {
		t.Fatal(err)
	}

	tasks, err := queue.NewEnqueuer(e.Cfg.Redis, time.Minute, 0, clock.Func(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tasks.Close() })
	newReplayer := func() *maintain.Replayer {
		r, err := maintain.NewReplayer(maintain.ReplayerConfig{Store: st.Replays, Tasks: tasks, InFlight: 3,
			Runtime: maintain.Runtime{Clock: clock.Func(clk.Now)}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// work makes the manual attempts requested, as a worker would, each
	// succeeding.
	work := func() int {
		due, err := st.ManualAttempts.ManualRequestsDue(ctx, clk.Now().Add(time.Second), 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range due {
			l, err := st.ManualAttempts.LeaseManualAttempt(ctx, "m1", d.ID, clk.Now(), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Deliveries.RecordAttempt(ctx, store.AttemptRecord{Delivery: l.Delivery, Status: store.DeliverySucceeded,
				Attempt: store.Attempt{Number: l.AttemptCount + 1, Status: store.AttemptSucceeded, Trigger: store.TriggerManual,
					AttemptedAt: clk.Now()}}); err != nil {
				t.Fatal(err)
			}
		}
		return len(due)
	}

	r := newReplayer()
	if err := r.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := st.Replays.OpenReplayItems(ctx, rp.ID); err != nil || n != 3 {
		t.Fatalf("after a round: %d requested, %v; want InFlight (3)", n, err)
	}
	// A second round before any attempt is made requests nothing more.
	if err := r.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if n := work(); n != 3 {
		t.Fatalf("made %d attempts, want 3", n)
	}

	// The worker restarts: a new Replayer goes on from the stored cursor.
	for round := 0; ; round++ {
		if round > 10 {
			t.Fatal("the replay does not complete")
		}
		clk.Advance(time.Second)
		if err := newReplayer().Round(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := st.Replays.GetReplay(ctx, "m1", rp.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.CompletedAt != nil {
			n := len(failed)
			if got.Matched != n || got.Requested != n || got.Attempted != n || got.Succeeded != n || got.Failed != 0 {
				t.Fatalf("complete replay = %+v; want %d matched, requested, attempted, succeeded", got, n)
			}
			break
		}
		work()
	}
	for _, d := range failed {
		got, err := st.Views.GetDelivery(ctx, "m1", d.ID)
		if err != nil {
			t.Fatal(err)
		}
		manual := 0
		for _, a := range got.Attempts {
			if a.Trigger == store.TriggerManual {
				manual++
			}
		}
		if manual != 1 || got.Status != store.DeliverySucceeded {
			t.Errorf("delivery %s: %d manual attempts, %s; want one, succeeded", d.ID, manual, got.Status)
		}
	}

	// Past the retention, the replay is deleted.
	clk.Advance(store.Retention + time.Hour)
	if err := newReplayer().Round(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Replays.GetReplay(ctx, "m1", rp.ID); err == nil {
		t.Fatal("the replay outlived the retention")
	}
}
