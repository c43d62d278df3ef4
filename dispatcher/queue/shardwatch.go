package queue

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ShardWatch is one worker's view of which shards of the schedule may have
// due work, so that its takes look only there: in a shard a push woke it
// for, one whose next parked attempt is due, one where a take left due
// work behind (held back by a share, a cap or the reserve), and, once per
// idle interval, every shard (a wake lost in a Redis failover, a shard
// that could not be read). A worker with nothing to do makes no take at
// all; a busy one makes one pipelined take over the shards with work.
//
// Each take starts from the next shard in turn, so that when there are
// fewer free slots than shards with work, every shard's merchants get
// their turn.
type ShardWatch struct {
	idle time.Duration

	mu     sync.Mutex
	shards []shardView
	// cursor is the shard the next take starts from.
	cursor int
	// lastFull is when every shard was last offered a look.
	lastFull time.Time
}

// shardView is what a worker knows of one shard.
type shardView struct {
	// woken counts the wakes heard for it; looked is woken as it was
	// when a take last read the shard, so that a wake heard while that
	// take ran is not forgotten.
	woken, looked uint64
	// next is when its next parked attempt is due (zero: none known).
	next time.Time
	// heldBack: due work was left in it.
	heldBack bool
	// failures counts the takes in a row that could not read it (its
	// Redis node away); it is not read again before retryAt, so that the
	// takes of the other shards do not wait on a node that does not
	// answer.
	failures int
	retryAt  time.Time
}

// shardRetry is how long a shard that could not be read is left alone
// after failures takes in a row failed: 100 ms doubling, at most 1 s (a
// Cluster's failover takes seconds; the shard is due again soon after).
func shardRetry(failures int) time.Duration {
	return min(100*time.Millisecond<<min(failures-1, 4), time.Second)
}

// NewShardWatch watches the n shards of a schedule; every shard is looked
// in at least once per idle.
func NewShardWatch(n int, idle time.Duration) *ShardWatch {
	return &ShardWatch{idle: idle, shards: make([]shardView, n)}
}

// Woken notes a wake message heard on WakeChannel: the shard it names, or
// every shard for a message that names none.
func (w *ShardWatch) Woken(message string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if k, ok := shardOfWake(message, len(w.shards)); ok {
		w.shards[k].woken++
		return
	}
	w.lastFull = time.Time{}
}

// shardOfWake reads the shard a wake message names.
func shardOfWake(message string, n int) (int, bool) {
	rest, ok := strings.CutPrefix(message, "shard:")
	if !ok {
		return 0, false
	}
	k, err := strconv.Atoi(rest)
	if err != nil || k < 0 || k >= n {
		return 0, false
	}
	return k, true
}

// Look is the shards a take should read, and what was known of them.
type Look struct {
	// Shards are the shards to read, the first first.
	Shards []int
	// woken are their wake counts when the look was made, at at.
	woken []uint64
	at    time.Time
}

// Due is the shards worth a take at now, starting from the next in turn.
func (w *ShardWatch) Due(now time.Time) Look {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(w.shards)
	all := now.Sub(w.lastFull) >= w.idle
	if all {
		w.lastFull = now
	}
	look := Look{at: now}
	for i := range n {
		k := (w.cursor + i) % n
		v := w.shards[k]
		if v.retryAt.After(now) {
			continue
		}
		if all || v.failures > 0 || v.woken != v.looked || v.heldBack || (!v.next.IsZero() && !v.next.After(now)) {
			look.Shards = append(look.Shards, k)
			look.woken = append(look.woken, v.woken)
		}
	}
	w.cursor = (w.cursor + 1) % n
	return look
}

// Saw records what a take made of look said of each shard it read; a
// shard it could not read is due again after a pause that grows with its
// failures in a row.
func (w *ShardWatch) Saw(look Look, taken Taken) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, k := range look.Shards {
		v := &w.shards[k]
		j := slices.IndexFunc(taken.Looked, func(s ShardLook) bool { return s.Shard == k })
		if j < 0 {
			v.failures++
			v.retryAt = look.at.Add(shardRetry(v.failures))
			continue
		}
		s := taken.Looked[j]
		v.looked, v.next, v.heldBack = look.woken[i], s.Next, s.HeldBack
		v.failures, v.retryAt = 0, time.Time{}
	}
}

// HeldBack tells whether a freed slot is worth a take: due work was left
// in a shard, or a shard was woken and not read since.
func (w *ShardWatch) HeldBack() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, v := range w.shards {
		if v.heldBack || v.woken != v.looked {
			return true
		}
	}
	return false
}

// Next is when the first parked attempt known of is due (zero: none).
func (w *ShardWatch) Next() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var next time.Time
	for _, v := range w.shards {
		if !v.next.IsZero() && (next.IsZero() || v.next.Before(next)) {
			next = v.next
		}
	}
	return next
}
