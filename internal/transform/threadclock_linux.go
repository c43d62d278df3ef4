package transform

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/webhookd/webhookd/internal/clock"
)

// threadClock reads the CPU time of one OS thread, from any thread: the
// kernel's per-thread CPU clock (clock_gettime on the clock id
// MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED) of linux/posix-timers.h).
type threadClock struct {
	id int32
	// clock and start are the fallback, should the kernel's clock not be
	// read: wall time on the engine's clock.
	clock clock.Clock
	start time.Time
}

// currentThread is the clock of the calling goroutine's thread, which the
// caller has locked (runtime.LockOSThread).
func currentThread(clk clock.Clock) threadClock {
	tid := int32(unix.Gettid())
	return threadClock{id: (^tid)<<3 | 6, clock: clk, start: clk.Now()}
}

// used is the thread's CPU time; the wall time since currentThread when
// the kernel will not tell.
func (c threadClock) used() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(c.id, &ts); err != nil {
		return c.clock.Now().Sub(c.start)
	}
	return time.Duration(ts.Nano())
}
