package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/webhookd/webhookd/receiver"
	"github.com/webhookd/webhookd/signer"
)

// maxBody bounds what a receiver reads of one delivery: far above any
// payload the bench sends, so a larger body means something is wrong.
const maxBody = 1 << 20

// publishLog maps an event id to the instant the bench handed it to the
// engine, so that a receiver can turn an arrival into a latency without
// parsing the body. It is written before the publish request is sent, so an
// arrival always finds its entry.
type publishLog struct {
	mu   sync.RWMutex
	sent map[string]time.Time
}

func newPublishLog(capacity int) *publishLog {
	return &publishLog{sent: make(map[string]time.Time, capacity)}
}

// record notes the publish instant of id; a second call keeps the first.
func (l *publishLog) record(id string, at time.Time) {
	l.mu.Lock()
	if _, ok := l.sent[id]; !ok {
		l.sent[id] = at
	}
	l.mu.Unlock()
}

func (l *publishLog) lookup(id string) (time.Time, bool) {
	l.mu.RLock()
	at, ok := l.sent[id]
	l.mu.RUnlock()
	return at, ok
}

// endpoint is one subscription's receiver. Its verifier is set once the
// subscription exists, because the engine reveals the secret only then.
type endpoint struct {
	url  string
	hang bool

	verifier atomic.Pointer[receiver.Verifier]
	// failFirst makes the endpoint answer 500 to the first attempt of
	// every delivery and accept the next (the retrystorm scenario).
	failFirst atomic.Bool

	// delay, in nanoseconds, makes a healthy endpoint answer that long
	// after a delivery arrives (a receiver doing its work before it
	// answers): the spread, solofanout and backlog scenarios.
	delay atomic.Int64

	mu sync.Mutex
	// seen holds when each webhook-id first arrived here.
	seen      map[string]time.Time
	latencies []time.Duration
	// tried holds, at a failFirst endpoint, when each delivery's refused
	// first attempt arrived; retryGaps how long each retry came after it.
	tried     map[string]time.Time
	retryGaps []time.Duration
}

// firstTry records an attempt of delivery id arriving at a failFirst
// endpoint and tells whether it is the delivery's first, the one refused.
func (ep *endpoint) firstTry(id string, at time.Time) bool {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if _, ok := ep.tried[id]; ok {
		return false
	}
	ep.tried[id] = at
	return true
}

// endpointCounts are one endpoint's or one group's totals.
type endpointCounts struct {
	// Unique deliveries accepted (valid signature, first time this webhook-id arrived here).
	Unique int64
	// Duplicates: valid deliveries whose webhook-id this healthy endpoint
	// had already accepted (a 2xx was answered, yet the engine sent it again).
	Duplicates int64
	// HangRetries: repeats at a hanging endpoint, expected: the engine
	// retries what timed out.
	HangRetries int64
	// BadSignatures: requests that failed verification (answered 400).
	BadSignatures int64
	// Unknown: valid deliveries of an event the bench did not publish in this run.
	Unknown int64
	// FirstFails: first attempts a failFirst endpoint refused with 500.
	FirstFails int64
}

// receivers is a set of webhook endpoints served over plain HTTP on
// 127.0.0.1. Each endpoint has its own listener (own port) up to a cap, so
// that an engine which pools connections per host sees as many hosts as a
// real fleet of merchants would, and one hanging endpoint cannot starve the
// others of connections through a shared per-host limit.
type receivers struct {
	log       *publishLog
	server    *http.Server
	listeners []net.Listener
	endpoints []*endpoint
	closing   chan struct{}
	closeOnce sync.Once

	unique, duplicates, hangRetries, bad, unknown, firstFails atomic.Int64
	healthyUnique                                             atomic.Int64
	// inFlight counts the requests being served now, peakInFlight the
	// most at once: the engine's connections open to the receivers.
	inFlight, peakInFlight atomic.Int64
	firstArrival           atomic.Int64 // UnixNano of the first healthy unique arrival
	lastArrival            atomic.Int64 // UnixNano of the last healthy unique arrival
	bodies                 sync.Pool

	// batches counts the batch requests accepted (batched.go).
	batches atomic.Int64

	// down makes every endpoint answer 503 before reading the request, as
	// a receiving platform in an outage; refused counts those answers
	// (scale.go builds its backlog so).
	down    atomic.Bool
	refused atomic.Int64

	// open, when set, turns a verified body into the envelope it carries
	// (jwe.go decrypts); undecryptable counts the bodies it refused.
	open          func(body []byte) ([]byte, error)
	undecryptable atomic.Int64
	// connections counts the TCP connections accepted, handshakes the TLS
	// handshakes begun (mtls.go): what the engine kept open and reused.
	connections, handshakes atomic.Int64
}

