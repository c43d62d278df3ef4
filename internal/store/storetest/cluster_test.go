package storetest_test

import (
	"context"
	"fmt"
	"testing"

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
