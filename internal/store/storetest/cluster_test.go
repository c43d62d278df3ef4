package storetest_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/store/storetest"
)

// The Cluster serves every slot: keys written through a cluster client
// land on all three masters, and a multi-key command across slots is
// refused while one within a hash tag works.
func TestClusterSlots(t *testing.T) {
	storetest.FullLane(t, "a Redis Cluster")
	ctx := context.Background()
	c := storetest.NewCluster(t)
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr
	}
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer rc.Close()
	for i := range 100 {
		if err := rc.Set(ctx, fmt.Sprintf("k%d", i), "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range c.Nodes {
		node := n.Client()
		size, err := node.DBSize(ctx).Result()
		_ = node.Close()
		if err != nil || size == 0 {
			t.Errorf("node %s holds %d keys (%v), want some", n.Addr, size, err)
		}
	}
	if err := rc.Do(ctx, "MSET", "a", "1", "b", "2").Err(); err == nil {
		t.Error("MSET across slots was accepted")
	}
	if err := rc.Do(ctx, "MSET", "{t}a", "1", "{t}b", "2").Err(); err != nil {
		t.Errorf("MSET within one hash tag: %v", err)
	}
}

// A replicated Cluster survives the loss of a master: KillMaster returns
// once the master's replica serves its slots, the keys written before
// are there (replicated before the kill), and INFO commandstats counts
// the commands each master ran.
func TestReplicatedClusterFailover(t *testing.T) {
	storetest.FullLane(t, "a Redis Cluster with replicas")
	ctx := context.Background()
	c := storetest.NewReplicatedCluster(t)
	if len(c.Nodes) != 3 || len(c.Replicas) != 3 || len(c.Masters(ctx)) != 3 {
		t.Fatalf("%d masters, %d replicas, %d masters now; want 3, 3, 3", len(c.Nodes), len(c.Replicas), len(c.Masters(ctx)))
	}
	conn, err := redis.ParseClusterURL("redis://" + c.Nodes[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClusterClient(conn)
	defer rc.Close()
	if err := rc.Set(ctx, "{failover}key", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := rc.Eval(ctx, "return redis.call('INCR', KEYS[1])", []string{"{failover}n"}).Err(); err != nil {
			t.Fatalf("EVAL %d: %v", i, err)
		}
	}
	master, err := c.MasterHolding(ctx, "{failover}*")
	if err != nil || master == nil {
		t.Fatalf("no master holds {failover}* (%v)", err)
	}
	calls, err := master.CommandCalls(ctx)
	if err != nil || calls["eval"] != 5 {
		t.Fatalf("the master ran eval %d times (%v), want 5", calls["eval"], err)
	}
	// The replica applies what its master wrote: wait until it has it,
	// as WAIT does, so that the kill loses nothing.
	if n, err := rc.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT = %d, %v: the replica did not acknowledge", n, err)
	}
	killed := time.Now()
	promoted := c.KillMaster(master)
	t.Logf("replica promoted %s after its master was killed", promoted.Sub(killed).Round(time.Millisecond))
	masters := c.Masters(ctx)
	if len(masters) != 3 || slices.Contains(masters, master) {
		t.Fatalf("masters after the failover: %d, the killed one among them %v", len(masters), slices.Contains(masters, master))
	}
	now, err := c.MasterHolding(ctx, "{failover}*")
	if err != nil || now == nil || now == master {
		t.Fatalf("after the failover {failover}* is on %v (%v), want the promoted replica", now, err)
	}
	fresh := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{now.Addr}})
	defer fresh.Close()
	if v, err := fresh.Get(ctx, "{failover}key").Result(); err != nil || v != "v" {
		t.Fatalf("GET on the promoted replica = %q, %v", v, err)
	}
}
