package queue

import (
	"context"
	_ "embed"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// freshReadsLibrary is the schedule's functions as they were before a
// take kept the rings it read between units: each unit read the
// merchants' ring and the merchant's subscriptions' ring afresh. It is
// kept only as the reference TestLanesTakeAsBefore holds the take to.
//
//go:embed testdata/lanes_fresh_reads.lua
var freshReadsLibrary string

// TestLanesTakeAsBefore is the take's order written as an equivalence:
// over random schedules (merchants over and under their shares, more than
// a take reads at once, capped,
// unlendable and rate-limited subscriptions, batched lanes, attempts due
// later, tasks gone from under their ids), the take hands over the same
// units in the same order, says the same of what is next and held back,
// and leaves every key of the schedule as the take that read the rings
// afresh for every unit left it.
func TestLanesTakeAsBefore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	before, after := newTestLanes(t), newTestLanes(t)
	before.fn = newLaneFunctions(freshReadsLibrary)
	if before.fn.take == after.fn.take {
		t.Fatal("the reference library is the library under test")
	}
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 42))
		for _, l := range []*Lanes{before, after} {
			if err := l.redis.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		s := newRandomSchedule(rng)
		units := 0
		for round := range 80 {
			items, req, running := s.round(rng)
			for _, l := range []*Lanes{before, after} {
				if _, err := l.Push(ctx, items...); err != nil {
					t.Fatal(err)
				}
			}
			if rng.IntN(8) == 0 {
				s.loseATask(ctx, t, rng, before, after)
			}
			want, err := before.Take(ctx, req, running)
			if err != nil {
				t.Fatal(err)
			}
			got, err := after.Take(ctx, req, running)
			if err != nil {
				t.Fatal(err)
			}
			if w, g := unitNames(want), unitNames(got); !slices.Equal(w, g) {
				t.Fatalf("seed %d round %d: took %v, want %v (request %+v, running %+v)", seed, round, g, w, req, running)
			}
			if !got.Next.Equal(want.Next) || got.HeldBack != want.HeldBack {
				t.Fatalf("seed %d round %d: next %v held back %v, want %v %v", seed, round, got.Next, got.HeldBack, want.Next, want.HeldBack)
			}
			if w, g := dumpSchedule(ctx, t, before.redis), dumpSchedule(ctx, t, after.redis); !slices.Equal(w, g) {
				t.Fatalf("seed %d round %d: the schedules differ after the take:\n got %v\nwant %v", seed, round, g, w)
			}
			units += len(got.Items)
		}
		// The rounds must have taken work, or the equivalence says nothing.
		if units < 200 {
			t.Fatalf("seed %d: only %d units taken over the rounds", seed, units)
		}
	}
}

// randomSchedule makes the rounds of TestLanesTakeAsBefore: a few
// merchants with a few subscriptions each, some paced or batched.
type randomSchedule struct {
	now       time.Time
	merchants []string
	subs      map[string][]uuid.UUID
	rate      map[uuid.UUID]int
	batch     map[uuid.UUID][2]int
	next      int
	pushed    []LaneItem
}

func newRandomSchedule(rng *rand.Rand) *randomSchedule {
	s := &randomSchedule{now: time.UnixMilli(1_800_000_000_000), subs: map[string][]uuid.UUID{},
		rate: map[uuid.UUID]int{}, batch: map[uuid.UUID][2]int{}}
	// Some schedules hold more merchants than a take reads at once, and a
	// merchant more subscriptions.
	merchants, most := 2+rng.IntN(5), 6
	if rng.IntN(3) == 0 {
		merchants, most = 20+rng.IntN(12), 40
	}
	for m := range merchants {
		name := fmt.Sprintf("m%d", m)
		s.merchants = append(s.merchants, name)
		subs := 1 + rng.IntN(6)
		if m == 0 {
			subs = 1 + rng.IntN(most)
		}
		for range subs {
			sub := uuid.New()
			s.subs[name] = append(s.subs[name], sub)
			switch rng.IntN(6) {
			case 0:
				s.rate[sub] = 1 + rng.IntN(20)
			case 1:
				s.batch[sub] = [2]int{2 + rng.IntN(4), 1 + rng.IntN(3000)}
			}
		}
	}
	return s
}

