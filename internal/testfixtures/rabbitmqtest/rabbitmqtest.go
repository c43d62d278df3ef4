// Package rabbitmqtest runs a private RabbitMQ node for a test that stops
// and restarts its broker: a rabbitmq-server process of the test's own, on
// its own ports and data directory, so that restarting it interrupts no
// other test using the machine's shared broker (127.0.0.1:5672). Its data
// directory outlives a restart, as a real broker's disk does: durable
// queues and the persistent messages they hold come back with it.
package rabbitmqtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/webhookd/webhookd/internal/store/storetest"
)

// startTimeout bounds one start of the node: an Erlang VM boots in about
// six seconds on an idle machine and took 43 s in a loaded CI run.
const startTimeout = 120 * time.Second

// stopTimeout bounds a graceful stop before the node is killed.
const stopTimeout = 30 * time.Second

// serverBinaries are where rabbitmq-server is looked for: Debian's script
// that runs the node as the calling user first (the one on PATH, as root,
// hands the node to the rabbitmq user, who cannot write the test's
// directory).
var serverBinaries = []string{"/usr/lib/rabbitmq/bin/rabbitmq-server", "rabbitmq-server"}

// Node is a private RabbitMQ node on 127.0.0.1, user guest/guest.
type Node struct {
	// Port is the AMQP port.
	Port int

	t   testing.TB
	bin string
	dir string
	env []string

	mu  sync.Mutex
	cmd *exec.Cmd
	// waited gives the running node's exit, once.
	waited <-chan error
	// begun is when the last start began.
	begun time.Time
}

// Start runs a node and waits until it takes AMQP connections; the test's
// end stops it and removes its directory. A missing rabbitmq-server fails
// the test (Debian's rabbitmq-server package; .ci/services.sh installs
// it).
func Start(t testing.TB) *Node {
	t.Helper()
	n := Launch(t)
	n.WaitReady()
	return n
}

// Launch runs a node without waiting for it, so that a test can do other
// work (build a binary) while the Erlang VM boots; WaitReady waits.
func Launch(t testing.TB) *Node {
	t.Helper()
	bin := ""
	for _, b := range serverBinaries {
		if p, err := exec.LookPath(b); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Fatalf("rabbitmqtest: rabbitmq-server not found (install Debian's rabbitmq-server package; .ci/services.sh does)")
	}
	dir, err := os.MkdirTemp("", "webhookd-rabbitmq-")
	if err != nil {
		t.Fatal(err)
	}
	ports := storetest.FreePorts(t, 2)
	n := &Node{Port: ports[0], t: t, bin: bin, dir: dir}
	conf := filepath.Join(dir, "rabbitmq.conf")
	// Its own listener only: the machine's rabbitmq.conf names 5672.
	if err := os.WriteFile(conf, []byte("listeners.tcp.default = 127.0.0.1:"+strconv.Itoa(n.Port)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	envFile := filepath.Join(dir, "rabbitmq-env.conf")
	// An empty env file: the machine's could name the shared node.
	if err := os.WriteFile(envFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	n.env = append(os.Environ(),
		"RABBITMQ_CONF_ENV_FILE="+envFile,
		"RABBITMQ_CONFIG_FILE="+conf,
		"RABBITMQ_NODENAME=webhookd-test-"+strconv.Itoa(n.Port)+"@localhost",
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT="+strconv.Itoa(n.Port),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(ports[1]),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(dir, "log"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(dir, "enabled_plugins"),
		"RABBITMQ_ENABLED_PLUGINS=",
		"ERL_EPMD_ADDRESS=127.0.0.1",
		"ERL_FLAGS=-kernel inet_dist_use_interface {127,0,0,1}",
	)
	t.Cleanup(func() {
		n.stop()
		_ = os.RemoveAll(dir)
	})
	n.launch()
	return n
}

// URL is the node's AMQP URL, as guest.
func (n *Node) URL() string { return fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", n.Port) }

// Start starts the node again after Stop, on the same port and data, and
// waits until it takes AMQP connections. Starting a running node only
// waits.
func (n *Node) Start() {
	n.t.Helper()
	n.launch()
	n.WaitReady()
}

// launch runs rabbitmq-server unless it runs.
func (n *Node) launch() {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return
	}
	n.begun = time.Now()
	logFile, err := os.OpenFile(filepath.Join(n.dir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		n.t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(n.bin)
	cmd.Dir, cmd.Env = n.dir, n.env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group: the script and the Erlang VM it starts are
	// stopped together.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		n.t.Fatalf("rabbitmqtest: start %s: %v", n.bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	n.cmd, n.waited = cmd, exited
}

// WaitReady waits until the launched node takes AMQP connections, and
// logs how long its start took.
func (n *Node) WaitReady() {
	n.t.Helper()
	n.mu.Lock()
	cmd, exited, begun := n.cmd, n.waited, n.begun
	n.mu.Unlock()
	if cmd == nil {
		n.t.Fatal("rabbitmqtest: WaitReady on a node that was not started")
	}
	deadline := begun.Add(startTimeout)
	for {
		conn, err := amqp.DialConfig(n.URL(), amqp.Config{Dial: amqp.DefaultDial(time.Second)})
		if err == nil {
			_ = conn.Close()
			break
		}
		select {
		case werr := <-exited:
			n.mu.Lock()
			n.cmd = nil
			n.mu.Unlock()
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			n.t.Fatalf("rabbitmqtest: rabbitmq-server exited (%v) before taking connections; its logs end:\n%s", werr, n.logTail())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("rabbitmqtest: no AMQP connection to 127.0.0.1:%d within %s (%v); its logs end:\n%s", n.Port, startTimeout, err, n.logTail())
		}
	}
	n.t.Logf("rabbitmqtest: node on 127.0.0.1:%d took AMQP connections %s after its start", n.Port, time.Since(begun).Round(time.Millisecond))
}

// logTail is the end of the node's output and of its own log files, for
// a failed start's message: the test's directory is removed when it ends,
// and a CI run keeps only the test's output.
func (n *Node) logTail() string {
	files, _ := filepath.Glob(filepath.Join(n.dir, "log", "*.log"))
	var b strings.Builder
	for _, f := range append([]string{filepath.Join(n.dir, "server.log")}, files...) {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		fmt.Fprintf(&b, "==> %s <==\n%s\n", filepath.Base(f), strings.Join(lines[max(0, len(lines)-logTailLines):], "\n"))
	}
	return b.String()
}

// logTailLines is how many last lines of each log logTail shows.
const logTailLines = 25

// Stop stops the node as an operator's restart does (SIGTERM: it closes
// its connections and writes its queues to disk) and waits until it has
// exited; after stopTimeout it is killed and the test fails.
func (n *Node) Stop() {
	n.t.Helper()
	if !n.stop() {
		n.t.Errorf("rabbitmqtest: the node did not stop within %s of SIGTERM; killed", stopTimeout)
	}
}

// stop sends SIGTERM, waits, and kills the node after stopTimeout; it
// reports whether the node stopped by itself.
func (n *Node) stop() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return true
	}
	pgid := n.cmd.Process.Pid
	n.cmd = nil
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-n.waited:
		return true
	case <-time.After(stopTimeout):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-n.waited
		return false
	}
}
