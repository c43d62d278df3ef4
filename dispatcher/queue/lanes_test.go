package queue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// newTestLanes is an empty schedule of one shard on a Redis server of the
// test's own: the rules within a shard.
func newTestLanes(t *testing.T) *Lanes {
	t.Helper()
	return newShardedLanes(t, 1)
}

// newShardedLanes is an empty schedule of n shards on a Redis server of
// the test's own.
func newShardedLanes(t *testing.T, n int) *Lanes {
	t.Helper()
	rd := storetest.NewRedis(t)
	rc := redis.NewClient(&redis.Options{Network: "unix", Addr: rd.Socket})
	t.Cleanup(func() { _ = rc.Close() })
	return NewLanes(rc, n)
}

// laneAt is a parked attempt of merchant m to subscription sub, due at
// due; its id is name.
func laneAt(name, m string, sub uuid.UUID, due time.Time, rate int) LaneItem {
	return LaneItem{ID: name, Task: Attempt{DeliveryID: uuid.New(), SubscriptionID: sub, MerchantID: m, Number: 1,
		Trigger: store.TriggerScheduled, Due: due, RateLimit: rate}}
}

func names(items []LaneItem) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}

// TestLanesTake states the schedule's rules, one case each: what is taken
// from a given schedule, by a process running a given load.
func TestLanesTake(t *testing.T) {
	t0 := time.UnixMilli(1_800_000_000_000)
	subA1, subA2, subB := uuid.New(), uuid.New(), uuid.New()
	// backlogFrom is n attempts a millisecond apart from start.
	backlogFrom := func(start time.Time, n int, m string, sub uuid.UUID, prefix string) []LaneItem {
		var out []LaneItem
		for i := range n {
			out = append(out, laneAt(fmt.Sprintf("%s%02d", prefix, i), m, sub, start.Add(time.Duration(i)*time.Millisecond), 0))
		}
		return out
	}
	backlog := func(n int, m string, sub uuid.UUID, prefix string) []LaneItem {
		return backlogFrom(t0, n, m, sub, prefix)
	}
	for _, tc := range []struct {
		name    string
		parked  []LaneItem
		req     TakeRequest
		running Running
		want    []string
	}{
		{
			name:   "due attempts are taken in due order within a subscription",
			parked: backlog(3, "A", subA1, "a"),
			req:    TakeRequest{Want: 3, Share: 10, SubscriptionCap: 10},
			want:   []string{"a00", "a01", "a02"},
		},
		{
			name:   "attempts not yet due stay parked",
			parked: []LaneItem{laneAt("later", "A", subA1, t0.Add(time.Minute), 0), laneAt("now", "A", subA2, t0, 0)},
			req:    TakeRequest{Want: 5, Share: 10, SubscriptionCap: 10},
			want:   []string{"now"},
		},
		{
			name:   "merchants take turns: a backlog delays another merchant by one round at most",
			parked: append(backlog(50, "A", subA1, "a"), laneAt("b", "B", subB, t0.Add(time.Second), 0)),
			req:    TakeRequest{Want: 2, Share: 10, SubscriptionCap: 10},
			want:   []string{"a00", "b"},
		},
		{
			name:   "a merchant's subscriptions take turns",
			parked: append(backlog(5, "A", subA1, "x"), backlogFrom(t0.Add(time.Millisecond), 5, "A", subA2, "y")...),
			req:    TakeRequest{Want: 4, Share: 10, SubscriptionCap: 10},
			want:   []string{"x00", "y00", "x01", "y01"},
		},
		{
			name:    "a merchant at its share waits while another has due work",
			parked:  append(backlog(5, "A", subA1, "a"), laneAt("b", "B", subB, t0, 0)),
			req:     TakeRequest{Want: 3, Share: 2, SubscriptionCap: 10},
			running: Running{Merchants: map[string]int{"A": 2}},
			want:    []string{"b"},
		},
		{
			name:    "slots nobody under its share can use are lent beyond the share",
			parked:  backlog(5, "A", subA1, "a"),
			req:     TakeRequest{Want: 3, Share: 2, SubscriptionCap: 10, Lendable: 2},
			running: Running{Merchants: map[string]int{"A": 2}},
			want:    []string{"a00", "a01"},
		},
		{
			name:    "a lent slot lifts the subscription's cap",
			parked:  backlog(5, "A", subA1, "a"),
			req:     TakeRequest{Want: 4, Share: 1, SubscriptionCap: 1, Lendable: 4},
			running: Running{Merchants: map[string]int{"A": 1}, SubscriptionRoom: map[string]int{subA1.String(): 0}},
			want:    []string{"a00", "a01", "a02", "a03"},
		},
		{
			name:    "no slot is lent to a subscription whose last attempt timed out",
			parked:  append(backlog(3, "A", subA1, "hang"), backlog(3, "A", subA2, "ok")...),
			req:     TakeRequest{Want: 4, Share: 1, SubscriptionCap: 10, Lendable: 4},
			running: Running{Merchants: map[string]int{"A": 1}, Unlendable: map[string]bool{subA1.String(): true}},
			want:    []string{"ok00", "ok01", "ok02"},
		},
		{
			name:    "a subscription at its cap leaves the merchant's share to its other subscriptions",
			parked:  append(backlog(3, "A", subA1, "hang"), backlog(3, "A", subA2, "ok")...),
			req:     TakeRequest{Want: 3, Share: 10, SubscriptionCap: 2},
			running: Running{Merchants: map[string]int{"A": 2}, SubscriptionRoom: map[string]int{subA1.String(): 0}},
			want:    []string{"ok00", "ok01"},
		},
		{
			name: "a rate-limited subscription gives one attempt per turn",
			parked: []LaneItem{laneAt("r1", "A", subA1, t0, 5), laneAt("r2", "A", subA1, t0, 5),
				laneAt("other", "B", subB, t0, 0)},
			req:  TakeRequest{Want: 3, Share: 10, SubscriptionCap: 10},
			want: []string{"r1", "other"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := newTestLanes(t)
			ctx := context.Background()
			if _, err := l.Push(ctx, tc.parked...); err != nil {
				t.Fatal(err)
			}
			if tc.req.Now.IsZero() {
				tc.req.Now = t0.Add(time.Second) // every backlog is due
			}
			got, err := l.Take(ctx, tc.req, tc.running)
			if err != nil {
				t.Fatal(err)
			}
			if g := names(got.Items); !slices.Equal(g, tc.want) {
				t.Errorf("took %v, want %v", g, tc.want)
			}
		})
	}
}