// receiverOptions are how a scenario's receivers differ from plain HTTP
// ones. The zero value is plain HTTP.
type receiverOptions struct {
	// tls, when set, serves every endpoint over HTTPS with it (mtls.go).
	tls *tls.Config
	// open: see receivers.open.
	open func(body []byte) ([]byte, error)
}

// startReceivers opens n endpoints, the first `hanging` of which hold every
// request until the client gives up (or the receivers close), on at most
// maxListeners distinct ports.
func startReceivers(n, hanging, maxListeners int, log *publishLog) (*receivers, error) {
	return startReceiversWith(n, hanging, maxListeners, log, receiverOptions{})
}

// startReceiversWith is startReceivers served as opts says.
func startReceiversWith(n, hanging, maxListeners int, log *publishLog, opts receiverOptions) (*receivers, error) {
	if n < 1 {
		return nil, errors.New("receivers: need at least one endpoint")
	}
	rs := &receivers{log: log, closing: make(chan struct{}), open: opts.open}
	rs.bodies.New = func() any { b := make([]byte, 0, 4096); return &b }
	rs.server = &http.Server{
		Handler:           rs,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				rs.connections.Add(1)
			}
		},
	}
	scheme := "http"
	if opts.tls != nil {
		scheme = "https"
	}
	ports := min(n, max(maxListeners, 1))
	for range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			rs.close()
			return nil, fmt.Errorf("receivers: listen: %w", err)
		}
		rs.listeners = append(rs.listeners, ln)
		if opts.tls != nil {
			ln = tls.NewListener(ln, rs.countingHandshakes(opts.tls))
		}
		go rs.server.Serve(ln) //nolint:errcheck // Serve returns ErrServerClosed on close
	}
	for i := range n {
		ln := rs.listeners[i%len(rs.listeners)]
		rs.endpoints = append(rs.endpoints, &endpoint{
			url:   fmt.Sprintf("%s://%s/e/%d", scheme, ln.Addr(), i),
			hang:  i < hanging,
			seen:  make(map[string]time.Time),
			tried: make(map[string]time.Time),
		})
	}
	return rs, nil
}

// setSecret arms endpoint i with the subscription's signing secret.
func (rs *receivers) setSecret(i int, secret string) error {
	v, err := receiver.NewVerifier(receiver.VerifierConfig{Secrets: []string{secret}})
	if err != nil {
		return fmt.Errorf("endpoint %d: %w", i, err)
	}
	rs.endpoints[i].verifier.Store(v)
	return nil
}

// refuseFirst makes endpoint i answer 500 to the first attempt of each
// delivery and accept the second.
func (rs *receivers) refuseFirst(i int) {
	rs.endpoints[i].failFirst.Store(true)
}

// setDelay makes endpoint i answer d after each delivery arrives.
func (rs *receivers) setDelay(i int, d time.Duration) {
	rs.endpoints[i].delay.Store(int64(d))
}

