package storetest

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// FreePorts reserves n distinct free TCP ports on 127.0.0.1 for servers a
// test runs (a Postgres, a Redis, a broker, the engine's own processes).
// They are below the kernel's ephemeral range: a port the kernel hands out
// for :0 is free again once the probe closes, and the engines, receivers
// and clients of the tests around make thousands of outbound connections,
// any of which may take it as its source port before the server binds it,
// or while a server the test restarts is down (CI runs failed so: "bind:
// address already in use", and a restarted broker that never listened
// again). Below the range only another listener can take one.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	first := ephemeralFirst()
	ports := make([]int, 0, n)
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	for try := 0; len(ports) < n; try++ {
		if try == 200*n {
			t.Fatalf("storetest: no %d free ports in [%d, %d)", n, lowestTestPort, first)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(lowestTestPort+rand.IntN(first-lowestTestPort))))
		if err != nil {
			continue // taken: another
		}
		held = append(held, l) // held until all are chosen: distinct
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// FreePort is FreePorts for one port.
func FreePort(t testing.TB) int {
	t.Helper()
	return FreePorts(t, 1)[0]
}

// FreeAddr is a FreePort as a 127.0.0.1 address to listen on.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t)))
}

// lowestTestPort is the lowest port FreePorts hands out: above the
// well-known and registered ports the machine's services listen on.
const lowestTestPort = 10000

// ephemeralFirst is the first port of the kernel's ephemeral range: 32768,
// Linux's default, when it cannot be read or leaves too few ports below.
func ephemeralFirst() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 32768
	}
	first, err := strconv.Atoi(fields[0])
	if err != nil || first < lowestTestPort+1000 {
		return 32768
	}
	return first
}

// PortHold keeps a TCP port on 127.0.0.1 bound while the server a test
// stopped is down, so that no other test's FreePorts can hand it out and
// bind it before the server starts again on it (a CI run lost a restarted
// Postgres so: "could not create listen socket"). The socket is bound
// without SO_REUSEADDR, which makes every other bind of the port fail, and
// never listens: a client connecting meanwhile is refused, as it is by a
// server that is down.
type PortHold struct {
	mu sync.Mutex
	fd int // the bound socket; 0 when not held (0 is standard input, never ours)
}

// Hold binds port, unless the hold already has it. A failure (something
// else took the port first) leaves it unheld: the restart will then say
// what holds it.
func (h *PortHold) Hold(port int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fd > 0 {
		return
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		_ = syscall.Close(fd)
		return
	}
	h.fd = fd
}

// Release frees the port for the server that is about to bind it again.
func (h *PortHold) Release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fd > 0 {
		_ = syscall.Close(h.fd)
	}
	h.fd = 0
}
