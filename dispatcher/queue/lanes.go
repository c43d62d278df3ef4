package queue

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/store"
)

// WakeChannel is the Redis channel a push announces new work on, so
// that idle workers take it at once instead of polling. The message names
// the shard the work was parked in (wakeMessage); a worker told anything
// else (a build from before the shards) looks in every shard.
const WakeChannel = legacyPrefix + ":wake"

// The schedule's Redis layout, in each shard P (lanes.lua and the functions
// below keep it; shards.go names the shards and the merchants in each):
//
//	P:ready        ZSET merchant → round-robin stamp: merchants that may have due work
//	P:wait         ZSET merchant → ms when its first parked work is due
//	P:tick         counter of round-robin stamps
//	P:m:M:ready    ZSET subscription → stamp: merchant M's subscriptions with due work
//	P:m:M:wait     ZSET subscription → ms when it has due work again
//	P:s:S          ZSET attempt id → due ms: the attempts parked for subscription S
//	               (S/manual: its manual attempts, outside its rate limit)
//	P:p:S          HASH attempt id → attempt task (JSON)
//	P:r:S          HASH rate (deliveries/s), next (ms of the next turn)
//	P:stats        HASH parked: how many attempts are parked in all
//	P:taken        ZSET attempt id → ms taken: attempts taken lately, not yet leased perhaps
//
// A merchant's attempts all live in one shard (shardOf). Within a shard,
// work is taken round-robin over merchants, then round-robin over the
// merchant's subscriptions, then in due order within a subscription: a
// merchant's backlog is one entry in the merchant ring however long it is.
// Across shards a take spreads its slots over the shards with due work,
// starting from a different one each time (Take, ShardWatch).
//
//go:embed lanes.lua
var laneLibrary string

// Lanes is the schedule of due and parked attempts in Redis, shared by
// every process: API processes push first and manual attempts, workers
// push retries and take what is due. Nothing in it is the only copy of
// anything: each attempt is a pending delivery in Postgres, and the
// sweeper pushes again what Redis lost.
//
// It is spread over shards, each under a hash tag of its own, so that a
// Redis Cluster spreads the schedule over its masters; every process of
// an installation must be configured with the same number of shards.
type Lanes struct {
	redis redis.UniversalClient
	// prefixes name each shard's keys.
	prefixes []string
	// fn are the schedule's Redis functions, so that the layout's rules
	// (refresh, promote) are written once, in lanes.lua.
	fn laneFunctions
}

// NewLanes returns the schedule kept on rdb, spread over shards shards
// (below 1: DefaultScheduleShards; above MaxScheduleShards: that many).
func NewLanes(rdb redis.UniversalClient, shards int) *Lanes {
	if shards < 1 {
		shards = DefaultScheduleShards
	}
	return &Lanes{redis: rdb, prefixes: shardPrefixes(min(shards, MaxScheduleShards)), fn: newLaneFunctions(laneLibrary)}
}

// Shards is how many shards the schedule is spread over.
func (l *Lanes) Shards() int { return len(l.prefixes) }

// ShardOf is the shard merchant lane m's attempts are parked in.
func (l *Lanes) ShardOf(m string) int { return shardOf(m, len(l.prefixes)) }

// prefixOf is the key prefix of the shard merchant lane m lives in.
func (l *Lanes) prefixOf(m string) string { return l.prefixes[shardOf(m, len(l.prefixes))] }

// wakeMessage is what a push into shard k publishes on WakeChannel.
func wakeMessage(k int) string { return "shard:" + strconv.Itoa(k) }

// LaneItem is one attempt pushed to or taken from the schedule.
type LaneItem struct {
	// ID names the attempt (attemptTaskID, manualTaskID): a push of an id
	// already parked adds nothing.
	ID   string
	Task Attempt
	// Batch are the attempts a take handed over with this one, of the
	// same batched subscription, to go in one request (batch.go); never
	// pushed.
	Batch []LaneItem
}

// Push parks attempts until they are due, each under its merchant and
// subscription in its merchant's shard, and wakes the workers. It returns
// how many were added (an id already parked is not).
func (l *Lanes) Push(ctx context.Context, items ...LaneItem) (int, error) {
	if len(items) == 0 {
		return 0, nil
	}
	// One call per shard the items fall in: a publish's attempts are one
	// merchant's, so one shard.
	byShard := map[int][]any{}
	var order []int
	for _, it := range items {
		payload, err := json.Marshal(it.Task)
		if err != nil {
			return 0, fmt.Errorf("encode attempt %s: %w", it.ID, err)
		}
		rate := strconv.Itoa(it.Task.RateLimit)
		if it.Task.Trigger == store.TriggerManual {
			rate = "0" // outside the subscription's rate limit
		}
		size, wait := laneBatch(it.Task)
		m := MerchantLane(it.Task)
		k := shardOf(m, len(l.prefixes))
		if _, ok := byShard[k]; !ok {
			order = append(order, k)
			byShard[k] = []any{l.prefixes[k], WakeChannel, wakeMessage(k)}
		}
		byShard[k] = append(byShard[k], m, subscriptionLane(it.Task), it.ID,
			strconv.FormatInt(it.Task.Due.UnixMilli(), 10), rate, payload, size, wait)
	}
	added := 0
	for _, k := range order {
		n, err := l.fn.call(ctx, l.redis, l.fn.push, l.prefixes[k]+":ready", byShard[k]...).Int()
		if err != nil {
			return added, fmt.Errorf("park %d attempts: %w", len(items), err)
		}
		added += n
	}
	return added, nil
}

