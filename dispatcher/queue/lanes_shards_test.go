package queue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// merchantsInShards are n merchant names, each in a different shard of a
// schedule of shards shards.
func merchantsInShards(t *testing.T, n, shards int) []string {
	t.Helper()
	var out []string
	seen := map[int]bool{}
	for i := 0; len(out) < n; i++ {
		m := fmt.Sprintf("M%d", i)
		if k := shardOf(m, shards); !seen[k] {
			seen[k] = true
			out = append(out, m)
		}
	}
	return out
}

// TestLanesAcrossShards states how a take spreads over shards: what is
// exact (a merchant's share, a subscription's cap, the reserve) holds over
// the whole take, and slots fewer than the shards with work go one to
// each in turn.
func TestLanesAcrossShards(t *testing.T) {
	t0 := time.UnixMilli(1_800_000_000_000)
	ctx := context.Background()
	ms := merchantsInShards(t, 3, DefaultScheduleShards)
	a, b, c := ms[0], ms[1], ms[2]
	subA, subA2, subB, subC := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	backlog := func(n int, m string, sub uuid.UUID, name string) []LaneItem {
		var out []LaneItem
		for i := range n {
			out = append(out, laneAt(fmt.Sprintf("%s%02d", name, i), m, sub, t0.Add(time.Duration(i)*time.Millisecond), 0))
		}
		return out
	}
	merchantOf := func(items []LaneItem) []string {
		var out []string
		for _, it := range items {
			out = append(out, it.Task.MerchantID)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		parked  []LaneItem
		req     TakeRequest
		running Running
		// check judges what was taken.
		check func(got []LaneItem) string
	}{
		{
			name:   "two slots, two merchants in two shards, one a backlog: one each",
			parked: append(backlog(50, a, subA, "a"), backlog(1, b, subB, "b")...),
			req:    TakeRequest{Want: 2, Share: 10, SubscriptionCap: 10, Lendable: 2},
			check: func(got []LaneItem) string {
				if m := merchantOf(got); len(m) != 2 || !slices.Contains(m, a) || !slices.Contains(m, b) {
					return fmt.Sprintf("took %v, want one of %s and one of %s", names(got), a, b)
				}
				return ""
			},
		},
		{
			name:   "slots beyond the shards' parts go where the work is",
			parked: append(backlog(20, a, subA, "a"), backlog(2, b, subB, "b")...),
			req:    TakeRequest{Want: 15, Share: 15, SubscriptionCap: 15, Lendable: 15},
			check: func(got []LaneItem) string {
				if len(got) != 15 || slices.Index(merchantOf(got), b) < 0 {
					return fmt.Sprintf("took %d (%v), want all 15 slots filled, b's among them", len(got), names(got))
				}
				return ""
			},
		},
		{
			name:    "a merchant's share holds over the rounds",
			parked:  append(backlog(20, a, subA, "a"), backlog(20, b, subB, "b")...),
			req:     TakeRequest{Want: 20, Share: 3, SubscriptionCap: 10, Lendable: 0},
			running: Running{Merchants: map[string]int{a: 1}},
			check: func(got []LaneItem) string {
				m := merchantOf(got)
				na, nb := len(slices.DeleteFunc(slices.Clone(m), func(x string) bool { return x != a })),
					len(slices.DeleteFunc(slices.Clone(m), func(x string) bool { return x != b }))
				if na != 2 || nb != 3 {
					return fmt.Sprintf("took %d of %s and %d of %s, want 2 and 3 (share 3, one running)", na, a, nb, b)
				}
				return ""
			},
		},
		{
			name:   "a subscription's cap holds over the rounds",
			parked: append(backlog(10, a, subA, "a"), backlog(10, a, subA2, "x")...),
			req:    TakeRequest{Want: 20, Share: 20, SubscriptionCap: 2, Lendable: 0},
			check: func(got []LaneItem) string {
				if len(got) != 4 {
					return fmt.Sprintf("took %v, want 2 of each subscription", names(got))
				}
				return ""
			},
		},
		{
			name:   "the reserve holds over the shards: lending stops at Lendable",
			parked: append(append(backlog(10, a, subA, "a"), backlog(10, b, subB, "b")...), backlog(10, c, subC, "c")...),
			req:    TakeRequest{Want: 12, Share: 1, SubscriptionCap: 12, Lendable: 5},
			check: func(got []LaneItem) string {
				// One each within their share, then 5 lent in all.
				if len(got) != 5 {
					return fmt.Sprintf("took %d (%v), want 5: the shares' 3 then lent up to Lendable", len(got), names(got))
				}
				return ""
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := newShardedLanes(t, DefaultScheduleShards)
			if _, err := l.Push(ctx, tc.parked...); err != nil {
				t.Fatal(err)
			}
			tc.req.Now = t0.Add(time.Second)
			got, err := l.Take(ctx, tc.req, tc.running)
			if err != nil {
				t.Fatal(err)
			}
			if msg := tc.check(got.Items); msg != "" {
				t.Error(msg)
			}
		})
	}
}

// TestLanesShardsAreSeparateKeys: a push lands in its merchant's shard
// only, a take of other shards does not see it, and the answer names the
// shards it read.
func TestLanesShardsAreSeparateKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newShardedLanes(t, DefaultScheduleShards)
	t0 := time.UnixMilli(1_800_000_000_000)
	m := merchantsInShards(t, 1, DefaultScheduleShards)[0]
	home := shardOf(m, DefaultScheduleShards)
	if _, err := l.Push(ctx, laneAt("x", m, uuid.New(), t0, 0)); err != nil {
		t.Fatal(err)
	}
	keys, err := l.redis.Keys(ctx, "{webhookd:lanes*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, l.prefixes[home]) {
			t.Errorf("key %s outside the merchant's shard %s", k, l.prefixes[home])
		}
	}
	other := (home + 1) % DefaultScheduleShards
	got, err := l.Take(ctx, TakeRequest{Now: t0, Want: 5, Share: 5, SubscriptionCap: 5, Shards: []int{other}}, Running{})
	if err != nil || len(got.Items) != 0 || len(got.Looked) != 1 || got.Looked[0].Shard != other {
		t.Fatalf("take of shard %d: %v, looked %v (%v); want nothing, shard %d looked", other, names(got.Items), got.Looked, err, other)
	}
	got, err = l.Take(ctx, TakeRequest{Now: t0, Want: 5, Share: 5, SubscriptionCap: 5, Shards: []int{home}}, Running{})
	if err != nil || !slices.Equal(names(got.Items), []string{"x"}) {
		t.Fatalf("take of the home shard: %v (%v), want [x]", names(got.Items), err)
	}
}
