package storetest

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterSlots is how many hash slots a Redis Cluster has.
const clusterSlots = 16384

// Cluster is a Redis Cluster of three masters on loopback ports, its 16384
// slots split between them, each master with a replica or none: the
// topology of redis-cluster:// URLs. A node that has not heard from
// another for two seconds judges it failing, so that a replica is
// promoted a few seconds after its master dies.
type Cluster struct {
	// Nodes are the three masters as started; after a failover a killed
	// one serves nothing (see Masters).
	Nodes []*Node
	// Replicas are the replicas as started, one of each master's in
	// NewReplicatedCluster, none in NewCluster.
	Replicas []*Node

	t testing.TB
}

// NewCluster starts a Cluster of three masters without replicas for the
// test and kills it when the test ends. It returns once every node says
// the Cluster is ok.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	return newCluster(t, 0)
}

// NewReplicatedCluster starts a Cluster of three masters, each with one
// replica, for the test and kills it when the test ends: the topology
// that survives the loss of a master (KillMaster). It returns once every
// node says the Cluster is ok and every replica is in sync with its
// master.
func NewReplicatedCluster(t testing.TB) *Cluster {
	t.Helper()
	return newCluster(t, 1)
}

// newCluster starts three masters and replicas replicas of each.
func newCluster(t testing.TB, replicas int) *Cluster {
	t.Helper()
	server := lookPath(t, "redis-server", "redis-server")
	cli := lookPath(t, "redis-cli", "redis-tools")
	dir := tempDir(t, "webhookd-cluster-")
	total := 3 * (1 + replicas)
	// Each node has a client port and a cluster bus port.
	ports := FreePorts(t, 2*total)
	var all []*Node
	for i := range total {
		name := nodeName("node", i)
		all = append(all, startNode(t, server, dir, name, ports[i],
			"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(ports[total+i]),
			"--cluster-config-file", name+".conf", "--cluster-node-timeout", "2000",
			"--save", "", "--appendonly", "no", "--maxmemory-policy", "noeviction"))
	}
	// redis-cli makes masters of the first three nodes it is given and
	// replicas of the others.
	args := []string{"--cluster", "create"}
	for _, n := range all {
		args = append(args, n.Addr)
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("storetest: redis-cli --cluster create: %v\n%s", err, out)
	}
	c := &Cluster{Nodes: all[:3], Replicas: all[3:], t: t}
	ctx := context.Background()
	for _, n := range all {
		rc := n.Client()
		waitFor(t, "cluster node "+n.Addr+" to say the cluster is ok", func() bool {
			s, err := rc.ClusterInfo(ctx).Result()
			return err == nil && infoField(s, "cluster_state") == "ok" && infoField(s, "cluster_known_nodes") == strconv.Itoa(total)
		})
		_ = rc.Close()
	}
	for _, n := range c.Replicas {
		rc := n.Client()
		waitFor(t, "replica "+n.Addr+" to sync with its master", func() bool {
			return info(ctx, rc, "replication", "master_link_status") == "up"
		})
		_ = rc.Close()
	}
	return c
}

// URL is the redis-cluster:// URL of the Cluster, naming every node,
// replicas too: a client that starts after a master died still finds the
// Cluster.
func (c *Cluster) URL() string {
	addrs := make([]string, 0, len(c.Nodes)+len(c.Replicas))
	for _, n := range append(append([]*Node{}, c.Nodes...), c.Replicas...) {
		addrs = append(addrs, n.Addr)
	}
	return "redis-cluster://" + strings.Join(addrs, ",")
}

// Masters are the live nodes that are masters now, those started as
// replicas included once promoted.
func (c *Cluster) Masters(ctx context.Context) []*Node {
	var out []*Node
	for _, n := range c.live(nil) {
		rc := n.Client()
		if info(ctx, rc, "replication", "role") == "master" {
			out = append(out, n)
		}
		_ = rc.Close()
	}
	return out
}

// MasterHolding is the master holding the most keys that match pattern
// (a SCAN MATCH pattern), nil when none holds one.
func (c *Cluster) MasterHolding(ctx context.Context, pattern string) (*Node, error) {
	var (
		best *Node
		most int
	)
	for _, n := range c.Masters(ctx) {
		rc := n.Client()
		keys, err := scanAll(ctx, rc, pattern)
		_ = rc.Close()
		if err != nil {
			return nil, fmt.Errorf("storetest: scan %s: %w", n.Addr, err)
		}
		if len(keys) > most {
			best, most = n, len(keys)
		}
	}
	return best, nil
}

// scanAll is every key of one node that matches pattern.
func scanAll(ctx context.Context, rc *redis.Client, pattern string) ([]string, error) {
	var (
		keys   []string
		cursor uint64
	)
	for {
		page, next, err := rc.Scan(ctx, cursor, pattern, 1000).Result()
		if err != nil {
			return nil, err
		}
		keys = append(keys, page...)
		if cursor = next; cursor == 0 {
			return keys, nil
		}
	}
}

// KillMaster kills master (SIGKILL), as a crash would, and waits until
// its replica is promoted: every surviving node says the Cluster is ok
// and tells every slot served by a live master. It returns when it saw
// the promotion (to within 10 ms), from which a test measures how soon
// its clients follow. It is meant once per master: a killed node stays
// down.
func (c *Cluster) KillMaster(master *Node) time.Time {
	c.t.Helper()
	master.Kill()
	return c.waitPromotion(master)
}

// HangMaster is KillMaster with the master hung (Node.Hang) instead of
// killed: clients' connections to it and new ones open, and wait.
func (c *Cluster) HangMaster(master *Node) time.Time {
	c.t.Helper()
	master.Hang()
	return c.waitPromotion(master)
}

// waitPromotion waits until the surviving nodes serve every slot without
// master and returns when it saw it.
func (c *Cluster) waitPromotion(master *Node) time.Time {
	c.t.Helper()
	ctx := context.Background()
	survivors := c.live(master)
	clients := make([]*redis.Client, len(survivors))
	for i, n := range survivors {
		clients[i] = n.Client()
		defer clients[i].Close()
	}
	waitFor(c.t, "a replica of "+master.Addr+" to be promoted", func() bool {
		for _, rc := range clients {
			if !servesAll(ctx, rc, master.Addr) {
				return false
			}
		}
		return true
	})
	return time.Now()
}

// servesAll reports whether the node rc reaches says the Cluster is ok
// and has every slot served by a master other than dead.
func servesAll(ctx context.Context, rc *redis.Client, dead string) bool {
	s, err := rc.ClusterInfo(ctx).Result()
	if err != nil || infoField(s, "cluster_state") != "ok" {
		return false
	}
	slots, err := rc.ClusterSlots(ctx).Result()
	if err != nil {
		return false
	}
	served := 0
	for _, r := range slots {
		if len(r.Nodes) == 0 || r.Nodes[0].Addr == dead {
			return false
		}
		served += int(r.End - r.Start + 1)
	}
	return served == clusterSlots
}

// live are the Cluster's nodes neither killed nor hung, but for except.
func (c *Cluster) live(except *Node) []*Node {
	var out []*Node
	for _, n := range append(append([]*Node{}, c.Nodes...), c.Replicas...) {
		if n != except && n.alive() {
			out = append(out, n)
		}
	}
	return out
}
