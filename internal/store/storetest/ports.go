package storetest

import (
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// FreePorts reserves n distinct free TCP ports on 127.0.0.1 for servers a
// test runs (a Postgres, a Redis, a broker, the engine's own processes),
// for as long as the test runs.
//
// They are below the kernel's ephemeral range: a port the kernel hands out
// for :0 is free again once the probe closes, and the engines, receivers
// and clients of the tests around make thousands of outbound connections,
// any of which may take it as its source port before the server binds it,
// or while a server the test restarts is down (CI runs failed so: "bind:
// address already in use", and a restarted broker that never listened
// again). Below the range only another listener can take one, and the
// listeners there are other tests' servers: each port handed out is also
// reserved, across every test process of the machine, by a lock on a file
// named after it (reservePort), which the test holds until it ends. So a
// port whose server is down, or not yet started, is never handed to
// another test (a CI run lost a restarted Postgres to one that was:
// "could not create listen socket").
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
		port := lowestTestPort + rand.IntN(first-lowestTestPort)
		release, ok := reservePort(port)
		if !ok {
			continue // another test's
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			release()
			continue // taken by a listener that reserved nothing
		}
		t.Cleanup(release)     // registered before the server's own stop: runs after it
		held = append(held, l) // held until all are chosen: distinct
		ports = append(ports, port)
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

// reservePort takes the machine-wide reservation of port: an exclusive,
// non-blocking lock on a file named after it in a directory every test
// process shares. The lock belongs to the open file, so it conflicts with
// any other open of the file, in this process or another, and the kernel
// lets it go when the process ends, however it ends: no reservation
// outlives a killed test binary. release lets it go earlier.
func reservePort(port int) (release func(), ok bool) {
	dir := filepath.Join(os.TempDir(), "webhookd-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return func() {}, true // no directory to share: the listen probe alone
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return func() {}, true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, false
	}
	return func() { _ = f.Close() }, true
}
