package queue

import (
	"slices"
	"testing"
	"time"
)

// TestShardWatch states when a worker looks in a shard: once per idle at
// first and after, where a push woke it, where work falls due or was held
// back, and nowhere else.
func TestShardWatch(t *testing.T) {
	t.Parallel()
	t0 := time.UnixMilli(1_800_000_000_000)
	const idle = time.Second
	sorted := func(l Look) []int { return slices.Sorted(slices.Values(l.Shards)) }
	every := []int{0, 1, 2, 3}
	for _, tc := range []struct {
		name string
		// arrange brings a fresh watch (its first full look made at t0,
		// every shard found empty) to the state the case needs.
		arrange func(w *ShardWatch)
		at      time.Duration
		want    []int
	}{
		{name: "nothing known, within idle: no look at all", arrange: func(*ShardWatch) {}, at: idle / 2, want: nil},
		{name: "an idle interval passed: every shard", arrange: func(*ShardWatch) {}, at: idle, want: every},
		{name: "a push woke shard 2", arrange: func(w *ShardWatch) { w.Woken(wakeMessage(2)) }, at: 0, want: []int{2}},
		{name: "a wake from a build without shards: every shard", arrange: func(w *ShardWatch) { w.Woken("1") }, at: 0, want: every},
		{name: "a wake naming no shard of ours: every shard", arrange: func(w *ShardWatch) { w.Woken("shard:99") }, at: 0, want: every},
		{
			name: "work parked for later is looked at when due, not before",
			arrange: func(w *ShardWatch) {
				w.Saw(Look{Shards: []int{3}, woken: []uint64{0}}, Taken{Looked: []ShardLook{{Shard: 3, Next: t0.Add(300 * time.Millisecond)}}})
				if got := w.Due(t0.Add(299 * time.Millisecond)); len(got.Shards) != 0 {
					t.Errorf("looks in %v before the work is due", got.Shards)
				}
			},
			at: 300 * time.Millisecond, want: []int{3},
		},
		{
			name: "due work held back is looked at again",
			arrange: func(w *ShardWatch) {
				w.Saw(Look{Shards: []int{1}, woken: []uint64{0}}, Taken{Looked: []ShardLook{{Shard: 1, HeldBack: true}}})
			},
			at: 0, want: []int{1},
		},
		{
			name: "a wake heard while the take read the shard is not forgotten",
			arrange: func(w *ShardWatch) {
				w.Woken(wakeMessage(0))
				look := w.Due(t0)
				w.Woken(wakeMessage(0)) // a push after the take read shard 0
				w.Saw(look, Taken{Looked: []ShardLook{{Shard: 0}}})
			},
			at: 0, want: []int{0},
		},
		{
			name: "a shard the take could not read is left alone for a moment",
			arrange: func(w *ShardWatch) {
				w.Woken(wakeMessage(1))
				w.Woken(wakeMessage(2))
				w.Saw(w.Due(t0), Taken{Looked: []ShardLook{{Shard: 2}}}) // shard 1's node away
			},
			at: 99 * time.Millisecond, want: nil,
		},
		{
			name: "then it is due again",
			arrange: func(w *ShardWatch) {
				w.Woken(wakeMessage(1))
				w.Saw(w.Due(t0), Taken{}) // shard 1's node away
			},
			at: 100 * time.Millisecond, want: []int{1},
		},
		{
			name: "and after failures in a row, after a longer pause",
			arrange: func(w *ShardWatch) {
				w.Woken(wakeMessage(1))
				// Failing at +0, then at +100 ms and +300 ms, each time it is
				// due again: 100, 200, then 400 ms.
				for _, at := range []time.Duration{0, 100 * time.Millisecond, 300 * time.Millisecond} {
					w.Saw(w.Due(t0.Add(at)), Taken{})
				}
				if got := w.Due(t0.Add(699 * time.Millisecond)); len(got.Shards) != 0 {
					t.Errorf("looks in %v 399 ms after a third failure", got.Shards)
				}
			},
			at: 700 * time.Millisecond, want: []int{1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := NewShardWatch(4, idle)
			w.Saw(w.Due(t0), Taken{Looked: []ShardLook{{Shard: 0}, {Shard: 1}, {Shard: 2}, {Shard: 3}}})
			tc.arrange(w)
			if got := sorted(w.Due(t0.Add(tc.at))); !slices.Equal(got, tc.want) {
				t.Errorf("looks in %v, want %v", got, tc.want)
			}
		})
	}
}

// TestShardWatchTurns: each look starts from the next shard, so that
// slots scarcer than shards with work go to each shard in turn.
func TestShardWatchTurns(t *testing.T) {
	t.Parallel()
	w := NewShardWatch(3, time.Second)
	t0 := time.UnixMilli(1_800_000_000_000)
	var firsts []int
	for i := range 4 {
		for k := range 3 {
			w.Woken(wakeMessage(k))
		}
		look := w.Due(t0.Add(time.Duration(i) * time.Millisecond))
		firsts = append(firsts, look.Shards[0])
		w.Saw(look, Taken{Looked: []ShardLook{{Shard: 0}, {Shard: 1}, {Shard: 2}}})
	}
	if !slices.Equal(firsts, []int{0, 1, 2, 0}) {
		t.Errorf("looks started at %v, want each shard in turn", firsts)
	}
	if w.HeldBack() || !w.Next().IsZero() {
		t.Errorf("every shard read and empty: held back %v, next %v; want neither", w.HeldBack(), w.Next())
	}
}
