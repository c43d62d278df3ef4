package storetest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SentinelMaster is the master name the Sentinels of NewSentinel watch.
const SentinelMaster = "webhookd"

// Sentinel is a Redis master, one replica and three Sentinels watching
// them, all on loopback ports: the highly available topology of
// redis-sentinel:// URLs. The Sentinels judge a master down after a second
// without answer and need two of them to agree, so that a test sees a
// failover within a few seconds.
type Sentinel struct {
	// Master and Replica are the servers as started; after a failover the
	// Replica is the master (see CurrentMaster).
	Master, Replica *Node
	// Sentinels are the three redis-sentinel processes.
	Sentinels []*Node

	t testing.TB
}

// NewSentinel starts the topology for the test and kills it when the test
// ends. It returns once the replica is in sync and every Sentinel knows the
// replica and the other Sentinels, so that a failover can happen.
func NewSentinel(t testing.TB) *Sentinel {
	t.Helper()
	server := lookPath(t, "redis-server", "redis-server")
	sentinel := lookPath(t, "redis-sentinel", "redis-sentinel")
	dir := tempDir(t, "webhookd-sentinel-")
	ports := FreePorts(t, 5)
	common := []string{"--save", "", "--appendonly", "no", "--maxmemory-policy", "noeviction"}
	s := &Sentinel{t: t}
	s.Master = startNode(t, server, dir, "master", ports[0], common...)
	s.Replica = startNode(t, server, dir, "replica", ports[1],
		append(common, "--replicaof", "127.0.0.1", strconv.Itoa(ports[0]))...)
	for i, port := range ports[2:] {
		conf := filepath.Join(dir, nodeName("sentinel", i)+".conf")
		// A Sentinel rewrites its configuration file: each has its own.
		body := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d 2\n"+
			"sentinel down-after-milliseconds %[1]s 1000\n"+
			"sentinel failover-timeout %[1]s 5000\n"+
			"sentinel parallel-syncs %[1]s 1\n", SentinelMaster, ports[0])
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		s.Sentinels = append(s.Sentinels, startNode(t, sentinel, dir, nodeName("sentinel", i), port, conf))
	}
	ctx := context.Background()
	replica := s.Replica.Client()
	defer replica.Close()
	waitFor(t, "the replica to sync with the master", func() bool {
		return info(ctx, replica, "replication", "master_link_status") == "up"
	})
	for _, n := range s.Sentinels {
		rc := n.Client()
		waitFor(t, "sentinel "+n.Addr+" to know the replica and the other sentinels", func() bool {
			replicas, err := rc.Do(ctx, "SENTINEL", "REPLICAS", SentinelMaster).Slice()
			if err != nil || len(replicas) < 1 {
				return false
			}
			others, err := rc.Do(ctx, "SENTINEL", "SENTINELS", SentinelMaster).Slice()
			return err == nil && len(others) >= 2
		})
		_ = rc.Close()
	}
	return s
}

// URL is the redis-sentinel:// URL of the topology.
func (s *Sentinel) URL() string {
	addrs := make([]string, len(s.Sentinels))
	for i, n := range s.Sentinels {
		addrs[i] = n.Addr
	}
	return "redis-sentinel://" + strings.Join(addrs, ",") + "/" + SentinelMaster
}

// CurrentMaster is the master's address as the first Sentinel that
// answers tells it, "" when none answers.
func (s *Sentinel) CurrentMaster(ctx context.Context) string {
	for _, n := range s.Sentinels {
		rc := n.Client()
		addr, err := rc.Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster).StringSlice()
		_ = rc.Close()
		if err == nil && len(addr) == 2 {
			return net.JoinHostPort(addr[0], addr[1])
		}
	}
	return ""
}

// KillMaster kills the master (SIGKILL) and waits until the Sentinels have
// promoted the replica and it accepts writes. It returns how long that
// took. It is meant once per topology: the killed master stays down.
func (s *Sentinel) KillMaster() time.Duration {
	s.t.Helper()
	ctx := context.Background()
	started := time.Now()
	s.Master.Kill()
	replica := s.Replica.Client()
	defer replica.Close()
	waitFor(s.t, "the sentinels to promote the replica "+s.Replica.Addr, func() bool {
		return s.CurrentMaster(ctx) == s.Replica.Addr && info(ctx, replica, "replication", "role") == "master"
	})
	return time.Since(started)
}
