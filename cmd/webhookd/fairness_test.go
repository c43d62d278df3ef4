package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/internal/testfixtures/sockets"
)

// arrivals is a fast receiver that notes when each webhook-id arrived.
type arrivals struct {
	*httptest.Server
	mu sync.Mutex
	at map[string]time.Time
}

func newArrivals(t *testing.T) *arrivals {
	a := &arrivals{at: map[string]time.Time{}}
	a.Server = httptest.NewServer(a.handler())
	t.Cleanup(a.Close)
	return a
}

// handler notes each webhook-id's first arrival and answers 204.
func (a *arrivals) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		if _, seen := a.at[r.Header.Get("webhook-id")]; !seen {
			a.at[r.Header.Get("webhook-id")] = time.Now()
		}
		a.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
}

// p99 waits for every published event to arrive and returns the 99th
// percentile of publish → arrival.
func (a *arrivals) p99(t *testing.T, published map[string]time.Time, within time.Duration) time.Duration {
	t.Helper()
	var took []time.Duration
	if !eventually(within, func() bool { took = a.took(published); return len(took) == len(published) }) {
		t.Fatalf("%d of %d events arrived within %v", len(took), len(published), within)
	}
	slices.Sort(took)
	return took[(len(took)*99+99)/100-1]
}

// took is publish → arrival of each published event that has arrived.
func (a *arrivals) took(published map[string]time.Time) []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	var took []time.Duration
	for id, sent := range published {
		if at, ok := a.at[id]; ok {
			took = append(took, at.Sub(sent))
		}
	}
	return took
}

// hangingServer is a receiver that accepts and never answers, until the
// engine hangs up or the test ends, and counts the requests it holds.
type hangingServer struct {
	*httptest.Server
	// held is the number of requests it holds now; cut the number the
	// engine gave up on (its delivery timeout).
	held, cut atomic.Int64
}

func hanging(t *testing.T) *hangingServer {
	done := make(chan struct{})
	h := &hangingServer{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		h.held.Add(1)
		defer h.held.Add(-1)
		// Read to the end, so that the server watches the connection and
		// sees the engine hang up.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
			h.cut.Add(1)
		case <-done:
		}
	}))
	t.Cleanup(func() { close(done); h.Close() })
	return h
}

// subscribeURL creates a subscription of key's merchant to every event.
func (e *engine) subscribeURL(key, url string) {
	e.t.Helper()
	status, sub := e.call("POST", "http://"+e.public+"/v1/webhook_subscriptions", key,
		map[string]any{"url": url, "events": []string{"*"}})
	if status != http.StatusCreated {
		e.t.Fatalf("create subscription of %s: %d %v", url, status, sub)
	}
}

// publishSteadily publishes events of merchant at rate per second for d,
// and returns when each was published.
func (e *engine) publishSteadily(merchant string, rate int, d time.Duration) map[string]time.Time {
	e.t.Helper()
	published := map[string]time.Time{}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for end := time.Now().Add(d); time.Now().Before(end); <-tick.C {
		sent := time.Now()
		published[e.publish(merchant)] = sent
	}
	return published
}

// TestNoisyMerchantLeavesOthersTheirLatency: a merchant whose five
// subscriptions hang until the delivery timeout, published to at 10
// events/s, holds its share of the workers and no more: another merchant,
// publishing at a steady rate, keeps its publish → arrival p99 within
// twice what it is alone (or two seconds more, for a busy machine's noise). The workers are few (32, a share of 8) so that
// the hanging endpoints could take them all: five subscriptions' caps add
// up to more than the pool.
//
// Not parallel: it measures latency, and it must neither feel the package's
// other tests nor slow them.
func TestNoisyMerchantLeavesOthersTheirLatency(t *testing.T) {
	storetest.FullLane(t, "a latency test of the real binary")
	e := newEngine(t, "WEBHOOKD_WORKER_CONCURRENCY=32", "WEBHOOKD_MERCHANT_SHARE=0.25",
		"WEBHOOKD_DELIVERY_TIMEOUT=5s", "WEBHOOKD_RETRY_SCHEDULE=1s,1s,1s")
	// Receivers first, so that the engine stops before they close.
	calm := newArrivals(t)
	trap := hanging(t)
	e.start()
	e.subscribeURL(e.keysCreate("m_calm"), calm.URL+"/hook")
	hostileKey := e.keysCreate("m_hostile")
	for i := range 5 {
		e.subscribeURL(hostileKey, fmt.Sprintf("%s/hook/%d", trap.URL, i))
	}

	const rate, phase = 20, 5 * time.Second
	alone := calm.p99(t, e.publishSteadily("m_calm", rate, phase), 30*time.Second)

	stop := make(chan struct{})
	hostileDone := make(chan struct{})
	go func() {
		defer close(hostileDone)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				e.publish("m_hostile")
			}
		}
	}()
	// The hanging attempts fill the hostile merchant's share (8 of 32).
	waitFor(t, "the hanging attempts to fill the hostile merchant's share", 30*time.Second,
		func() bool { return trap.held.Load() >= 32/4 })
	noisy := calm.p99(t, e.publishSteadily("m_calm", rate, phase), 30*time.Second)
	close(stop)
	<-hostileDone

	t.Logf("m_calm publish → arrival p99: %v alone, %v beside a merchant with 5 hanging subscriptions",
		alone.Round(time.Millisecond), noisy.Round(time.Millisecond))
	// Starved, the calm merchant's attempts would wait for hanging ones to
	// reach the 5 s timeout: a p99 of seconds. A CPU busy with other test
	// packages adds to any p99, which is not what this test is about
	// (seen on loaded CI machines: 45 ms alone and 306 ms beside; 55 ms
	// and 1.206 s, beside the admin tests and the compiles, where four
	// other runs of the day measured 46 to 355 ms): hence two seconds of
	// slack, still less than half the timeout a starved attempt waits.
	if limit := max(2*alone, alone+2*time.Second); noisy > limit {
		t.Errorf("p99 beside the hostile merchant %v, more than %v (twice the %v alone, and at least two seconds more)", noisy, limit, alone)
	}
}