// MerchantLane is the merchant an attempt is scheduled under; a task from
// an older build without one stands for a merchant of its own.
func MerchantLane(t Attempt) string {
	if t.MerchantID == "" {
		return "subscription:" + t.SubscriptionID.String()
	}
	return t.MerchantID
}

// manualLane marks the lane of a subscription's manual attempts.
const manualLane = "/manual"

// subscriptionLane is the lane an attempt waits in: its subscription's,
// or for a manual attempt (redeliver, recover) the subscription's manual
// lane, which no rate limit paces and which does not queue behind the
// subscription's backlog.
func subscriptionLane(t Attempt) string {
	if t.Trigger == store.TriggerManual {
		return t.SubscriptionID.String() + manualLane
	}
	return t.SubscriptionID.String()
}

// Running is what this process has in flight, as take weighs it.
type Running struct {
	// Merchants counts the attempts each merchant has running here.
	Merchants map[string]int
	// SubscriptionRoom is how many more attempts each subscription may
	// start here, for the subscriptions running some or capped below the
	// default (an open circuit); any other may start SubscriptionCap.
	SubscriptionRoom map[string]int
	// Unlendable are the subscriptions that get no slot beyond their
	// merchant's share: those whose last attempt timed out.
	Unlendable map[string]bool
}

// clone is a copy of r a take may count in.
func (r Running) clone() Running {
	return Running{Merchants: maps.Clone(r.Merchants), SubscriptionRoom: maps.Clone(r.SubscriptionRoom),
		Unlendable: r.Unlendable}
}

// count counts units taken as running, as the take function does within one
// call, so that the next round of a take over shards weighs them.
func (r *Running) count(units []LaneItem, subscriptionCap int) {
	if r.Merchants == nil {
		r.Merchants = map[string]int{}
	}
	if r.SubscriptionRoom == nil {
		r.SubscriptionRoom = map[string]int{}
	}
	for _, u := range units {
		r.Merchants[MerchantLane(u.Task)]++
		lane := subscriptionLane(u.Task)
		room, ok := r.SubscriptionRoom[lane]
		if !ok {
			room = subscriptionCap
		}
		r.SubscriptionRoom[lane] = room - 1
	}
}

// TakeRequest bounds one take.
type TakeRequest struct {
	// Now is the schedule's time.
	Now time.Time
	// Want is how many attempts to take at most (the free slots).
	Want int
	// Share is how many attempts one merchant may run while others wait.
	Share int
	// SubscriptionCap is how many attempts one subscription may run.
	SubscriptionCap int
	// Held is how long an attempt taken counts as held for the sweeper,
	// until its worker leases its delivery (the sweeper's grace).
	Held time.Duration
	// Lendable is how many slots may be filled in all before no more is
	// lent to a merchant beyond its share (the free slots less the reserve
	// kept for others).
	Lendable int
	// Shards are the shards to look in, the first first (ShardWatch.Due);
	// nil: every shard.
	Shards []int
}

// Taken is what one take handed over.
type Taken struct {
	// Items are the attempts taken.
	Items []LaneItem
	// Next is when the next parked attempt is due in the shards looked in
	// (zero: none is parked there).
	Next time.Time
	// HeldBack tells that due work was left in a shard looked in (over a
	// share, a cap or the reserve): a slot that frees may take it. Without
	// it, only new work or Next can give a take anything.
	HeldBack bool
	// Looked is what each shard looked in said of itself; a shard that
	// could not be read (its Redis node away) is not among them.
	Looked []ShardLook
}

// ShardLook is what a take saw of one shard.
type ShardLook struct {
	Shard int
	// Next is when its next parked attempt is due (zero: none).
	Next time.Time
	// HeldBack tells that due work was left in it.
	HeldBack bool
}

