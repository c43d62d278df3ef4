package deliver

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// errProxyRefused reports an egress proxy that answered a CONNECT with
// anything but 200: its policy refused the target, or it could not reach it.
var errProxyRefused = errors.New("egress proxy refused the tunnel")

// egressDialer opens every delivery connection as a tunnel through an HTTP
// CONNECT proxy (WEBHOOKD_EGRESS_PROXY) without giving up the address
// check: it resolves the target itself, checks every address as the direct
// dialer does, and asks the proxy for the checked address, never for the
// name, so that the proxy cannot resolve it again to somewhere else (DNS
// rebinding between the two lookups). TLS and the Host header are the
// transport's, on the tunnel: they still name the host.
type egressDialer struct {
	// proxy is the proxy's URL (http://[user:password@]host:port).
	proxy *url.URL
	// resolver resolves targets (nil: the system's).
	resolver *net.Resolver
	// check refuses a target address, as the direct dialer's Control does;
	// nil when private targets are allowed.
	check func(network, address string, c syscall.RawConn) error
	// dialProxy connects to the proxy. It has no address check: the proxy
	// is the operator's, usually on a private address.
	dialProxy func(ctx context.Context, network, address string) (net.Conn, error)
	// timeout bounds the CONNECT exchange when ctx has no deadline.
	timeout time.Duration
}

// DialContext returns a connection to address (host:port) through the
// proxy, to the first of its checked addresses the proxy reaches.
func (e *egressDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	addrs, err := e.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	var firstErr error
	for _, ip := range addrs {
		// As the kernel would dial it: an IPv4-mapped answer is IPv4, and
		// the check (like a dialer's Control) names the family.
		ip = ip.Unmap()
		family := "tcp4"
		if ip.Is6() {
			family = "tcp6"
		}
		target := net.JoinHostPort(ip.String(), port)
		if e.check != nil {
			if err := e.check(family, target, nil); err != nil {
				firstErr = cmpErr(firstErr, err)
				continue
			}
		}
		conn, err := e.connect(ctx, target)
		if err == nil {
			return conn, nil
		}
		firstErr = cmpErr(firstErr, err)
	}
	return nil, firstErr
}

// cmpErr keeps the first error.
func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// resolve gives host's addresses: the address itself for a literal.
func (e *egressDialer) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, nil
	}
	r := e.resolver
	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	return addrs, nil
}

// longAgo is a deadline already past: it ends a connection's blocked
// reads and writes at once (net/http's aLongTimeAgo).
var longAgo = time.Unix(1, 0)

// connect opens a tunnel to target (ip:port) and returns it once the
// proxy said 200.
func (e *egressDialer) connect(ctx context.Context, target string) (net.Conn, error) {
	conn, err := e.dialProxy(ctx, "tcp", e.proxy.Host)
	if err != nil {
		return nil, fmt.Errorf("egress proxy %s: %w", e.proxy.Host, err)
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout) // the sooner of ctx's deadline and the timeout
	defer cancel()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	// A deadline in the past when ctx ends unblocks the exchange below.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(longAgo) })
	defer stop()
	req := &http.Request{
		Method: http.MethodConnect,
		URL:    &url.URL{Opaque: target},
		Host:   target,
		Header: http.Header{},
	}
	if u := e.proxy.User; u != nil {
		password, _ := u.Password()
		req.Header.Set("Proxy-Authorization", "Basic "+
			base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+password)))
	}
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, fmt.Errorf("egress proxy %s: CONNECT %s: %w", e.proxy.Host, target, err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("egress proxy %s: CONNECT %s: %w", e.proxy.Host, target, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		conn.Close()
		return nil, fmt.Errorf("%w: CONNECT %s: %s", errProxyRefused, target, resp.Status)
	}
	if ctx.Err() != nil {
		conn.Close()
		return nil, ctx.Err()
	}
	_ = conn.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		// The target spoke first (a server banner); keep what was read.
		return &bufferedConn{Conn: conn, r: br}, nil
	}
	return conn, nil
}

// bufferedConn reads what the CONNECT exchange's reader already holds
// before reading the connection.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

// Read implements net.Conn.
func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
