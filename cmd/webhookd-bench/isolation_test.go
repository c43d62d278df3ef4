package main

import (
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestIsolationScenariosOnlyWhenNamed: the isolation scenarios parse, run
// only when named, and -scenario all stays as it was.
func TestIsolationScenariosOnlyWhenNamed(t *testing.T) {
	for _, name := range isolationScenarios {
		if slices.Contains(scenarios, name) || !slices.Contains(ownScenarios, name) {
			t.Errorf("%s: want it among the scenarios run only when named, not in all", name)
		}
		c, err := parseFlags([]string{"-scenario", name, "-token", "t", "-hanging", "50", "-workers", "64"}, io.Discard)
		if err != nil || c.scenario != name || c.hanging != 50 || c.workers != 64 {
			t.Errorf("-scenario %s: %+v, %v", name, c, err)
		}
	}
	c, err := parseFlags([]string{"-token", "t"}, io.Discard)
	if err != nil || c.phase != isolationPhase || c.delay != answerDelay || c.warmup != isolationWarmup {
		t.Errorf("defaults: phase %v, delay %v, warmup %v, %v", c.phase, c.delay, c.warmup, err)
	}
	for _, bad := range [][]string{{"-phase", "0s"}, {"-hanging", "-1"}, {"-workers", "-2"}, {"-delay", "-1s"}} {
		if _, err := parseFlags(append([]string{"-token", "t"}, bad...), io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestReceiverDelayPeakAndArrivals: a delayed endpoint answers after its
// delay, the receivers count the requests open at once, and arrivedOf
// gives the latencies of one set of events only.
func TestReceiverDelayPeakAndArrivals(t *testing.T) {
	log := newPublishLog(8)
	rcv, err := startReceivers(2, 0, 2, log)
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.close()
	secret, key := mustSecret(t)
	for i := range 2 {
		if err := rcv.setSecret(i, secret); err != nil {
			t.Fatal(err)
		}
	}
	const delay = 200 * time.Millisecond
	rcv.setDelay(0, delay)
	body := []byte(`{"id":"x","payload":{}}`)
	sent := map[string]time.Time{}
	other := map[string]time.Time{}
	var ids []string
	for i := range 4 {
		id := uuid.NewString()
		at := time.Now().Add(-50 * time.Millisecond)
		log.record(id, at)
		ids = append(ids, id)
		if i < 3 {
			sent[id] = at
		} else {
			other[id] = at
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, id := range ids[:3] {
		wg.Go(func() {
			if status, err := post(t, http.DefaultClient, rcv.endpoints[0].url, id, time.Now(), body, key); err != nil || status != 204 {
				t.Errorf("delayed endpoint: %d, %v", status, err)
			}
		})
	}
	wg.Wait()
	if took := time.Since(start); took < delay {
		t.Errorf("the delayed endpoint answered in %v, before its %v", took, delay)
	}
	if status, err := post(t, http.DefaultClient, rcv.endpoints[1].url, ids[3], time.Now(), body, key); err != nil || status != 204 {
		t.Errorf("fast endpoint: %d, %v", status, err)
	}
	if peak := rcv.peakInFlight.Load(); peak != 3 {
		t.Errorf("peak in flight %d, want the 3 delayed requests", peak)
	}
	if n := rcv.inFlight.Load(); n != 0 {
		t.Errorf("%d requests in flight after all answered", n)
	}
	lat, n := rcv.arrivedOf(sent)
	if n != 3 || len(lat) != 3 {
		t.Fatalf("arrivals of the 3 events: %d (%v)", n, lat)
	}
	for _, l := range lat {
		if l < 50*time.Millisecond || l > 10*time.Second {
			t.Errorf("latency %v, want at least the 50ms before the post", l)
		}
	}
	if _, n := rcv.arrivedOf(other); n != 1 {
		t.Errorf("arrivals of the other event: %d, want 1", n)
	}
	if a, b := rcv.uniqueAt(0), rcv.uniqueAt(1); a != 3 || b != 1 {
		t.Errorf("unique at endpoints: %d, %d; want 3, 1", a, b)
	}
}

func TestIsolationLimit(t *testing.T) {
	for _, tc := range []struct{ solo, want time.Duration }{
		{30 * time.Millisecond, 1060 * time.Millisecond},
		{2 * time.Second, 5 * time.Second},
		{0, time.Second},
	} {
		if got := isolationLimit(tc.solo); got != tc.want {
			t.Errorf("isolationLimit(%v) = %v, want %v", tc.solo, got, tc.want)
		}
	}
}

// TestSpreadListeners: spread puts every receiver on one port unless
// -listeners is given.
func TestSpreadListeners(t *testing.T) {
	if c, err := parseFlags([]string{"-token", "t"}, io.Discard); err != nil || c.listenersSet {
		t.Errorf("no -listeners: set %v, %v", c.listenersSet, err)
	}
	if c, err := parseFlags([]string{"-token", "t", "-listeners", "1000"}, io.Discard); err != nil || !c.listenersSet || c.listeners != 1000 {
		t.Errorf("-listeners 1000: set %v, %d, %v", c.listenersSet, c.listeners, err)
	}
}
