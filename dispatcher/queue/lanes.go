package queue

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/store"
)

// lanePrefix names every Redis key of the schedule. The braces are a
// Cluster hash tag: the scripts touch several keys at once, and they must
// all live on one shard.
const lanePrefix = "{webhookd:lanes}"

// WakeChannel is the Redis channel a push announces new work on, so
// that idle workers take it at once instead of polling.
const WakeChannel = lanePrefix + ":wake"

// The schedule's Redis layout (lanes.lua and the scripts below keep it):
//
//	{webhookd:lanes}:ready        ZSET merchant → round-robin stamp: merchants that may have due work
//	{webhookd:lanes}:wait         ZSET merchant → ms when its first parked work is due
//	{webhookd:lanes}:tick         counter of round-robin stamps
//	{webhookd:lanes}:m:M:ready    ZSET subscription → stamp: merchant M's subscriptions with due work
//	{webhookd:lanes}:m:M:wait     ZSET subscription → ms when it has due work again
//	{webhookd:lanes}:s:S          ZSET attempt id → due ms: the attempts parked for subscription S
//	                              (S/manual: its manual attempts, outside its rate limit)
//	{webhookd:lanes}:p:S          HASH attempt id → attempt task (JSON)
//	{webhookd:lanes}:r:S          HASH rate (deliveries/s), next (ms of the next turn)
//	{webhookd:lanes}:stats        HASH parked: how many attempts are parked in all
//	{webhookd:lanes}:taken        ZSET attempt id → ms taken: attempts taken lately, not yet leased perhaps
//
// Work is taken round-robin over merchants, then round-robin over the
// merchant's subscriptions, then in due order within a subscription: a
// merchant's backlog is one entry in the merchant ring however long it is.
//
//go:embed lanes.lua
var laneLibrary string

// The scripts: each is the library and a call of one of its functions,
// so that the layout's rules (refresh, promote) are written once.
var (
	pushScript  = redis.NewScript(laneLibrary + "\nreturn push()")
	takeScript  = redis.NewScript(laneLibrary + "\nreturn take()")
	dropScript  = redis.NewScript(laneLibrary + "\nreturn drop()")
	statsScript = redis.NewScript(laneLibrary + "\nreturn stats()")
)

// Lanes is the schedule of due and parked attempts in Redis, shared by
// every process: API processes push first and manual attempts, workers
// push retries and take what is due. Nothing in it is the only copy of
// anything: each attempt is a pending delivery in Postgres, and the
// sweeper pushes again what Redis lost.
type Lanes struct {
	redis redis.UniversalClient
}

// NewLanes returns the schedule kept on rdb.
func NewLanes(rdb redis.UniversalClient) *Lanes { return &Lanes{redis: rdb} }

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
// subscription, and wakes the workers. It returns how many were added (an
// id already parked is not).
func (l *Lanes) Push(ctx context.Context, items ...LaneItem) (int, error) {
	if len(items) == 0 {
		return 0, nil
	}
	args := make([]any, 0, 1+8*len(items))
	args = append(args, lanePrefix)
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
		args = append(args, MerchantLane(it.Task), subscriptionLane(it.Task), it.ID,
			strconv.FormatInt(it.Task.Due.UnixMilli(), 10), rate, payload, size, wait)
	}
	n, err := pushScript.Run(ctx, l.redis, []string{lanePrefix + ":ready"}, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("park %d attempts: %w", len(items), err)
	}
	return n, nil
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
}

// Taken is what one take handed over.
type Taken struct {
	// Items are the attempts taken.
	Items []LaneItem
	// Next is when the next parked attempt is due (zero: none is parked).
	Next time.Time
	// HeldBack tells that due work was left in the schedule (over a share,
	// a cap or the reserve): a slot that frees may take it. Without it,
	// only new work or Next can give a take anything.
	HeldBack bool
}

// Take takes up to req.Want due attempts, round-robin over merchants with
// due work: first those under their share, then, with slots to lend,
// those over it.
func (l *Lanes) Take(ctx context.Context, req TakeRequest, r Running) (Taken, error) {
	args := make([]any, 0, 16+2*len(r.Merchants)+2*len(r.SubscriptionRoom)+len(r.Unlendable))
	args = append(args, lanePrefix, req.Now.UnixMilli(), req.Want, req.Share, req.SubscriptionCap, req.Lendable,
		// Merchants scanned per pass: those running here (at their share,
		// or with every subscription at its cap) may sit at the ring's
		// head without being takeable, and a few more behind them.
		len(r.Merchants)+16, req.Held.Milliseconds(), len(r.Merchants))
	for m, n := range r.Merchants {
		args = append(args, m, n)
	}
	args = append(args, len(r.SubscriptionRoom))
	for s, n := range r.SubscriptionRoom {
		args = append(args, s, n)
	}
	args = append(args, len(r.Unlendable))
	for s := range r.Unlendable {
		args = append(args, s)
	}
	res, err := takeScript.Run(ctx, l.redis, []string{lanePrefix + ":ready"}, args...).Slice()
	if err != nil {
		return Taken{}, fmt.Errorf("take due attempts: %w", err)
	}
	if len(res) < 2 {
		return Taken{}, errors.New("take due attempts: short answer")
	}
	var out Taken
	if ms, _ := res[0].(int64); ms > 0 {
		out.Next = time.UnixMilli(ms)
	}
	more, _ := res[1].(int64)
	out.HeldBack = more == 1
	out.Items = takenUnits(res[2:])
	return out, nil
}

// Drop removes every attempt parked for a subscription (deleted,
// disabled, an ended listener), manual ones included, and returns how many
// there were.
func (l *Lanes) Drop(ctx context.Context, merchantID string, subscriptionID uuid.UUID) (int, error) {
	n, err := dropScript.Run(ctx, l.redis, []string{lanePrefix + ":ready"}, lanePrefix, merchantID,
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
		parked[i] = pipe.ZScore(ctx, lanePrefix+":s:"+subscriptionLane(it.Task), it.ID)
		taken[i] = pipe.ZScore(ctx, lanePrefix+":taken", it.ID)
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

// Stats reads the schedule's state in one script.
func (l *Lanes) Stats(ctx context.Context, now time.Time) (Stats, error) {
	v, err := statsScript.Run(ctx, l.redis, []string{lanePrefix + ":ready"}, lanePrefix, now.UnixMilli()).Int64Slice()
	if err != nil || len(v) != 4 {
		return Stats{}, fmt.Errorf("read the schedule's state: %w", cmp.Or(err, errors.New("unexpected answer")))
	}
	return Stats{Parked: v[0], MerchantsDue: v[1], MerchantsLater: v[2], OldestDue: time.Duration(v[3]) * time.Millisecond}, nil
}

// SetRate changes the deliveries per second a subscription's parked
// attempts are paced at (0: none).
func (l *Lanes) SetRate(ctx context.Context, subscriptionID uuid.UUID, perSecond int) error {
	err := l.redis.HSet(ctx, lanePrefix+":r:"+subscriptionID.String(), "rate", perSecond).Err()
	if err != nil {
		return fmt.Errorf("set the rate limit of subscription %s: %w", subscriptionID, err)
	}
	return nil
}
