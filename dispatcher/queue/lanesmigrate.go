package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// layoutKey remembers how many shards the schedule was last spread over,
// so that a process started with another count knows where the attempts
// parked under the old one are.
const layoutKey = "webhookd:schedule:shards"

// migrateBatch bounds the attempts one step of Migrate reads and moves.
const migrateBatch = 500

// Migrate moves into the schedule's shards the attempts parked under
// another layout: the one hash tag of the builds before the shards, and
// the shards of another shard count. Workers call it when they start, and
// any number may run it at once: a push of an id already parked adds
// nothing, and an attempt is removed from its old place only once parked
// in its new one. Nothing is lost if it stops half-way: the sweeper parks
// again any pending delivery the schedule does not hold. It returns how
// many attempts it moved.
func (l *Lanes) Migrate(ctx context.Context) (int, error) {
	sources := []string{legacyPrefix}
	if was, err := l.redis.Get(ctx, layoutKey).Int(); err == nil && was != len(l.prefixes) && was >= 1 && was <= MaxScheduleShards {
		// A shard of the old count may keep its name in the new one (its
		// tag's slot lies in both runs): its merchants now elsewhere move.
		sources = append(sources, shardPrefixes(was)...)
	} else if err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("read the schedule's layout: %w", err)
	}
	moved := 0
	for _, p := range sources {
		n, err := l.migrateFrom(ctx, p)
		moved += n
		if err != nil {
			return moved, err
		}
	}
	// A worker of the shard count a process started last with keeps it;
	// processes of two counts at once is a misconfiguration the docs warn
	// of, and the sweeper covers what it strands.
	if err := l.redis.Set(ctx, layoutKey, len(l.prefixes), 0).Err(); err != nil {
		return moved, fmt.Errorf("note the schedule's layout: %w", err)
	}
	return moved, nil
}

// migrateFrom moves every attempt parked under prefix p whose merchant
// lives in another shard now, then deletes what is left of p's keys when
// p is no shard of the current layout.
func (l *Lanes) migrateFrom(ctx context.Context, p string) (int, error) {
	merchants, err := l.members(ctx, p+":ready", p+":wait")
	if err != nil || len(merchants) == 0 {
		return 0, err
	}
	inUse := slices.Contains(l.prefixes, p)
	moved := 0
	for _, m := range merchants {
		if l.prefixOf(m) == p {
			continue // at home already
		}
		lanes, err := l.members(ctx, p+":m:"+m+":ready", p+":m:"+m+":wait")
		if err != nil {
			return moved, err
		}
		for _, lane := range lanes {
			n, err := l.migrateLane(ctx, p, lane)
			moved += n
			if err != nil {
				return moved, err
			}
		}
		if err := l.redis.Del(ctx, p+":m:"+m+":ready", p+":m:"+m+":wait").Err(); err != nil {
			return moved, fmt.Errorf("delete the old rings of merchant %s: %w", m, err)
		}
		if inUse {
			if err := l.redis.ZRem(ctx, p+":ready", m).Err(); err != nil {
				return moved, fmt.Errorf("take merchant %s out of shard %s: %w", m, p, err)
			}
			if err := l.redis.ZRem(ctx, p+":wait", m).Err(); err != nil {
				return moved, fmt.Errorf("take merchant %s out of shard %s: %w", m, p, err)
			}
		}
	}
	if inUse {
		return moved, nil
	}
	if err := l.redis.Del(ctx, p+":ready", p+":wait", p+":tick", p+":stats", p+":taken").Err(); err != nil {
		return moved, fmt.Errorf("delete the old schedule %s: %w", p, err)
	}
	return moved, nil
}

// members is the union of the members of sorted sets.
func (l *Lanes) members(ctx context.Context, keys ...string) ([]string, error) {
	var out []string
	for _, k := range keys {
		m, err := l.redis.ZRange(ctx, k, 0, -1).Result()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", k, err)
		}
		for _, v := range m {
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	return out, nil
}

// migrateLane moves the attempts parked in one old lane, a batch at a
// time, with its rate limit's next turn.
func (l *Lanes) migrateLane(ctx context.Context, p, lane string) (int, error) {
	zset, tasks, rate := p+":s:"+lane, p+":p:"+lane, p+":r:"+lane
	next, _ := l.redis.HGet(ctx, rate, "next").Int64()
	moved := 0
	for {
		parked, err := l.redis.ZRangeWithScores(ctx, zset, 0, migrateBatch-1).Result()
		if err != nil {
			return moved, fmt.Errorf("read old lane %s: %w", lane, err)
		}
		if len(parked) == 0 {
			break
		}
		ids := make([]string, len(parked))
		for i, z := range parked {
			ids[i], _ = z.Member.(string)
		}
		payloads, err := l.redis.HMGet(ctx, tasks, ids...).Result()
		if err != nil {
			return moved, fmt.Errorf("read old lane %s: %w", lane, err)
		}
		var items []LaneItem
		for i, v := range payloads {
			payload, _ := v.(string)
			var t Attempt
			if json.Unmarshal([]byte(payload), &t) != nil {
				continue // unreadable: the sweeper parks its delivery again
			}
			t.Due = time.UnixMilli(int64(parked[i].Score))
			items = append(items, LaneItem{ID: ids[i], Task: t})
		}
		if _, err := l.Push(ctx, items...); err != nil {
			return moved, err
		}
		if next > 0 && len(items) > 0 {
			// Its pacing goes on from the turn it had, not from now.
			if err := l.redis.HSet(ctx, l.prefixOf(MerchantLane(items[0].Task))+":r:"+subscriptionLane(items[0].Task),
				"next", strconv.FormatInt(next, 10)).Err(); err != nil {
				return moved, fmt.Errorf("carry the rate limit of lane %s: %w", lane, err)
			}
		}
		pipe := l.redis.TxPipeline()
		pipe.ZRem(ctx, zset, anys(ids)...)
		pipe.HDel(ctx, tasks, ids...)
		pipe.HIncrBy(ctx, p+":stats", "parked", -int64(len(ids)))
		if _, err := pipe.Exec(ctx); err != nil {
			return moved, fmt.Errorf("remove moved attempts from old lane %s: %w", lane, err)
		}
		moved += len(items)
	}
	if err := l.redis.Del(ctx, zset, tasks, rate).Err(); err != nil {
		return moved, fmt.Errorf("delete old lane %s: %w", lane, err)
	}
	return moved, nil
}

// anys is ids as ZRem takes them.
func anys(ids []string) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}
