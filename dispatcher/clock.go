package dispatcher

import "time"

// Clock tells the time. Every service of the pipeline reads the one Clock
// of its Config, so that a test moves time for all of them at once.
type Clock interface {
	// Now is the current instant.
	Now() time.Time
}

// SystemClock is the wall clock, the default Clock. It is the pipeline's
// only reader of time.Now.
type SystemClock struct{}

// Now implements Clock.
func (SystemClock) Now() time.Time { return time.Now() }

// ClockFunc adapts a function to a Clock (tests shift the wall clock with
// it).
type ClockFunc func() time.Time

// Now implements Clock.
func (f ClockFunc) Now() time.Time { return f() }
