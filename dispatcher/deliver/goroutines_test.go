package deliver

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestGoroutinesAreKept: an attempt that starts after another ended runs
// on the goroutine that ran the first; attempts at once each get their
// own; Close waits for them and lets the kept goroutines go.
func TestGoroutinesAreKept(t *testing.T) {
	t.Parallel()
	g := newGoroutines(time.Minute)
	var ran atomic.Int64
	for range 10 {
		g.Go(func() { ran.Add(1) })
		g.Wait()
		// The goroutine counts its attempt done just before it waits for
		// the next: let it reach the wait, as a busy engine's would.
		waitUntil(t, "the goroutine to wait for work", func() bool { return len(g.handoff) == 0 && g.idleOnce() })
	}
	if got := g.live.Load(); got != 1 {
		t.Fatalf("ten attempts one after another ran on %d goroutines, want 1", got)
	}
	release := make(chan struct{})
	for range 3 {
		g.Go(func() { <-release; ran.Add(1) })
	}
	if got := g.live.Load(); got != 3 {
		t.Fatalf("three attempts at once run on %d goroutines, want 3", got)
	}
	close(release)
	g.Close()
	if got := ran.Load(); got != 13 {
		t.Fatalf("ran %d attempts, want 13", got)
	}
	waitUntil(t, "the kept goroutines to exit", func() bool { return g.live.Load() == 0 })
}

// TestGoroutinesExitWhenIdle: a goroutine with no attempt for keep exits.
func TestGoroutinesExitWhenIdle(t *testing.T) {
	t.Parallel()
	g := newGoroutines(time.Millisecond)
	g.Go(func() {})
	g.Wait()
	waitUntil(t, "the idle goroutine to exit", func() bool { return g.live.Load() == 0 })
	g.Go(func() {}) // a new one starts
	g.Close()
}

// idleOnce reports whether a goroutine is waiting for work: it hands over
// a function that does nothing (counted like an attempt) and waits for it.
func (g *goroutines) idleOnce() bool {
	g.inFlight.Add(1)
	select {
	case g.handoff <- func() {}:
		g.inFlight.Wait()
		return true
	default:
		g.inFlight.Done()
		return false
	}
}

// waitUntil polls cond until it holds, failing the test after ten
// seconds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited ten seconds for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