// Take takes up to req.Want due attempts from the shards req.Shards names.
// Within a shard it goes round-robin over merchants with due work: first
// those under their share, then, with slots to lend, those over it. Across
// shards, each is first offered its part of the slots (one pipelined round
// trip for all of them), then what is left goes to those that used their
// whole part, in order. A shard that cannot be read is skipped and its
// error returned with what the others gave: one Redis node away stops
// only the merchants it holds.
func (l *Lanes) Take(ctx context.Context, req TakeRequest, r Running) (Taken, error) {
	shards := req.Shards
	if shards == nil {
		shards = l.all()
	}
	order := shards
	var out Taken
	var errs []error
	looks := map[int]ShardLook{}
	// Rounds: each shard still in play is offered its part of the slots
	// left and of what may still be lent (one pipelined round trip for
	// all), so that a take of few slots spreads over the shards with due
	// work. A shard stays in play while it used its whole part and still
	// had due work left: a part of nothing, when the slots were fewer than
	// the shards, is a part too.
	taken, lent := 0, 0
	r = r.clone()
	for len(shards) > 0 && taken < req.Want {
		round := req
		round.Lendable = max(0, req.Lendable-lent)
		parts, lends := split(req.Want-taken, len(shards)), split(round.Lendable, len(shards))
		// The next round offers the shards that got nothing this one
		// first: with few slots left they are the ones owed a turn.
		var owed, again []int
		for i, res := range l.takeShards(ctx, round, r, shards, parts, lends) {
			if res.err != nil {
				errs = append(errs, res.err)
				continue
			}
			looks[shards[i]] = res.look
			out.Items = append(out.Items, res.items...)
			taken += len(res.items)
			lent += min(len(res.items), lends[i])
			r.count(res.items, req.SubscriptionCap)
			switch {
			case len(res.items) < parts[i] || !res.look.HeldBack:
			case parts[i] == 0:
				owed = append(owed, shards[i])
			default:
				again = append(again, shards[i])
			}
		}
		shards = append(owed, again...)
	}
	for _, k := range order {
		look, ok := looks[k]
		if !ok {
			continue
		}
		out.Looked = append(out.Looked, look)
		out.HeldBack = out.HeldBack || look.HeldBack
		if !look.Next.IsZero() && (out.Next.IsZero() || look.Next.Before(out.Next)) {
			out.Next = look.Next
		}
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("take due attempts: %w", errors.Join(errs...))
	}
	return out, nil
}

// all is every shard, in order.
func (l *Lanes) all() []int {
	out := make([]int, len(l.prefixes))
	for k := range out {
		out[k] = k
	}
	return out
}

// split shares n out over parts as evenly as it goes, the first ones
// getting what does not divide.
func split(n, parts int) []int {
	out := make([]int, parts)
	for i := range out {
		out[i] = n / parts
		if i < n%parts {
			out[i]++
		}
	}
	return out
}

// shardTake is one shard's answer to a take.
type shardTake struct {
	items []LaneItem
	look  ShardLook
	err   error
}

// takeShards runs the take function in each shard with its want and
// lendable, pipelined: one round trip to each Redis node whatever the
// number of shards.
func (l *Lanes) takeShards(ctx context.Context, req TakeRequest, r Running, shards, wants, lendables []int) []shardTake {
	out := make([]shardTake, len(shards))
	run := func() []*redis.Cmd {
		cmds := make([]*redis.Cmd, len(shards))
		pipe := l.redis.Pipeline()
		for i, k := range shards {
			cmds[i] = pipe.FCall(ctx, l.fn.take, []string{l.prefixes[k] + ":ready"},
				l.takeArgs(k, req, r, wants[i], lendables[i])...)
		}
		_, _ = pipe.Exec(ctx) // each command's error is read below
		return cmds
	}
	cmds := run()
	if slices.ContainsFunc(cmds, func(c *redis.Cmd) bool { return isFunctionMissing(c.Err()) }) {
		// A node that has not loaded the library yet (new, or restarted
		// without persistence): load it everywhere and take again.
		if err := l.fn.load(ctx, l.redis); err != nil {
			for i := range out {
				out[i].err = fmt.Errorf("load the schedule's functions: %w", err)
			}
			return out
		}
		cmds = run()
	}
	for i, cmd := range cmds {
		res, err := cmd.Slice()
		switch {
		case err != nil:
			out[i].err = fmt.Errorf("shard %d: %w", shards[i], err)
		case len(res) < 2:
			out[i].err = fmt.Errorf("shard %d: short answer", shards[i])
		default:
			out[i].look.Shard = shards[i]
			if ms, _ := res[0].(int64); ms > 0 {
				out[i].look.Next = time.UnixMilli(ms)
			}
			more, _ := res[1].(int64)
			out[i].look.HeldBack = more == 1
			out[i].items = takenUnits(res[2:])
		}
	}
	return out
}

