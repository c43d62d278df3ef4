package deliver

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// TestGoroutinesAreKept: an attempt that starts after another ended runs
// on the goroutine that ran the first; attempts at once each get their
// own, and the goroutine that waited least is given the next one; Close
// waits for them and lets the kept goroutines go.
func TestGoroutinesAreKept(t *testing.T) {
	t.Parallel()
	g := newGoroutines(time.Minute)
	var ran atomic.Int64
	for range 10 {
		g.Go(func() { ran.Add(1) })
		g.Wait()
		// The goroutine counts its attempt done just before it waits for
		// the next: let it reach the wait, as a busy engine's would.
		waitUntil(t, "the goroutine to wait for work", func() bool { return g.counts() == [2]int{1, 1} })
	}
	release := make(chan struct{})
	for range 3 {
		g.Go(func() { <-release; ran.Add(1) })
	}
	if got := g.counts(); got != [2]int{3, 0} {
		t.Fatalf("three attempts at once: %d goroutines, %d waiting; want 3, 0", got[0], got[1])
	}
	close(release)
	g.Wait()
	waitUntil(t, "the three to wait for work", func() bool { return g.counts() == [2]int{3, 3} })
	g.mu.Lock()
	last := g.idle[2]
	g.mu.Unlock()
	g.Go(func() { ran.Add(1) })
	g.mu.Lock()
	taken := !slices.Contains(g.idle, last)
	g.mu.Unlock()
	if !taken {
		t.Error("the next attempt did not go to the goroutine that waited least")
	}
	g.Close()
	if got := ran.Load(); got != 14 {
		t.Fatalf("ran %d attempts, want 14", got)
	}
	waitUntil(t, "the kept goroutines to exit", func() bool { return g.counts() == [2]int{0, 0} })
}

// TestGoroutinesExitWhenIdle: a goroutine with no attempt for keep exits,
// and the next attempt starts a new one.
func TestGoroutinesExitWhenIdle(t *testing.T) {
	t.Parallel()
	g := newGoroutines(time.Millisecond)
	g.Go(func() {})
	g.Wait()
	waitUntil(t, "the idle goroutine to exit", func() bool { return g.counts() == [2]int{0, 0} })
	var ran atomic.Bool
	g.Go(func() { ran.Store(true) })
	g.Close()
	if !ran.Load() {
		t.Fatal("the attempt after the exit did not run")
	}
}

// counts returns how many goroutines are live and how many of them wait.
func (g *goroutines) counts() [2]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return [2]int{g.live, len(g.idle)}
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
