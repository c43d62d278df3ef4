// Package delivertest keeps tests of the delivery path on this machine:
// a dialer confined to loopback whatever the address check under test
// lets through.
package delivertest

import (
	"errors"
	"net"
	"net/netip"
	"syscall"
	"testing"
)

// ErrOffMachine is what a confined dialer answers for an address the
// address check let through outside loopback.
var ErrOffMachine = errors.New("test refuses to connect outside loopback")

// Confine puts a loopback-only check behind dialer's own: a test must
// never reach another network, even while the check it tests is broken
// (this machine has no route that tests may use but loopback). An address
// the real check allowed outside loopback fails the test and is refused.
func Confine(t testing.TB, dialer *net.Dialer) *net.Dialer {
	check := dialer.Control
	dialer.Control = func(network, address string, c syscall.RawConn) error {
		if check != nil {
			if err := check(network, address, c); err != nil {
				return err
			}
		}
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !ap.Addr().Unmap().IsLoopback() {
			t.Errorf("the address check let %s %s through", network, address)
			return ErrOffMachine
		}
		return nil
	}
	return dialer
}
