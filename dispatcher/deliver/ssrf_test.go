package deliver

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"code.dny.dev/ssrf"

	"github.com/webhookd/webhookd/dispatcher/internal/metrics"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/testfixtures/delivertest"
)

// guardedConfig is a delivery configuration with the address check on.
func guardedConfig() SenderConfig {
	return SenderConfig{Timeout: 2 * time.Second, AllowHTTP: true, MaxConns: 4, MaxConnsPerHost: 1, Version: "test"}
}

// TestAddressCheckRefusesSpecialUseRanges dials one address of every
// range a payments engine must never reach and expects the address check,
// not anything after it, to refuse the connection before it is made.
func TestAddressCheckRefusesSpecialUseRanges(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		addrs []string
	}{
		{"loopback", []string{"127.0.0.1", "127.255.255.254", "::1"}},
		{"private (RFC 1918)", []string{"10.0.0.1", "10.255.255.254", "172.16.0.1", "172.31.255.254", "192.168.0.1"}},
		{"unique local (fc00::/7)", []string{"fc00::1", "fd12:3456:789a::1"}},
		{"link-local", []string{"169.254.169.254", "169.254.0.1", "fe80::1", "febf::1"}},
		{"shared address space (CGNAT)", []string{"100.64.0.1", "100.127.255.254"}},
		{"IPv4-mapped IPv6", []string{"::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::ffff:192.168.1.1"}},
		{"IPv4-compatible IPv6", []string{"::127.0.0.1", "::a00:1"}},
		{"unspecified and this network", []string{"0.0.0.0", "0.1.2.3", "::"}},
		{"multicast", []string{"224.0.0.1", "239.255.255.250", "ff02::1", "ff05::1:3"}},
		{"limited broadcast and reserved (240.0.0.0/4)", []string{"255.255.255.255", "240.0.0.1"}},
		{"IETF protocol assignments (192.0.0.0/24)", []string{"192.0.0.1", "192.0.0.170"}},
		{"benchmarking (198.18.0.0/15)", []string{"198.18.0.1", "198.19.255.254"}},
		{"documentation", []string{"192.0.2.1", "198.51.100.1", "203.0.113.1", "2001:db8::1", "3fff::1"}},
		{"6to4 relay anycast and AS112", []string{"192.88.99.1", "192.31.196.1", "192.175.48.1"}},
		{"NAT64 wrapping a private or loopback IPv4", []string{"64:ff9b::a00:1", "64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b:1::a00:1"}},
		{"6to4 wrapping a private or loopback IPv4", []string{"2002:a00:1::1", "2002:7f00:1::1", "2002:c0a8:101::1"}},
		{"Teredo and other IETF assignments (2001::/23)", []string{"2001::1", "2001:0:a00:1::1"}},
		{"discard-only (100::/64)", []string{"100::1"}},
	}
	dialer := delivertest.Confine(t, NewDialer(guardedConfig()))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, a := range tc.addrs {
				// A port receivers use: the check is on the address, not on
				// 80 and 443.
				conn, err := dialer.DialContext(context.Background(), "tcp", net.JoinHostPort(a, "8443"))
				if err == nil {
					conn.Close()
				}
				if !errors.Is(err, ssrf.ErrProhibitedIP) {
					t.Errorf("dial %s: %v, want the address check to refuse it", a, err)
					continue
				}
				if _, code := classify(context.Background(), err); code != errTargetBlocked {
					t.Errorf("dial %s: error %q, want %s", a, code, errTargetBlocked)
				}
			}
		})
	}
}

// TestAddressCheckAllowsPublicAddresses keeps the check from refusing
// merchants' real receivers on any port. It calls the check alone: no
// connection leaves this machine.
func TestAddressCheckAllowsPublicAddresses(t *testing.T) {
	t.Parallel()
	check := NewDialer(guardedConfig()).Control
	if check == nil {
		t.Fatal("no address check with private targets not allowed")
	}
	cases := []struct{ network, address string }{
		{"tcp4", "1.1.1.1:443"},
		{"tcp4", "8.8.8.8:8443"},
		{"tcp4", "100.63.255.255:443"},  // just below CGNAT
		{"tcp4", "100.128.0.1:443"},     // just above CGNAT
		{"tcp4", "172.15.255.255:443"},  // just below 172.16.0.0/12
		{"tcp4", "172.32.0.1:443"},      // just above it
		{"tcp4", "223.255.255.254:443"}, // just below multicast
		{"tcp6", "[2606:4700:4700::1111]:443"},
		{"tcp6", "[2a00:1450:4001::200e]:9000"},
	}
	for _, tc := range cases {
		if err := check(tc.network, tc.address, nil); err != nil {
			t.Errorf("check(%s %s) = %v, want allowed", tc.network, tc.address, err)
		}
	}
	if allowed := NewDialer(SenderConfig{AllowPrivate: true}).Control; allowed != nil {
		t.Error("the address check is on although private targets are allowed")
	}
}

// TestSendMapsAGuardRefusalToTargetBlocked follows a refused dial through
// send: an attempt with no HTTP status and error target_blocked.
func TestSendMapsAGuardRefusalToTargetBlocked(t *testing.T) {
	t.Parallel()
	snd, err := NewSender(guardedConfig(), clock.System{}, delivertest.Confine(t, NewDialer(guardedConfig())))
	if err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{"http://127.0.0.1:9/hook", "http://[::ffff:10.0.0.1]:8443/", "http://[fd00::1]/"} {
		res := sendPlain(t, snd, url)
		code := ""
		if res.ErrCode != nil {
			code = *res.ErrCode
		}
		if code != errTargetBlocked || res.outcome != metrics.OutcomeBlocked || res.HTTPStatus != nil {
			t.Errorf("send(%s) = error %q outcome %s http %v, want %s, blocked, none", url, code, res.outcome,
				res.HTTPStatus, errTargetBlocked)
		}
	}
}
