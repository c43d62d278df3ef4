// Package tcpproxy is a TCP proxy on 127.0.0.1 for tests, standing for a
// broker that goes away and comes back: Down closes its listener and every
// connection through it (a restart, as a client sees one), Up listens
// again on the same port. The broker behind it, shared by others, is
// never touched.
package tcpproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards every connection made to Addr to a target address.
type Proxy struct {
	// Addr is the proxy's host:port, the same across Down and Up.
	Addr   string
	target string

	mu       sync.Mutex
	listener net.Listener
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
}

// New starts a proxy to target; the test's cleanup stops it.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: l.Addr().String(), target: target, conns: map[net.Conn]struct{}{}}
	p.serve(l)
	t.Cleanup(p.Down)
	return p
}

// Down closes the listener and every connection: the broker is gone.
func (p *Proxy) Down() {
	p.mu.Lock()
	if p.listener != nil {
		_ = p.listener.Close()
		p.listener = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	p.wg.Wait()
}

// Up listens again on Addr.
func (p *Proxy) Up(t testing.TB) {
	t.Helper()
	l, err := net.Listen("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	p.serve(l)
}

func (p *Proxy) serve(l net.Listener) {
	p.mu.Lock()
	p.listener = l
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := l.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				continue
			}
			go p.forward(c)
		}
	}()
}

// track registers c while the proxy is up; false when it is down.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.listener == nil {
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) forward(in net.Conn) {
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = in.Close()
		return
	}
	if !p.track(in, out) {
		_ = in.Close()
		_ = out.Close()
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(out, in)
	go pipe(in, out)
	<-done
	_ = in.Close()
	_ = out.Close()
	p.mu.Lock()
	delete(p.conns, in)
	delete(p.conns, out)
	p.mu.Unlock()
}
