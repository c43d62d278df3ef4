//go:build !linux

package transform

import (
	"time"

	"github.com/webhookd/webhookd/internal/clock"
)

// threadClock counts wall time on systems other than Linux: a call pinned
// to its thread is charged its wall time, which is at least its CPU time.
type threadClock struct {
	clock clock.Clock
	start time.Time
}

// currentThread starts counting on the engine's clock.
func currentThread(clk clock.Clock) threadClock { return threadClock{clock: clk, start: clk.Now()} }

// used is the wall time since currentThread.
func (c threadClock) used() time.Duration { return c.clock.Now().Sub(c.start) }
