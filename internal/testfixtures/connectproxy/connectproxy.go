// Package connectproxy is a real HTTP CONNECT proxy for tests, standing
// for the egress proxy (smokescreen and the like) that deliveries may go
// through: it tunnels every CONNECT and keeps what each one asked for.
package connectproxy

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"
)

// Proxy is a real HTTP CONNECT proxy on 127.0.0.1 for tests: it
// records the authority of every CONNECT and tunnels it to Upstream's
// answer for it (the authority itself when Upstream is nil), so that a
// test can send a public address to a local receiver.
type Proxy struct {
	// URL is the proxy's http://127.0.0.1:port.
	URL *url.URL
	// Upstream maps a CONNECT authority to the address dialed.
	Upstream func(authority string) string

	mu       sync.Mutex
	connects []string
}

// New starts a Proxy, stopped when the test ends.
func New(t testing.TB, upstream func(authority string) string) *Proxy {
	t.Helper()
	p := &Proxy{Upstream: upstream}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	p.URL, _ = url.Parse(srv.URL)
	return p
}

// Connects is every CONNECT authority the proxy was asked for, in order.
func (p *Proxy) Connects() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.connects...)
}

// ServeHTTP tunnels a CONNECT and refuses anything else.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
		return
	}
	p.mu.Lock()
	p.connects = append(p.connects, r.Host)
	p.mu.Unlock()
	dest := r.Host
	if p.Upstream != nil {
		dest = p.Upstream(r.Host)
	}
	up, err := net.DialTimeout("tcp", dest, 5*time.Second)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	client, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		return
	}
	_, _ = client.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tcp, ok := dst.(*net.TCPConn); ok {
			_ = tcp.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(up, client)
	go pipe(client, up)
	<-done
	<-done
	up.Close()
	client.Close()
}
