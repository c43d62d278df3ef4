package nats

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"sync"
	"time"
)

// errBeforeTLS is a server that sent more than its INFO before the TLS
// handshake: nothing may come in clear after it.
var errBeforeTLS = errors.New("nats: the server sent data in clear before the TLS handshake")

// dialer is the client library's CustomDialer for one connect: it dials
// through env.Dial under the ctx of the Send that connects, wraps the
// connection in a boundedConn and keeps the first failure it saw, which
// the library would otherwise replace by its own words ("no servers
// available" for a refused connection).
type dialer struct {
	ctx     context.Context
	dial    func(ctx context.Context, network, address string) (net.Conn, error)
	wantTLS bool

	mu  sync.Mutex
	err error
}

// Dial implements nats.CustomDialer.
func (d *dialer) Dial(network, address string) (net.Conn, error) {
	conn, err := d.dial(d.ctx, network, address)
	if err != nil {
		d.failed(err)
		return nil, err
	}
	host, _, _ := net.SplitHostPort(address)
	return &boundedConn{raw: conn, cur: conn, host: host, wantTLS: d.wantTLS, failed: d.failed}, nil
}

// SkipTLSHandshake tells the library not to wrap the connection in TLS
// itself: boundedConn does, so that it reads the protocol in clear
// beneath the library and its TLS settings are webhookd's.
func (d *dialer) SkipTLSHandshake() bool { return true }

// failed keeps err when it is the first failure.
func (d *dialer) failed(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err == nil {
		d.err = err
	}
}

// cause is the first failure seen, nil when none.
func (d *dialer) cause() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// boundedConn is a connection to a server, as the client library sees
// it: what the server sends passes a frameScanner (bounded lines and
// messages), and after the server's INFO it is TLS when the destination
// or the server asks for it, before the client's CONNECT (NATS's order:
// INFO in clear, then the handshake).
//
// The library reads (its read loop) and writes (its flusher) from two
// goroutines, but only after the connect, which it runs alone: the
// upgrade, which changes cur, is over by then.
type boundedConn struct {
	raw     net.Conn
	cur     net.Conn
	host    string
	wantTLS bool
	failed  func(error)

	frames     frameScanner
	upgradeDue bool
}

// Read implements net.Conn.
func (c *boundedConn) Read(p []byte) (int, error) {
	if err := c.upgrade(); err != nil {
		return 0, err
	}
	n, err := c.cur.Read(p)
	if n > 0 {
		first, scanErr := c.frames.scan(p[:n])
		if scanErr == nil && first >= 0 {
			scanErr = c.afterInfo(n - first)
		}
		if scanErr != nil {
			c.failed(scanErr)
			_ = c.raw.Close()
			return 0, scanErr
		}
	}
	if err != nil && n == 0 {
		c.failed(err)
	}
	return n, err
}

// afterInfo decides the TLS upgrade once the first line is read, rest
// being how many bytes followed it in the same read.
func (c *boundedConn) afterInfo(rest int) error {
	var info struct {
		TLSRequired  bool `json:"tls_required"`
		TLSAvailable bool `json:"tls_available"`
	}
	if c.frames.info == nil || json.Unmarshal(c.frames.info, &info) != nil {
		return nil // not an INFO: the library refuses it
	}
	if !(c.wantTLS && (info.TLSRequired || info.TLSAvailable)) && !info.TLSRequired {
		return nil // clear text, or TLS wanted and not offered: the library refuses it
	}
	if rest > 0 {
		return errBeforeTLS
	}
	c.upgradeDue = true
	return nil
}

// upgrade makes the connection TLS when the INFO asked for it, before
// anything else is written or read: the server waits for the client's
// handshake. The connection's deadline is the library's, set for the
// whole connect.
func (c *boundedConn) upgrade() error {
	if !c.upgradeDue {
		return nil
	}
	c.upgradeDue = false
	conn := tls.Client(c.raw, &tls.Config{ServerName: c.host, MinVersion: tls.VersionTLS12})
	if err := conn.Handshake(); err != nil {
		c.failed(err)
		_ = c.raw.Close()
		return err
	}
	c.cur = conn
	return nil
}

// Write implements net.Conn.
func (c *boundedConn) Write(p []byte) (int, error) {
	if err := c.upgrade(); err != nil {
		return 0, err
	}
	n, err := c.cur.Write(p)
	if err != nil {
		c.failed(err)
	}
	return n, err
}

// Close implements net.Conn.
func (c *boundedConn) Close() error { return c.cur.Close() }

// LocalAddr implements net.Conn.
func (c *boundedConn) LocalAddr() net.Addr { return c.raw.LocalAddr() }

// RemoteAddr implements net.Conn.
func (c *boundedConn) RemoteAddr() net.Addr { return c.raw.RemoteAddr() }

// SetDeadline implements net.Conn.
func (c *boundedConn) SetDeadline(t time.Time) error { return c.raw.SetDeadline(t) }

// SetReadDeadline implements net.Conn.
func (c *boundedConn) SetReadDeadline(t time.Time) error { return c.raw.SetReadDeadline(t) }

// SetWriteDeadline implements net.Conn.
func (c *boundedConn) SetWriteDeadline(t time.Time) error { return c.raw.SetWriteDeadline(t) }
