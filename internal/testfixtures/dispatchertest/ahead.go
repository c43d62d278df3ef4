package dispatchertest

import (
	"sync/atomic"
	"time"

	"github.com/webhookd/webhookd/dispatcher"
)

// AheadClock is the wall clock moved ahead by what a test sets: the
// engine's clock in tests that skip a wait (a retry, a deliver_at) rather
// than sleep through it.
type AheadClock struct{ offset atomic.Int64 }

// Now is time.Now plus the offset set.
func (c *AheadClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// Set moves the clock to d ahead of the wall clock.
func (c *AheadClock) Set(d time.Duration) { c.offset.Store(int64(d)) }

// DispatcherAhead is Dispatcher on an AheadClock, which it returns.
func (e *Env) DispatcherAhead(configure ...func(*dispatcher.Config)) (*dispatcher.Dispatcher, *AheadClock) {
	e.T.Helper()
	clk := &AheadClock{}
	d, _ := e.Dispatcher(append([]func(*dispatcher.Config){func(c *dispatcher.Config) { c.Clock = clk }}, configure...)...)
	return d, clk
}