// TestLanesRateLimitTurns: a subscription limited to 5 deliveries/s gives
// one attempt every 200 ms, and the next wake is its next turn; a manual
// attempt is outside the limit and does not wait behind the backlog.
func TestLanesRateLimitTurns(t *testing.T) {
	t.Parallel()
	l := newTestLanes(t)
	ctx := context.Background()
	t0, sub := time.UnixMilli(1_800_000_000_000), uuid.New()
	var items []LaneItem
	for i := range 4 {
		items = append(items, laneAt(fmt.Sprint(i), "A", sub, t0, 5))
	}
	manual := laneAt("manual", "A", sub, t0, 0)
	manual.Task.Trigger = store.TriggerManual
	if _, err := l.Push(ctx, append(items, manual)...); err != nil {
		t.Fatal(err)
	}
	req := TakeRequest{Now: t0, Want: 10, Share: 10, SubscriptionCap: 10}
	for i, step := range []struct {
		at   time.Duration
		want []string
	}{{0, []string{"0", "manual"}}, {100 * time.Millisecond, nil}, {200 * time.Millisecond, []string{"1"}}, {450 * time.Millisecond, []string{"2"}}} {
		req.Now = t0.Add(step.at)
		got, err := l.Take(ctx, req, Running{})
		if err != nil {
			t.Fatal(err)
		}
		next := got.Next
		if g := names(got.Items); !slices.Equal(g, step.want) && (len(g) > 0 || len(step.want) > 0) {
			t.Fatalf("step %d at +%v: took %v, want %v", i, step.at, g, step.want)
		}
		if next.Before(req.Now) || next.Sub(req.Now) > 200*time.Millisecond {
			t.Errorf("step %d at +%v: next wake at +%v, want the next turn", i, step.at, next.Sub(t0))
		}
	}
}