// ServeHTTP verifies, deduplicates and timestamps one delivery.
func (rs *receivers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	idx, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/e/"))
	if err != nil || idx < 0 || idx >= len(rs.endpoints) || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	if rs.down.Load() {
		rs.refused.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	storeMax(&rs.peakInFlight, rs.inFlight.Add(1))
	defer rs.inFlight.Add(-1)
	ep := rs.endpoints[idx]
	bp := rs.bodies.Get().(*[]byte)
	defer rs.bodies.Put(bp)
	body, err := readBody((*bp)[:0], r.Body)
	*bp = body
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	arrived := time.Now()
	v := ep.verifier.Load()
	if v == nil || v.Verify(r.Header, body) != nil {
		rs.bad.Add(1)
		http.Error(w, "bad signature", http.StatusBadRequest)
		return
	}
	if isBatch(r) {
		rs.serveBatch(w, ep, body, arrived)
		return
	}
	id := r.Header.Get(signer.HeaderID)
	if rs.open != nil && !rs.opened(body, id) {
		http.Error(w, "cannot decrypt", http.StatusBadRequest)
		return
	}
	if ep.hang {
		// Hold the request until the engine's delivery timeout makes it
		// hang up; the cap only keeps a broken engine from pinning the bench.
		rs.note(ep, id, arrived, false)
		select {
		case <-r.Context().Done():
		case <-rs.closing:
		case <-time.After(5 * time.Minute):
		}
		// Abort rather than return: returning would send 200 and turn a
		// hang into a success.
		panic(http.ErrAbortHandler)
	}
	if ep.failFirst.Load() && ep.firstTry(id, arrived) {
		rs.firstFails.Add(1)
		http.Error(w, "the first attempt of every delivery fails", http.StatusInternalServerError)
		return
	}
	rs.note(ep, id, arrived, true)
	if d := time.Duration(ep.delay.Load()); d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
		case <-rs.closing:
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// note counts one verified arrival at ep.
func (rs *receivers) note(ep *endpoint, id string, arrived time.Time, healthy bool) {
	sent, known := rs.log.lookup(id)
	ep.mu.Lock()
	_, dup := ep.seen[id]
	if !dup {
		ep.seen[id] = arrived
		if known {
			ep.latencies = append(ep.latencies, arrived.Sub(sent))
		}
		if first, ok := ep.tried[id]; ok && healthy {
			ep.retryGaps = append(ep.retryGaps, arrived.Sub(first))
		}
	}
	ep.mu.Unlock()
	switch {
	case dup && !healthy:
		rs.hangRetries.Add(1)
	case dup:
		rs.duplicates.Add(1)
	case !known:
		rs.unknown.Add(1)
	default:
		rs.unique.Add(1)
		if healthy {
			rs.healthyUnique.Add(1)
			storeMin(&rs.firstArrival, arrived.UnixNano())
			storeMax(&rs.lastArrival, arrived.UnixNano())
		}
	}
}

// storeMax raises a to v unless it already holds more.
func storeMax(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// storeMin lowers a to v unless it already holds less; 0 is unset.
func storeMin(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if (cur != 0 && cur <= v) || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// readBody appends r (up to maxBody) to buf.
func readBody(buf []byte, r io.Reader) ([]byte, error) {
	lr := io.LimitReader(r, maxBody+1)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, 4096)
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			if len(buf) > maxBody {
				return buf, errors.New("body too large")
			}
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// counts returns the totals over all endpoints.
func (rs *receivers) counts() endpointCounts {
	return endpointCounts{
		Unique:        rs.unique.Load(),
		Duplicates:    rs.duplicates.Load(),
		HangRetries:   rs.hangRetries.Load(),
		BadSignatures: rs.bad.Load(),
		Unknown:       rs.unknown.Load(),
		FirstFails:    rs.firstFails.Load(),
	}
}

// retryGaps returns, over the failFirst endpoints, how long after each
// refused first attempt its delivery's accepted retry arrived, unsorted.
func (rs *receivers) retryGaps() []time.Duration {
	var out []time.Duration
	for _, ep := range rs.endpoints {
		ep.mu.Lock()
		out = append(out, ep.retryGaps...)
		ep.mu.Unlock()
	}
	return out
}

// latencies returns the first-arrival latencies of the healthy (or, with
// hanging true, the hanging) endpoints, unsorted.
func (rs *receivers) latencies(hanging bool) []time.Duration {
	var out []time.Duration
	for _, ep := range rs.endpoints {
		if ep.hang != hanging {
			continue
		}
		ep.mu.Lock()
		out = append(out, ep.latencies...)
		ep.mu.Unlock()
	}
	return out
}

// arrivedOf returns, over the healthy endpoints, when each of the events
// in sent (webhook-id → publish instant) first arrived, as latencies
// (unsorted), and how many arrivals that makes: an event fanned out to
// several endpoints counts once at each.
func (rs *receivers) arrivedOf(sent map[string]time.Time) ([]time.Duration, int) {
	var out []time.Duration
	for _, ep := range rs.endpoints {
		if ep.hang {
			continue
		}
		ep.mu.Lock()
		if len(sent) < len(ep.seen) {
			for id, at := range sent {
				if arrived, ok := ep.seen[id]; ok {
					out = append(out, arrived.Sub(at))
				}
			}
		} else {
			for id, arrived := range ep.seen {
				if at, ok := sent[id]; ok {
					out = append(out, arrived.Sub(at))
				}
			}
		}
		ep.mu.Unlock()
	}
	return out, len(out)
}

// uniqueAt counts the distinct deliveries that arrived at endpoint i.
func (rs *receivers) uniqueAt(i int) int64 {
	ep := rs.endpoints[i]
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return int64(len(ep.seen))
}

// waitHealthy polls until the healthy endpoints hold want unique deliveries
// or ctx ends; it returns whether the count was reached.
func (rs *receivers) waitHealthy(ctx context.Context, want int64) bool {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for rs.healthyUnique.Load() < want {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}

// close releases hanging requests and stops every listener.
func (rs *receivers) close() {
	rs.closeOnce.Do(func() { close(rs.closing) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = rs.server.Shutdown(ctx) // closes the listeners; the error is only the deadline
	for _, ln := range rs.listeners {
		_ = ln.Close() // already closed by Shutdown when it ran
	}
}