// round moves the clock, parks new attempts (some due later) and makes a
// take's request and what runs meanwhile.
func (s *randomSchedule) round(rng *rand.Rand) ([]LaneItem, TakeRequest, Running) {
	s.now = s.now.Add(time.Duration(rng.IntN(1500)) * time.Millisecond)
	var items []LaneItem
	for range rng.IntN(30) {
		m := s.merchants[rng.IntN(len(s.merchants))]
		sub := s.subs[m][rng.IntN(len(s.subs[m]))]
		due := s.now.Add(time.Duration(rng.IntN(4000)-2500) * time.Millisecond)
		it := laneAt(fmt.Sprintf("a%04d", s.next), m, sub, due, s.rate[sub])
		if b, ok := s.batch[sub]; ok {
			it.Task.BatchSize, it.Task.BatchWaitMS = b[0], b[1]
		}
		s.next++
		items = append(items, it)
		s.pushed = append(s.pushed, it)
	}
	running := Running{Merchants: map[string]int{}, SubscriptionRoom: map[string]int{}, Unlendable: map[string]bool{}}
	share := 1 + rng.IntN(6)
	for _, m := range s.merchants {
		if rng.IntN(2) == 0 {
			running.Merchants[m] = rng.IntN(2 * share)
		}
		for _, sub := range s.subs[m] {
			switch rng.IntN(5) {
			case 0:
				running.SubscriptionRoom[sub.String()] = rng.IntN(3)
			case 1:
				running.Unlendable[sub.String()] = true
			}
		}
	}
	want := 1 + rng.IntN(40)
	req := TakeRequest{Now: s.now, Want: want, Share: share, SubscriptionCap: 1 + rng.IntN(4),
		Lendable: rng.IntN(want + 1), Held: time.Minute}
	return items, req, running
}

// loseATask removes one parked attempt's task from under its id in both
// schedules, as a sweeper's re-park racing a take can: the take drops
// that attempt and goes on.
func (s *randomSchedule) loseATask(ctx context.Context, t *testing.T, rng *rand.Rand, schedules ...*Lanes) {
	t.Helper()
	if len(s.pushed) == 0 {
		return
	}
	it := s.pushed[rng.IntN(len(s.pushed))]
	for _, l := range schedules {
		key := l.prefixOf(MerchantLane(it.Task)) + ":p:" + subscriptionLane(it.Task)
		if err := l.redis.HDel(ctx, key, it.ID).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// unitNames writes each unit taken as its id and its companions' ids.
func unitNames(got Taken) []string {
	out := make([]string, len(got.Items))
	for i, u := range got.Items {
		out[i] = strings.Join(append([]string{u.ID}, names(u.Batch)...), "+")
	}
	return out
}

// dumpSchedule is every key of a test's Redis server with its type,
// content and expiry, in key order.
func dumpSchedule(ctx context.Context, t *testing.T, rdb redis.UniversalClient) []string {
	t.Helper()
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		kind, err := rdb.Type(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		var content any
		switch kind {
		case "zset":
			content, err = rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
		case "hash":
			var h map[string]string
			h, err = rdb.HGetAll(ctx, k).Result()
			fields := make([]string, 0, len(h))
			for f, v := range h {
				fields = append(fields, f+"="+v)
			}
			slices.Sort(fields)
			content = fields
		case "string":
			content, err = rdb.Get(ctx, k).Result()
		default:
			content = "(" + kind + ")"
		}
		if err != nil {
			t.Fatal(err)
		}
		ttl, err := rdb.PExpireTime(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %s %v expires %v", k, kind, content, ttl))
	}
	return out
}
