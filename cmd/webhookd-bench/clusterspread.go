package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"
)

// scheduleCommand is the INFO commandstats entry of the engine's schedule:
// every push, take, drop and stats is an FCALL of its function library,
// and nothing else of the engine's or asynq's is.
const scheduleCommand = "cmdstat_fcall"

// masterScheduleCalls reads, on a Redis Cluster, how many calls of the
// schedule's functions each master has served (INFO commandstats), by
// address; nil on a single server.
func masterScheduleCalls(ctx context.Context, rdb redis.UniversalClient) (map[string]int64, error) {
	cluster, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return nil, nil
	}
	var mu sync.Mutex
	out := map[string]int64{}
	err := cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		text, err := node.Info(ctx, "commandstats").Result()
		if err != nil {
			return fmt.Errorf("INFO commandstats of %s: %w", node.Options().Addr, err)
		}
		calls := commandCalls(text, scheduleCommand)
		mu.Lock()
		out[node.Options().Addr] = calls
		mu.Unlock()
		return nil
	})
	return out, err
}

// reportMasterSpread adds each master's schedule calls between two
// readings of masterScheduleCalls, and how far the busiest is above the least
// busy: the schedule spread over the Cluster's masters keeps it within
// 25 %.
func reportMasterSpread(r *report, before, after map[string]int64) {
	if len(after) == 0 {
		return
	}
	var calls []int64
	for _, addr := range slices.Sorted(maps.Keys(after)) {
		n := after[addr] - before[addr]
		calls = append(calls, n)
		r.add("redis_master_"+addr+"_schedule_calls", n, "calls")
	}
	least, most := slices.Min(calls), slices.Max(calls)
	if least <= 0 {
		r.note("a master served no call of the schedule: it is not spread")
		return
	}
	spread := 100 * float64(most-least) / float64(least)
	r.addTarget("redis_masters_schedule_calls_spread", spread, "%", "<= 25", spread <= 25)
	r.note("schedule calls per master from INFO commandstats (%s), %d masters", scheduleCommand, len(calls))
}

// masterScheduleCalls reads masterScheduleCalls on the engine's Redis, nil without
// one or on a single server; a failed read is logged and left out.
func (l *lab) masterScheduleCalls(ctx context.Context) map[string]int64 {
	if l.meter == nil || l.meter.rdb == nil {
		return nil
	}
	calls, err := masterScheduleCalls(ctx, l.meter.rdb)
	if err != nil {
		l.logf("schedule calls per master: %v", err)
		return nil
	}
	return calls
}
