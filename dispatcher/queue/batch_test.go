package queue

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestLanesTakeBatches: a batched lane is taken as one unit of up to its
// size of due attempts, in due order, filling one slot; it waits its
// max wait after its first attempt is due unless its size is due sooner;
// another merchant still gets its turn in the same take.
func TestLanesTakeBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.UnixMilli(1_800_000_000_000)
	batched := func(name, m string, sub uuid.UUID, due time.Time, size, wait int) LaneItem {
		it := laneAt(name, m, sub, due, 0)
		it.Task.BatchSize, it.Task.BatchWaitMS = size, wait
		return it
	}
	units := func(got Taken) []string {
		var out []string
		for _, u := range got.Items {
			out = append(out, fmt.Sprint(append([]string{u.ID}, names(u.Batch)...)))
		}
		return out
	}
	req := func(now time.Time, want int) TakeRequest {
		return TakeRequest{Now: now, Want: want, Share: 10, SubscriptionCap: 10, Lendable: want, Held: time.Minute}
	}

	t.Run("size reached before the wait", func(t *testing.T) {
		l := newTestLanes(t)
		sub, other := uuid.New(), uuid.New()
		var items []LaneItem
		for i := range 7 {
			items = append(items, batched(fmt.Sprintf("a%d", i), "A", sub, t0.Add(time.Duration(i)*time.Millisecond), 3, 5000))
		}
		items = append(items, laneAt("b", "B", other, t0, 0))
		if _, err := l.Push(ctx, items...); err != nil {
			t.Fatal(err)
		}
		got, err := l.Take(ctx, req(t0.Add(10*time.Millisecond), 4), Running{})
		if err != nil {
			t.Fatal(err)
		}
		// Two full batches and B's attempt (in turn, whichever merchant
		// the ring starts at); the seventh waits for its batch to fill or
		// for its wait.
		want := []string{"[a0 a1 a2]", "[a3 a4 a5]", "[b]"}
		if u := units(got); !slices.Equal(slices.Sorted(slices.Values(u)), want) || u[1] == "[a3 a4 a5]" && u[0] == "[a0 a1 a2]" {
			t.Fatalf("units %v, want %v", u, want)
		}
		if wantNext := t0.Add(6*time.Millisecond + 5*time.Second); !got.Next.Equal(wantNext) {
			t.Fatalf("next wake %v, want the last one's due time and the wait, %v", got.Next, wantNext)
		}
		got, err = l.Take(ctx, req(t0.Add(6*time.Millisecond+5*time.Second), 4), Running{})
		if err != nil || !slices.Equal(units(got), []string{"[a6]"}) {
			t.Fatalf("after the wait: %v, %v", units(got), err)
		}
	})

	t.Run("a batch counts one slot of its merchant's share", func(t *testing.T) {
		l := newTestLanes(t)
		sub := uuid.New()
		var items []LaneItem
		for i := range 4 {
			items = append(items, batched(fmt.Sprintf("a%d", i), "A", sub, t0, 2, 0))
		}
		if _, err := l.Push(ctx, items...); err != nil {
			t.Fatal(err)
		}
		r := req(t0, 5)
		r.Share, r.Lendable = 1, 0
		got, err := l.Take(ctx, r, Running{})
		if err != nil || !slices.Equal(units(got), []string{"[a0 a1]"}) {
			t.Fatalf("share 1: %v, %v", units(got), err)
		}
	})
}