// takeArgs are the take function's arguments in shard k. Of the
// merchants running here only the shard's own are sent: the function
// weighs no other, and a take reads up to every shard with work.
func (l *Lanes) takeArgs(k int, req TakeRequest, r Running, want, lendable int) []any {
	merchants := make([]any, 0, 2*len(r.Merchants))
	for m, n := range r.Merchants {
		if shardOf(m, len(l.prefixes)) == k {
			merchants = append(merchants, m, n)
		}
	}
	running := len(merchants) / 2
	args := make([]any, 0, 16+len(merchants)+2*len(r.SubscriptionRoom)+len(r.Unlendable))
	args = append(args, l.prefixes[k], req.Now.UnixMilli(), want, req.Share, req.SubscriptionCap, lendable,
		// Merchants scanned per pass: those running here (at their share,
		// or with every subscription at its cap) may sit at the ring's
		// head without being takeable, and a few more behind them.
		running+16, req.Held.Milliseconds(), running)
	args = append(args, merchants...)
	args = append(args, len(r.SubscriptionRoom))
	for s, n := range r.SubscriptionRoom {
		args = append(args, s, n)
	}
	args = append(args, len(r.Unlendable))
	for s := range r.Unlendable {
		args = append(args, s)
	}
	return args
}

// Drop removes every attempt parked for a subscription (deleted,
// disabled, an ended listener), manual ones included, and returns how many
// there were.
func (l *Lanes) Drop(ctx context.Context, merchantID string, subscriptionID uuid.UUID) (int, error) {
	prefix := l.prefixOf(merchantID)
	n, err := l.fn.call(ctx, l.redis, l.fn.drop, prefix+":ready", prefix, merchantID,
		subscriptionID.String(), subscriptionID.String()+manualLane).Int()
	if err != nil {
		return 0, fmt.Errorf("drop the attempts of subscription %s: %w", subscriptionID, err)
	}
	return n, nil
}

// Held tells, for each attempt, whether the schedule holds it: parked, or
// taken by a worker since since (which leases its delivery in a moment).
// One pipelined read, whatever their number.
func (l *Lanes) Held(ctx context.Context, items []LaneItem, since time.Time) ([]bool, error) {
	if len(items) == 0 {
		return nil, nil
	}
	pipe := l.redis.Pipeline()
	parked := make([]*redis.FloatCmd, len(items))
	taken := make([]*redis.FloatCmd, len(items))
	for i, it := range items {
		prefix := l.prefixOf(MerchantLane(it.Task))
		parked[i] = pipe.ZScore(ctx, prefix+":s:"+subscriptionLane(it.Task), it.ID)
		taken[i] = pipe.ZScore(ctx, prefix+":taken", it.ID)
	}
	_, _ = pipe.Exec(ctx) // each command's error is read below
	out := make([]bool, len(items))
	for i := range items {
		_, perr := parked[i].Result()
		at, terr := taken[i].Result()
		for _, err := range []error{perr, terr} {
			if err != nil && !errors.Is(err, redis.Nil) {
				return nil, fmt.Errorf("read %d parked attempts: %w", len(items), err)
			}
		}
		out[i] = perr == nil || (terr == nil && int64(at) >= since.UnixMilli())
	}
	return out, nil
}

// Stats is the schedule's state as the metrics show it.
type Stats struct {
	// Parked is how many attempts wait in the schedule, due or not.
	Parked int64
	// MerchantsDue is how many merchants have due work; MerchantsLater how
	// many have only work parked for later.
	MerchantsDue, MerchantsLater int64
	// OldestDue is how long the oldest due attempt has waited (sampled).
	OldestDue time.Duration
}

// Stats reads the schedule's state, one call per shard.
func (l *Lanes) Stats(ctx context.Context, now time.Time) (Stats, error) {
	var out Stats
	for _, prefix := range l.prefixes {
		v, err := l.fn.call(ctx, l.redis, l.fn.stats, prefix+":ready", prefix, now.UnixMilli()).Int64Slice()
		if err != nil || len(v) != 4 {
			return Stats{}, fmt.Errorf("read the schedule's state: %w", cmp.Or(err, errors.New("unexpected answer")))
		}
		out.Parked += v[0]
		out.MerchantsDue += v[1]
		out.MerchantsLater += v[2]
		out.OldestDue = max(out.OldestDue, time.Duration(v[3])*time.Millisecond)
	}
	return out, nil
}

// SetRate changes the deliveries per second the parked attempts of a
// subscription of merchant lane m are paced at (0: none).
func (l *Lanes) SetRate(ctx context.Context, m string, subscriptionID uuid.UUID, perSecond int) error {
	err := l.redis.HSet(ctx, l.prefixOf(m)+":r:"+subscriptionID.String(), "rate", perSecond).Err()
	if err != nil {
		return fmt.Errorf("set the rate limit of subscription %s: %w", subscriptionID, err)
	}
	return nil
}
