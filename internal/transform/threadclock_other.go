//go:build !linux

package transform

import "time"

// threadClock counts wall time on systems other than Linux: a call pinned
// to its thread is charged its wall time, which is at least its CPU time.
type threadClock struct {
	start time.Time
}

func currentThread() threadClock { return threadClock{start: time.Now()} }

func (c threadClock) used() time.Duration { return time.Since(c.start) }
