package deliver

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"sync"
)

// maxEndpointTransports bounds the transports kept for mTLS endpoints;
// past it, the one used least recently is dropped (its connections close
// as they go idle).
const maxEndpointTransports = 1000

// endpointTransports keeps one transport per mTLS identity (EndpointTLS's
// Version): a client certificate is a property of the connection, so the
// connections of one subscription cannot serve another, and keeping them
// is what spares each attempt a handshake. Every transport dials through
// the shared client's bounded, address-checked dialer (and egress proxy).
type endpointTransports struct {
	// build makes a transport presenting config's certificate.
	build func(config *tls.Config) *http.Transport
	max   int

	mu   sync.Mutex
	kept map[string]*keptTransport
	tick uint64
}

type keptTransport struct {
	client *http.Client
	// used is the tick of its last use, for eviction.
	used uint64
}

func newEndpointTransports(build func(*tls.Config) *http.Transport, max int) *endpointTransports {
	return &endpointTransports{build: build, max: max, kept: make(map[string]*keptTransport)}
}

// client is the client of e's identity, built (e opened) the first time.
func (t *endpointTransports) client(e *EndpointTLS) (*http.Client, error) {
	t.mu.Lock()
	t.tick++
	if k, ok := t.kept[e.Version]; ok {
		k.used = t.tick
		t.mu.Unlock()
		return k.client, nil
	}
	t.mu.Unlock()

	// Opened outside the lock: a parse must not hold up other attempts.
	ct, err := e.open()
	if err != nil {
		return nil, fmt.Errorf("client certificate %s: %w", e.Version, err)
	}
	transport := t.build(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: ct.ServerCA,
		// Always the subscription's certificate: crypto/tls would otherwise
		// send none when the server's list of acceptable CAs does not name
		// its issuer (an intermediate, or a list that is wrong), and the
		// merchant set this certificate for this endpoint alone.
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &ct.Certificate, nil }})
	client := &http.Client{Transport: transport, CheckRedirect: noRedirects}

	t.mu.Lock()
	defer t.mu.Unlock()
	if k, ok := t.kept[e.Version]; ok {
		// Another attempt built it meanwhile: keep one.
		transport.CloseIdleConnections()
		return k.client, nil
	}
	if len(t.kept) >= t.max {
		t.evictLocked()
	}
	t.kept[e.Version] = &keptTransport{client: client, used: t.tick}
	return client, nil
}

// evictLocked drops the transport used least recently.
func (t *endpointTransports) evictLocked() {
	var oldest string
	var at uint64
	for version, k := range t.kept {
		if oldest == "" || k.used < at {
			oldest, at = version, k.used
		}
	}
	if k, ok := t.kept[oldest]; ok {
		k.client.CloseIdleConnections()
		delete(t.kept, oldest)
	}
}

// closeIdle closes every kept transport's idle connections.
func (t *endpointTransports) closeIdle() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range t.kept {
		k.client.CloseIdleConnections()
	}
}

// len is how many transports are kept.
func (t *endpointTransports) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.kept)
}
