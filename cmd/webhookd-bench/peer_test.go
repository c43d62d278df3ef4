package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestSeqOf: the receivers read an event's number from either peer's body,
// and nothing else passes for one.
func TestSeqOf(t *testing.T) {
	for _, c := range []struct {
		name, body string
		seq        int
		ok         bool
	}{
		{"webhookd's envelope", `{"id":"e","type":"payout.paid","payload":{"bench":"r","seq":7,"pad":"x"}}`, 7, true},
		{"Outpost's data as the body", `{"bench":"r","seq":12,"pad":"x"}`, 12, true},
		{"the envelope wins over a top-level seq", `{"seq":1,"payload":{"seq":2}}`, 2, true},
		{"no seq", `{"payload":{"bench":"r"}}`, 0, false},
		{"seq not a number", `{"seq":"7"}`, 0, false},
		{"not JSON", `seq=7`, 0, false},
	} {
		seq, ok := seqOf([]byte(c.body))
		if seq != c.seq || ok != c.ok {
			t.Errorf("%s: seqOf = %d, %v; want %d, %v", c.name, seq, ok, c.seq, c.ok)
		}
	}
}

// TestPeerArrivals: each (event, destination) counts once, at its first
// arrival; a repeat is a duplicate and anything out of range is unknown.
func TestPeerArrivals(t *testing.T) {
	a := newPeerArrivals(3, 2)
	srv := httptest.NewServer(a)
	defer srv.Close()
	post := func(path, body string) {
		t.Helper()
		res, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	sent := time.Now()
	post("/d/0", `{"seq":0}`)
	post("/d/1", `{"payload":{"seq":0}}`)
	post("/d/1", `{"payload":{"seq":0}}`) // a retry of a delivery already noted
	post("/d/0", `{"seq":2}`)
	post("/d/2", `{"seq":1}`)  // no destination 2
	post("/d/0", `{"seq":3}`)  // no event 3
	post("/d/x", `{"seq":1}`)  // not a destination
	post("/d/0", `{"pad":""}`) // no number
	if got := a.unique.Load(); got != 3 {
		t.Errorf("unique = %d, want 3", got)
	}
	if got := a.duplicates.Load(); got != 1 {
		t.Errorf("duplicates = %d, want 1", got)
	}
	if got := a.unknown.Load(); got != 4 {
		t.Errorf("unknown = %d, want 4", got)
	}
	// Event 1 was never sent (its publish failed): its arrivals, had
	// there been any, would not count towards latency.
	lat, last := a.latencies([]time.Time{sent, {}, sent}, 3)
	if len(lat) != 3 || last.Before(sent) {
		t.Errorf("latencies: %v, last %v", lat, last)
	}
	for _, d := range lat {
		if d < 0 || d > time.Minute {
			t.Errorf("latency %v", d)
		}
	}
	// The warm-up's events are numbered after the measured ones and left
	// out of the latencies.
	if lat, _ := a.latencies([]time.Time{sent, {}, sent}, 1); len(lat) != 2 {
		t.Errorf("latencies of event 0 alone: %v, want its 2 deliveries", lat)
	}
}

// TestPeerWarmup: two seconds' worth at a rate, a fixed number at full
// speed, never more than the run.
func TestPeerWarmup(t *testing.T) {
	for _, c := range []struct {
		events int
		rate   float64
		want   int
	}{
		{9000, 300, 600},
		{20000, 0, peerWarmupEvents},
		{100, 300, 100},
		{100, 0, 100},
	} {
		if got := peerWarmup(c.events, c.rate); got != c.want {
			t.Errorf("peerWarmup(%d, %v) = %d, want %d", c.events, c.rate, got, c.want)
		}
	}
}

// TestPeerPublish: both ways of publishing send every sequence number
// exactly once, and a paced run takes the time its rate says.
func TestPeerPublish(t *testing.T) {
	for _, c := range []struct {
		name       string
		rate       float64
		publishers int
	}{
		{"as fast as the publishers go", 0, 4},
		{"paced", 2000, 0},
	} {
		const events = 100
		var seen [events]atomic.Int32
		start := time.Now()
		peerPublish(context.Background(), events, c.rate, c.publishers, func(seq int) { seen[seq].Add(1) })
		for i := range seen {
			if n := seen[i].Load(); n != 1 {
				t.Errorf("%s: event %d sent %d times", c.name, i, n)
			}
		}
		if c.rate > 0 {
			// 100 events at 2,000/s: the last leaves 49.5 ms after the first.
			if took := time.Since(start); took < 45*time.Millisecond {
				t.Errorf("%s: %d events took %v at %v/s", c.name, events, took, c.rate)
			}
		}
	}
}

// TestPeerFlag: -peer takes the two engines the scenario knows and
// nothing else.
func TestPeerFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		peer string
		ok   bool
	}{
		{[]string{"-scenario", "peer", "-token", "t"}, peerWebhookd, true},
		{[]string{"-scenario", "peer", "-token", "t", "-peer", "outpost", "-peer-key", "k"}, peerOutpost, true},
		{[]string{"-scenario", "peer", "-token", "t", "-peer", "svix"}, "", false},
	} {
		cfg, err := parseFlags(c.args, io.Discard)
		if (err == nil) != c.ok || (c.ok && cfg.peer != c.peer) {
			t.Errorf("%v: peer %q, %v", c.args, cfg.peer, err)
		}
	}
}
