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

// TestMigrate: attempts parked under an older layout (the one hash tag of
// the builds before the shards, or another shard count) are moved into
// the shards with their due times and rate limits, once however many
// workers run it, and the old keys go.
func TestMigrate(t *testing.T) {
	t.Parallel()
	t0 := time.UnixMilli(1_800_000_000_000)
	for _, tc := range []struct {
		name string
		// old is the layout the attempts were parked under.
		old func(l *Lanes) *Lanes
	}{
		{name: "from the one hash tag before the shards", old: func(l *Lanes) *Lanes {
			return &Lanes{redis: l.redis, prefixes: []string{legacyPrefix}, fn: l.fn}
		}},
		{name: "from another shard count", old: func(l *Lanes) *Lanes { return NewLanes(l.redis, 5) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			l := newShardedLanes(t, DefaultScheduleShards)
			old := tc.old(l)
			if err := l.redis.Set(ctx, layoutKey, old.Shards(), 0).Err(); err != nil {
				t.Fatal(err)
			}
			var parked []LaneItem
			for i := range 30 {
				it := laneAt(fmt.Sprintf("a%02d", i), fmt.Sprintf("M%d", i%7), uuid.New(), t0.Add(time.Duration(i)*time.Second), 0)
				parked = append(parked, it)
			}
			paced := laneAt("paced", "M1", uuid.New(), t0, 2)
			if n, err := old.Push(ctx, append(parked, paced)...); err != nil || n != 31 {
				t.Fatalf("parked %d under the old layout (%v)", n, err)
			}
			// The paced lane's next turn, as a take under the old layout
			// left it.
			if err := l.redis.HSet(ctx, old.prefixOf("M1")+":r:"+paced.Task.SubscriptionID.String(), "next", t0.Add(time.Minute).UnixMilli()).Err(); err != nil {
				t.Fatal(err)
			}
			for range 2 { // a second worker finds nothing left to move
				if _, err := l.Migrate(ctx); err != nil {
					t.Fatal(err)
				}
			}
			st, err := l.Stats(ctx, t0)
			if err != nil || st.Parked != 31 {
				t.Fatalf("parked after the move: %d (%v), want 31", st.Parked, err)
			}
			held, err := l.Held(ctx, append(parked, paced), t0)
			if err != nil || slices.Contains(held, false) {
				t.Fatalf("held after the move: %v (%v), want all", held, err)
			}
			// Due times kept: at t0+10s, a00…a10 are due, and the paced
			// one waits for the turn it had.
			got, err := l.Take(ctx, TakeRequest{Now: t0.Add(10 * time.Second), Want: 100, Share: 100, SubscriptionCap: 100, Held: time.Minute}, Running{})
			if err != nil {
				t.Fatal(err)
			}
			if g := slices.Sorted(slices.Values(names(got.Items))); len(g) != 11 || g[0] != "a00" || g[10] != "a10" {
				t.Errorf("took %v at t0+10s, want a00…a10", g)
			}
			keys, err := l.redis.Keys(ctx, "*").Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				for _, p := range old.prefixes {
					if strings.HasPrefix(k, p) && !slices.Contains(l.prefixes, p) {
						t.Errorf("old key %s left behind", k)
					}
				}
			}
			// A shard name both layouts share keeps only its own merchants.
			for k, p := range l.prefixes {
				for _, m := range []string{"ready", "wait"} {
					members, err := l.redis.ZRange(ctx, p+":"+m, 0, -1).Result()
					if err != nil {
						t.Fatal(err)
					}
					for _, merchant := range members {
						if shardOf(merchant, len(l.prefixes)) != k {
							t.Errorf("merchant %s left in shard %d's %s", merchant, k, m)
						}
					}
				}
			}
			if n, err := l.redis.Get(ctx, layoutKey).Int(); err != nil || n != DefaultScheduleShards {
				t.Errorf("layout noted as %d (%v), want %d", n, err, DefaultScheduleShards)
			}
		})
	}
}
