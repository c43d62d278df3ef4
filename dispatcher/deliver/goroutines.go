package deliver

import (
	"sync"
	"sync/atomic"
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
// the stack it grew until a collection finds it idle and halves it. At
// most as many goroutines are kept as attempts ran at once.
type goroutines struct {
	keep     time.Duration
	handoff  chan func()
	closed   chan struct{}
	close    sync.Once
	inFlight sync.WaitGroup
	// live counts the goroutines running or waiting for an attempt.
	live atomic.Int64
}

// newGoroutines returns goroutines that wait keep for a next attempt.
func newGoroutines(keep time.Duration) *goroutines {
	return &goroutines{keep: keep, handoff: make(chan func()), closed: make(chan struct{})}
}

// Go runs f on a goroutine waiting for work, or on a new one when none
// waits.
func (g *goroutines) Go(f func()) {
	g.inFlight.Add(1)
	select {
	case g.handoff <- f:
	default:
		g.live.Add(1)
		go g.loop(f)
	}
}

// loop runs f, then each function handed over, until none comes within
// keep or the goroutines are closed.
func (g *goroutines) loop(f func()) {
	defer g.live.Add(-1)
	timer := time.NewTimer(g.keep)
	defer timer.Stop()
	for {
		f()
		g.inFlight.Done()
		timer.Reset(g.keep)
		select {
		case f = <-g.handoff:
		case <-timer.C:
			return
		case <-g.closed:
			return
		}
	}
}

// Wait waits for the functions given to Go to return.
func (g *goroutines) Wait() { g.inFlight.Wait() }

// Close waits for the functions given to Go to return and lets the
// waiting goroutines exit. Go must not be called after it.
func (g *goroutines) Close() {
	g.inFlight.Wait()
	g.close.Do(func() { close(g.closed) })
}
