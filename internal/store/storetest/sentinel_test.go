package storetest_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/store/storetest"
)

// A failover client on the Sentinels writes to the master, and after the
// master is killed, to the promoted replica, which kept what was written.
func TestSentinelFailover(t *testing.T) {
	storetest.FullLane(t, "Redis Sentinel failover")
	ctx := context.Background()
	s := storetest.NewSentinel(t)
	if got := s.CurrentMaster(ctx); got != s.Master.Addr {
		t.Fatalf("master %q, want %q", got, s.Master.Addr)
	}
	addrs := make([]string, len(s.Sentinels))
	for i, n := range s.Sentinels {
		addrs[i] = n.Addr
	}
	rc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: storetest.SentinelMaster, SentinelAddrs: addrs})
	defer rc.Close()
	if err := rc.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// WAIT: the replica holds the write before the master dies.
	if n, err := rc.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT = %d, %v", n, err)
	}
	took := s.KillMaster()
	t.Logf("failover took %s", took)
	if got := s.CurrentMaster(ctx); got != s.Replica.Addr {
		t.Fatalf("master after failover %q, want %q", got, s.Replica.Addr)
	}
	if err := rc.Set(ctx, "after", "1", 0).Err(); err != nil {
		t.Fatalf("write after failover: %v", err)
	}
	if v, err := rc.Get(ctx, "before").Result(); err != nil || v != "1" {
		t.Fatalf("the replicated key after failover: %q, %v", v, err)
	}
}
