package storetest

import (
	"net"
	"strconv"
	"testing"
)

// TestFreePortsStayReserved: a port FreePorts hands out is reserved for
// the test that asked until it ends, whether or not a server listens on
// it (one the test stopped to restart), and free again after.
func TestFreePortsStayReserved(t *testing.T) {
	var ports []int
	t.Run("a test holding three ports", func(t *testing.T) {
		ports = FreePorts(t, 3)
		for _, port := range ports {
			if release, ok := reservePort(port); ok {
				release()
				t.Errorf("port %d, handed out, could be reserved again", port)
			}
			// Nothing listens on it, yet it is not for another test.
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err != nil {
				t.Fatalf("port %d handed out but not free to listen on: %v", port, err)
			}
			l.Close()
		}
	})
	for _, port := range ports {
		release, ok := reservePort(port)
		if !ok {
			t.Errorf("port %d still reserved after its test ended", port)
			continue
		}
		release()
	}
}
