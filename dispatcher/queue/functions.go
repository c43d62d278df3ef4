package queue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// laneFunctions is the schedule's Redis function library (lanes.lua)
// under a name of its own content: builds whose library differs each call
// their own, side by side during a rolling upgrade, and never replace
// each other's.
//
// Functions rather than EVALSHA scripts: a Redis node counts FCALL apart
// from every other command (INFO commandstats, cmdstat_fcall), so what
// each node serves of the schedule is read there exactly; asynq's own
// scripts (EVALSHA) are not mixed in. Redis 7.0 or later.
type laneFunctions struct {
	// library is the code FUNCTION LOAD takes.
	library string
	// push, take, drop and stats are the functions' names.
	push, take, drop, stats string
}

// newLaneFunctions names the library of the source lanes.lua.
func newLaneFunctions(source string) laneFunctions {
	sum := sha256.Sum256([]byte(source))
	name := "webhookd_lanes_" + hex.EncodeToString(sum[:6])
	f := laneFunctions{push: name + "_push", take: name + "_take", drop: name + "_drop", stats: name + "_stats"}
	var b strings.Builder
	fmt.Fprintf(&b, "#!lua name=%s\n%s\n", name, source)
	for fn, method := range map[string]string{f.push: "push", f.take: "take", f.drop: "drop", f.stats: "stats"} {
		fmt.Fprintf(&b, "redis.register_function('%s', function(keys, args) return lanes(args).%s() end)\n", fn, method)
	}
	f.library = b.String()
	return f
}

// isFunctionMissing tells the error of an FCALL of a function the node
// has not loaded (a new or restarted node).
func isFunctionMissing(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Function not found")
}

// load loads the library on rdb's server, or on every master of a
// Cluster (a replica gets it from its master).
func (f laneFunctions) load(ctx context.Context, rdb redis.UniversalClient) error {
	if cluster, ok := rdb.(*redis.ClusterClient); ok {
		return cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return node.FunctionLoadReplace(ctx, f.library).Err()
		})
	}
	return rdb.FunctionLoadReplace(ctx, f.library).Err()
}

// call runs function fn with the shard's key and args, loading the
// library first where the node has not got it.
func (f laneFunctions) call(ctx context.Context, rdb redis.UniversalClient, fn, key string, args ...any) *redis.Cmd {
	cmd := rdb.FCall(ctx, fn, []string{key}, args...)
	if !isFunctionMissing(cmd.Err()) {
		return cmd
	}
	if err := f.load(ctx, rdb); err != nil {
		c := redis.NewCmd(ctx)
		c.SetErr(fmt.Errorf("load the schedule's functions: %w", err))
		return c
	}
	return rdb.FCall(ctx, fn, []string{key}, args...)
}