// TestLanesPushDropAndParked: pushing an id twice parks it once; parked
// tells parked attempts from others; drop removes a subscription's
// attempts and leaves its merchant's others alone.
func TestLanesPushDropAndParked(t *testing.T) {
	t.Parallel()
	l := newTestLanes(t)
	ctx := context.Background()
	t0, gone, kept := time.UnixMilli(1_800_000_000_000), uuid.New(), uuid.New()
	a, b, c := laneAt("a", "A", gone, t0, 1), laneAt("b", "A", gone, t0, 1), laneAt("c", "A", kept, t0, 0)
	if n, err := l.Push(ctx, a, b, c, a); err != nil || n != 3 {
		t.Fatalf("push of 4 with one twice added %d (%v), want 3", n, err)
	}
	if n, err := l.Drop(ctx, "A", gone); err != nil || n != 2 {
		t.Fatalf("drop removed %d (%v), want 2", n, err)
	}
	parked, err := l.Held(ctx, []LaneItem{a, b, c}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(parked, []bool{false, false, true}) {
		t.Errorf("parked = %v after the drop, want [false false true]", parked)
	}
	got, err := l.Take(ctx, TakeRequest{Now: t0, Want: 5, Share: 5, SubscriptionCap: 5}, Running{})
	if err != nil || !slices.Equal(names(got.Items), []string{"c"}) {
		t.Fatalf("took %v (%v) after the drop, want [c]", names(got.Items), err)
	}
	keys, err := l.redis.Keys(ctx, "{webhookd:lanes*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(keys, func(k string) bool {
		return !strings.HasSuffix(k, ":tick") && !strings.HasSuffix(k, ":stats") && !strings.HasSuffix(k, ":taken")
	}) {
		t.Errorf("an empty schedule left keys behind: %v", keys)
	}
}

// TestLanesTurnsOutliveTheirTake: the round-robin stamps a take gives
// (counted within the call) carry on into the next take, so that takes of
// one slot each alternate between two merchants' backlogs.
func TestLanesTurnsOutliveTheirTake(t *testing.T) {
	t.Parallel()
	l := newTestLanes(t)
	ctx := context.Background()
	t0, subA, subB := time.UnixMilli(1_800_000_000_000), uuid.New(), uuid.New()
	var items []LaneItem
	for i := range 3 {
		items = append(items, laneAt(fmt.Sprint("a", i), "A", subA, t0, 0), laneAt(fmt.Sprint("b", i), "B", subB, t0, 0))
	}
	if _, err := l.Push(ctx, items...); err != nil {
		t.Fatal(err)
	}
	var took []string
	for range 6 {
		got, err := l.Take(ctx, TakeRequest{Now: t0, Want: 1, Share: 10, SubscriptionCap: 10}, Running{})
		if err != nil {
			t.Fatal(err)
		}
		took = append(took, names(got.Items)...)
	}
	if want := []string{"a0", "b0", "a1", "b1", "a2", "b2"}; !slices.Equal(took, want) {
		t.Errorf("six takes of one took %v, want %v", took, want)
	}
}