// TestFanOutOfTenThousandStaysBounded: one event matching 10,000
// subscriptions, each on a receiver host of its own that answers in one
// second, never has more outbound connections open than
// WEBHOOKD_WORKER_CONCURRENCY, and the engine's memory stays bounded; every
// delivery arrives.
func TestFanOutOfTenThousandStaysBounded(t *testing.T) {
	storetest.FullLane(t, "ten thousand deliveries by the real binary")
	// Not parallel: ten thousand deliveries take the machine for most of a
	// minute, which would skew the timing of the fault tests.
	const subscriptions, concurrency = 10_000, 256
	const maxRSS = 256 << 20
	dbURL := storetest.NewDatabase(t)
	e := newEngineOn(t, dbURL, "WEBHOOKD_WORKER_CONCURRENCY="+strconv.Itoa(concurrency), "WEBHOOKD_MERCHANT_SHARE=1",
		"WEBHOOKD_DELIVERY_TIMEOUT=10s", "WEBHOOKD_LOG_LEVEL=warn")

	// One listener on every IPv4 address: 127.0.x.y are 10,000 hosts to
	// the engine, so its per-host bound cannot hide the global one.
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	var served atomic.Int64
	rcv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// Kept: the behaviour under test is a receiver that answers in a
		// second, so that the bound on connections is reached.
		time.Sleep(time.Second)
		served.Add(1)
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = rcv.Serve(ln) }()
	t.Cleanup(func() { rcv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	e.start() // after the receiver, so that it stops before the receiver closes

	// One subscription through the API, then its copies, each to a host of
	// its own, written straight into the engine's database: creating ten
	// thousand through the API would take most of a minute.
	e.subscribeURL(e.keysCreate("m_wide"), fmt.Sprintf("http://127.0.1.1:%d/hook", port))
	db, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	if _, err := db.Exec(context.Background(), `
		WITH template AS (SELECT * FROM subscriptions WHERE merchant_id = 'm_wide'),
		copies AS (
			INSERT INTO subscriptions (id, merchant_id, url, events, status, metadata, created_at, updated_at)
			SELECT gen_random_uuid(), t.merchant_id, format('http://127.0.%s.%s:%s/hook', 1 + g / 250, 1 + g % 250, $1::int),
				t.events, t.status, t.metadata, t.created_at, t.updated_at
			FROM template t, generate_series(1, $2::int - 1) g
			RETURNING id)
		INSERT INTO subscription_secrets (subscription_id, ciphertext, created_at, expires_at)
		SELECT c.id, s.ciphertext, s.created_at, s.expires_at
		FROM copies c, subscription_secrets s JOIN template t ON s.subscription_id = t.id`, port, subscriptions); err != nil {
		t.Fatal(err)
	}

	pid := e.cmd.Process.Pid
	var peakConns, peakRSS int
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
			if n, err := sockets.Established(pid, port); err == nil {
				peakConns = max(peakConns, n)
			}
			peakRSS = max(peakRSS, rssOf(pid))
		}
	}()
	start := time.Now()
	e.publish("m_wide")
	if !eventually(3*time.Minute, func() bool { return served.Load() >= subscriptions }) {
		t.Fatalf("%d of %d deliveries within 3 minutes", served.Load(), subscriptions)
	}
	close(done)
	<-watched
	t.Logf("%d deliveries in %v: at most %d outbound connections (bound %d), engine RSS peak %d MiB",
		subscriptions, time.Since(start).Round(time.Second), peakConns, concurrency, peakRSS>>20)
	if peakConns > concurrency {
		t.Errorf("%d outbound connections open at once, over WEBHOOKD_WORKER_CONCURRENCY=%d", peakConns, concurrency)
	}
	if peakRSS > maxRSS {
		t.Errorf("engine RSS reached %d MiB, over %d MiB", peakRSS>>20, maxRSS>>20)
	}
}

// rssOf is the resident memory of process pid in bytes (0 if unknown).
func rssOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return kb << 10
		}
	}
	return 0
}
