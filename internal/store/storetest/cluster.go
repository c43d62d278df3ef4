package storetest

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// Cluster is a Redis Cluster of three masters (no replicas) on loopback
// ports, its 16384 slots split between them: the topology of
// redis-cluster:// URLs.
type Cluster struct {
	// Nodes are the three masters.
	Nodes []*Node
}

// NewCluster starts the Cluster for the test and kills it when the test
// ends. It returns once every node says the Cluster is ok.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	server := lookPath(t, "redis-server", "redis-server")
	cli := lookPath(t, "redis-cli", "redis-tools")
	dir := tempDir(t, "webhookd-cluster-")
	// Each node has a client port and a cluster bus port.
	ports := freePorts(t, 6)
	c := &Cluster{}
	for i := range 3 {
		name := nodeName("node", i)
		c.Nodes = append(c.Nodes, startNode(t, server, dir, name, ports[i],
			"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(ports[3+i]),
			"--cluster-config-file", name+".conf", "--cluster-node-timeout", "2000",
			"--save", "", "--appendonly", "no", "--maxmemory-policy", "noeviction"))
	}
	args := []string{"--cluster", "create"}
	for _, n := range c.Nodes {
		args = append(args, n.Addr)
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("storetest: redis-cli --cluster create: %v\n%s", err, out)
	}
	ctx := context.Background()
	for _, n := range c.Nodes {
		rc := n.Client()
		waitFor(t, "cluster node "+n.Addr+" to say the cluster is ok", func() bool {
			s, err := rc.ClusterInfo(ctx).Result()
			return err == nil && infoField(s, "cluster_state") == "ok" && infoField(s, "cluster_known_nodes") == "3"
		})
		_ = rc.Close()
	}
	return c
}

// URL is the redis-cluster:// URL of the Cluster, naming every node.
func (c *Cluster) URL() string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr
	}
	return "redis-cluster://" + strings.Join(addrs, ",")
}
