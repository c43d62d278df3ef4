package storetest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Node is one redis-server or redis-sentinel process of a test topology,
// listening on a loopback TCP port (Sentinel and Cluster announce
// addresses, which a unix socket is not).
type Node struct {
	// Addr is host:port on 127.0.0.1.
	Addr string

	mu   sync.Mutex
	cmd  *exec.Cmd
	log  string
	hung bool
}

// Hang stops the process (SIGSTOP) without killing it, as a machine that
// stops answering would: its port still takes connections (the kernel
// completes them), but nothing answers on them. Kill still ends it.
func (n *Node) Hang() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGSTOP)
	n.hung = true
}

// Kill sends the process SIGKILL, as a crash would, and waits for it.
// Killing a node twice does nothing.
func (n *Node) Kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Kill()
	_ = n.cmd.Wait()
	n.cmd = nil
}

// alive reports whether the node was neither killed nor hung.
func (n *Node) alive() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil && !n.hung
}

// CommandCalls is how many times the node ran each command since it
// started, by lower-case name (evalsha, fcall, zadd…), from INFO
// commandstats: what a test reads to see which node its commands reached.
func (n *Node) CommandCalls(ctx context.Context) (map[string]int64, error) {
	rc := n.Client()
	defer rc.Close()
	calls, err := CommandCalls(ctx, rc)
	if err != nil {
		return nil, fmt.Errorf("storetest: node %s: %w", n.Addr, err)
	}
	return calls, nil
}

// CommandCalls is how many times the server rc reaches ran each command
// since it started or its statistics were reset, by lower-case name
// (evalsha, fcall, zadd…), from INFO commandstats; the commands a script
// or function runs count under their own names beside its EVALSHA or
// FCALL.
func CommandCalls(ctx context.Context, rc redis.Cmdable) (map[string]int64, error) {
	s, err := rc.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, fmt.Errorf("storetest: INFO commandstats: %w", err)
	}
	calls := map[string]int64{}
	for _, line := range strings.Split(s, "\n") {
		// cmdstat_evalsha:calls=3,usec=120,usec_per_call=40.00,…
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		for _, kv := range strings.Split(stats, ",") {
			if v, found := strings.CutPrefix(kv, "calls="); found {
				if calls[name], err = strconv.ParseInt(v, 10, 64); err != nil {
					return nil, fmt.Errorf("storetest: INFO commandstats: %q: %w", line, err)
				}
			}
		}
	}
	return calls, nil
}

// Client is a go-redis client on this node alone; the test closes it.
func (n *Node) Client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1, DialTimeout: time.Second})
}

// startNode runs bin with args (after --port and --bind, which it adds)
// in dir, waits until the node answers PING, and kills it when the test
// ends. Its output goes to a log file in dir, which a failing test's
// message names.
func startNode(t testing.TB, bin, dir, name string, port int, args ...string) *Node {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	all := append([]string{}, args...)
	all = append(all, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir)
	cmd := exec.Command(bin, all...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("storetest: start %s: %v", bin, err)
	}
	n := &Node{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, log: logPath}
	t.Cleanup(n.Kill)
	rc := n.Client()
	defer rc.Close()
	waitFor(t, name+" on "+n.Addr+" to answer (log "+logPath+")", func() bool {
		return rc.Ping(context.Background()).Err() == nil
	})
	return n
}

// lookPath finds a binary of a Debian package, failing the test (never
// skipping it) when it is missing.
func lookPath(t testing.TB, bin, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(bin)
	if err != nil {
		t.Fatalf("storetest: %s not found on PATH (install the %s package; .ci/services.sh does): %v", bin, pkg, err)
	}
	return p
}

// tempDir is a directory removed when the test ends, shorter than
// t.TempDir's, whose paths a unix socket could not hold.
func tempDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// info reads one field of INFO section from a node, "" when it cannot.
func info(ctx context.Context, rc *redis.Client, section, field string) string {
	s, err := rc.Info(ctx, section).Result()
	if err != nil {
		return ""
	}
	return infoField(s, field)
}

// infoField is field's value in the text of an INFO reply.
func infoField(s, field string) string {
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == field {
			return v
		}
	}
	return ""
}

// nodeName names the i-th node of a kind in logs.
func nodeName(kind string, i int) string { return fmt.Sprintf("%s-%d", kind, i) }
