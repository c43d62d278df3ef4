package deliver

import (
	"slices"
	"sync"
	"time"
)

// goroutineKeep is how long a goroutine whose attempt ended waits for the
// next one before it exits.
const goroutineKeep = 5 * time.Second

// goroutines runs the pool's attempts, each on a goroutine that, when its
// attempt ends, waits a while for the next one instead of exiting. A new
// goroutine starts on a small stack and grows it, copying it at each
// doubling, through an attempt's deep calls (the HTTP client, the
// signer, the record): 4–5 % of the engine's CPU at 300 events/s
// (BENCHMARKS.md, November 28, second session). A kept goroutine keeps
// the stack it grew until a collection finds it idle and halves it. The
// goroutine that waited least is given the next attempt (its stack is
// the likeliest to be grown still); at most as many are kept as
// attempts ran at once.
type goroutines struct {
	keep     time.Duration
	closed   chan struct{}
	close    sync.Once
	inFlight sync.WaitGroup

	mu sync.Mutex
	// idle holds the hand-over channel (buffered, one function) of each
	// goroutine waiting for an attempt, in the order they began to wait.
	idle []chan func()
	// live counts the goroutines running an attempt or waiting for one.
	live int
}

// newGoroutines returns goroutines that wait keep for a next attempt.
func newGoroutines(keep time.Duration) *goroutines {
	return &goroutines{keep: keep, closed: make(chan struct{})}
}

// Go runs f on the goroutine that began waiting last, or on a new one
// when none waits.
func (g *goroutines) Go(f func()) {
	g.inFlight.Add(1)
	g.mu.Lock()
	if n := len(g.idle); n > 0 {
		next := g.idle[n-1]
		g.idle = g.idle[:n-1]
		g.mu.Unlock()
		next <- f // buffered, and taken off the list: never blocks
		return
	}
	g.live++
	g.mu.Unlock()
	go g.loop(f)
}

// loop runs f, then each function handed over, until none comes within
// keep or the goroutines are closed.
func (g *goroutines) loop(f func()) {
	next := make(chan func(), 1)
	timer := time.NewTimer(g.keep)
	defer timer.Stop()
	for {
		f()
		g.inFlight.Done()
		g.mu.Lock()
		g.idle = append(g.idle, next)
		g.mu.Unlock()
		timer.Reset(g.keep)
		select {
		case f = <-next:
			continue
		case <-timer.C:
		case <-g.closed:
		}
		if !g.leave(next) {
			// Go took this goroutine off the list before it could leave:
			// its function is on the way.
			f = <-next
			continue
		}
		return
	}
}

// leave takes the goroutine whose hand-over channel is next off the idle
// list, or reports false when Go has taken it already.
func (g *goroutines) leave(next chan func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	i := slices.Index(g.idle, next)
	if i < 0 {
		return false
	}
	g.idle = slices.Delete(g.idle, i, i+1)
	g.live--
	return true
}

// Wait waits for the functions given to Go to return.
func (g *goroutines) Wait() { g.inFlight.Wait() }

// Close waits for the functions given to Go to return and lets the
// waiting goroutines exit. Go must not be called after it.
func (g *goroutines) Close() {
	g.inFlight.Wait()
	g.close.Do(func() { close(g.closed) })
}
