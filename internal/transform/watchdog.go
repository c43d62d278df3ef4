package transform

import (
	"context"
	"sync"
	"time"
)

// minCheck is the shortest wait between two reads of a thread's CPU time.
const minCheck = time.Millisecond

// watchdog ends a call (cancels its context, which wazero checks in every
// loop and call of the module) once its thread has used the CPU time of
// the call, or the call its wall time. A thread's CPU time never runs
// ahead of the wall clock, so the first read is due after TimePerCall and
// each next one after the time still left: a call that ends sooner costs
// two timers and no read.
type watchdog struct {
	mu      sync.Mutex
	stopped bool
	thread  threadClock
	start   time.Duration
	budget  time.Duration
	cancel  context.CancelCauseFunc
	cpu     *time.Timer
	wall    *time.Timer
}

func watch(thread threadClock, l Limits, cancel context.CancelCauseFunc) *watchdog {
	w := &watchdog{thread: thread, start: thread.used(), budget: l.TimePerCall, cancel: cancel}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cpu = time.AfterFunc(l.TimePerCall, w.checkCPU)
	w.wall = time.AfterFunc(l.WallPerCall, func() { cancel(errWallTime) })
	return w
}

func (w *watchdog) checkCPU() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	left := w.budget - (w.thread.used() - w.start)
	if left <= 0 {
		w.cancel(errCPUTime)
		return
	}
	w.cpu.Reset(max(left, minCheck))
}

// stop ends the watch and returns the CPU time the call used; it is
// called on the call's own thread.
func (w *watchdog) stop() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	w.cpu.Stop()
	w.wall.Stop()
	return w.thread.used() - w.start
}