// TestLanesPushPlacesALaneByItsFirstAttempt: a push of several attempts
// of one subscription, out of due order, parks the subscription (and its
// merchant) until the earliest of them, not the first pushed.
func TestLanesPushPlacesALaneByItsFirstAttempt(t *testing.T) {
	t.Parallel()
	l := newTestLanes(t)
	ctx := context.Background()
	t0, sub := time.UnixMilli(1_800_000_000_000), uuid.New()
	late, early := laneAt("late", "A", sub, t0.Add(time.Minute), 0), laneAt("early", "A", sub, t0.Add(time.Second), 0)
	if _, err := l.Push(ctx, late, early); err != nil {
		t.Fatal(err)
	}
	got, err := l.Take(ctx, TakeRequest{Now: t0, Want: 2, Share: 10, SubscriptionCap: 10}, Running{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Items) != 0 || !got.Next.Equal(early.Task.Due) {
		t.Fatalf("at t0: took %v, next wake %v; want nothing until %v", names(got.Items), got.Next, early.Task.Due)
	}
	got, err = l.Take(ctx, TakeRequest{Now: early.Task.Due, Want: 2, Share: 10, SubscriptionCap: 10}, Running{})
	if err != nil {
		t.Fatal(err)
	}
	if g := names(got.Items); !slices.Equal(g, []string{"early"}) || !got.Next.Equal(late.Task.Due) {
		t.Errorf("when the earliest is due: took %v, next wake %v; want [early] and %v", g, got.Next, late.Task.Due)
	}
}

// TestLanesTakeCommandsPerUnit counts the Redis commands a take runs
// per attempt it hands over, on the test's own Redis server: one merchant
// with four subscriptions, within its share and beyond it (every slot lent,
// as at a fan-out that fills the pool).
func TestLanesTakeCommandsPerUnit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		share int
		// running is what the merchant runs already.
		running int
		// most is the commands a unit may cost: 8 a unit (its lane's first
		// two attempts and pace, the attempt's removal and task, the two
		// stamps), the call's own (its taken set, the wait sets'
		// promotions and next wakes, the counters) and the four lanes' and
		// the merchant's leaving the rings once emptied: 327 here. Reading
		// each lane's pace again and its ring's members it had just
		// stamped took 16 a unit (670 in all); reading the rings for every
		// unit, and the lane's next attempt after taking its first, 12
		// within the share (480) and 13 beyond it (520).
		most float64
	}{
		{name: "within the share", share: 100, running: 0, most: 8.5},
		{name: "lent beyond the share", share: 1, running: 1, most: 8.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := newTestLanes(t)
			ctx := context.Background()
			t0 := time.UnixMilli(1_800_000_000_000)
			subs := []uuid.UUID{uuid.New(), uuid.New(), uuid.New(), uuid.New()}
			var items []LaneItem
			for i := range 40 {
				items = append(items, laneAt(fmt.Sprint("a", i), "A", subs[i%len(subs)], t0, 0))
			}
			if _, err := l.Push(ctx, items...); err != nil {
				t.Fatal(err)
			}
			if err := l.redis.ConfigResetStat(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			got, err := l.Take(ctx, TakeRequest{Now: t0, Want: 40, Share: tc.share, SubscriptionCap: 100, Lendable: 40},
				Running{Merchants: map[string]int{"A": tc.running}})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Items) != 40 {
				t.Fatalf("took %d of 40", len(got.Items))
			}
			byName, err := storetest.CommandCalls(ctx, l.redis)
			if err != nil {
				t.Fatal(err)
			}
			calls := int64(0)
			for name, n := range byName {
				// The function's call itself and the test's own commands are not
				// the take's.
				if name == "fcall" || name == "info" || name == "hello" || strings.HasPrefix(name, "config") {
					continue
				}
				calls += n
			}
			if perUnit := float64(calls) / 40; perUnit > tc.most {
				t.Errorf("%d commands for 40 attempts taken, %.1f each; want at most %.1f: %v", calls, perUnit, tc.most, byName)
			}
			t.Logf("%d commands for 40 attempts taken: %v", calls, byName)
		})
	}
}
