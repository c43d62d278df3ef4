// Package clock is the engine's one source of time. Every service reads the
// Clock it was given, so that a test moves time for all of them at once;
// System, the default, is the engine's only reader of time.Now.
package clock

import "time"

// Clock tells the time.
type Clock interface {
	// Now is the current instant.
	Now() time.Time
}

// System is the wall clock, the default Clock.
type System struct{}

// Now implements Clock.
func (System) Now() time.Time { return time.Now() }

// Func adapts a function to a Clock (tests shift the wall clock with it).
type Func func() time.Time

// Now implements Clock.
func (f Func) Now() time.Time { return f() }

// Or returns c, or System when c is nil: the default every Config applies.
func Or(c Clock) Clock {
	if c == nil {
		return System{}
	}
	return c
}
