// Package procs runs a lightly loaded server's goroutines on one P, and
// gives it back the runtime's default as soon as its load grows. It also
// reads another process's CPU time from /proc (ReadStat), for the bench
// and the benchmarks that measure Postgres's backends.
//
// At light load the engine's goroutines wake one another several times
// per event (the publish request, its statement, the attempt, the
// receiver's answer, the record). With more than one P each wake-up of a
// goroutine while a P is idle makes the runtime wake a second thread
// (a futex call and a context switch) and its network reads park and
// return on different threads; on a virtual machine, where every system
// call and interrupt is dear, that was a third of the engine's CPU at
// 300 events/s (BENCHMARKS.md, November 28, second session). On one P
// the goroutine that readies another runs it next on the same thread.
// One P is wrong under load (one core for the Go code), so the governor
// reads the process's CPU time every Interval: it narrows to one P after
// Settle intervals in a row below Below cores, and widens back to the
// runtime's default (runtime.SetDefaultGOMAXPROCS, which also resumes
// the runtime's own tracking of the CPU quota) in the first interval
// above Above cores, which a process saturating its one P reaches.
//
// An operator's GOMAXPROCS variable is a decision already made: Enabled
// is false and the governor is not started.
package procs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"syscall"
	"time"

	"github.com/webhookd/webhookd/internal/clock"
)

// The governor's defaults: a quarter-second reading, narrowed after two
// seconds under 0.4 of a core, widened within a quarter second over 0.6.
// The band between them keeps a process whose load sits at the edge from
// switching back and forth: what costs 0.4 cores on two Ps costs about
// 0.27 on one (the wake-ups it saves), well below the widening mark.
const (
	DefaultInterval = 250 * time.Millisecond
	DefaultBelow    = 0.4
	DefaultAbove    = 0.6
	DefaultSettle   = 8
)

// Procs is the setting the governor changes: the runtime's GOMAXPROCS.
type Procs interface {
	// Narrow runs the process's goroutines on one P.
	Narrow()
	// Widen gives the process back the runtime's default number of Ps.
	Widen()
}

// Config configures a Governor. Zero fields take the defaults.
type Config struct {
	// Interval is how often the process's CPU time is read.
	Interval time.Duration
	// Below is the load, in cores, under which the process narrows to one
	// P once it has stayed there for Settle intervals in a row.
	Below float64
	// Above is the load, in cores, over which a narrowed process widens
	// again. It must be more than Below.
	Above float64
	// Settle is how many intervals in a row the load stays under Below
	// before the process narrows.
	Settle int
	// Clock tells the wall time between readings (default: the system's).
	Clock clock.Clock
	// CPUTime reads the process's CPU time, user and system (default:
	// getrusage of the process).
	CPUTime func() (time.Duration, error)
	// Procs is what the governor sets (default: the runtime's GOMAXPROCS).
	Procs Procs
	// Logger receives each change at debug level (default: discarded).
	Logger *slog.Logger
}

// Governor narrows a lightly loaded process to one P and widens it again
// under load. Its Run owns the setting; nothing else in the process
// changes GOMAXPROCS.
type Governor struct {
	cfg Config

	narrowed bool
	quiet    int       // intervals in a row under Below
	lastWall time.Time // zero before the first reading
	lastCPU  time.Duration
}

// New returns a Governor for cfg, its zero fields defaulted.
func New(cfg Config) (*Governor, error) {
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Below == 0 {
		cfg.Below = DefaultBelow
	}
	if cfg.Above == 0 {
		cfg.Above = DefaultAbove
	}
	if cfg.Settle == 0 {
		cfg.Settle = DefaultSettle
	}
	if cfg.Interval < 0 || cfg.Below < 0 || cfg.Settle < 0 {
		return nil, errors.New("procs: interval, below and settle must not be negative")
	}
	if cfg.Above <= cfg.Below {
		return nil, fmt.Errorf("procs: above (%v cores) must be more than below (%v cores)", cfg.Above, cfg.Below)
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.CPUTime == nil {
		cfg.CPUTime = processCPUTime
	}
	if cfg.Procs == nil {
		cfg.Procs = runtimeProcs{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Governor{cfg: cfg}, nil
}

// Enabled tells whether a governor should run in a process whose
// environment getenv reads: not when the operator set GOMAXPROCS, and not
// when the runtime gives the process one P already.
func Enabled(getenv func(string) string) bool {
	return getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) > 1
}

// Run reads the process's load every Interval and sets its Ps until ctx
// is done; it then gives the process back the runtime's default.
func (g *Governor) Run(ctx context.Context) error {
	ticker := time.NewTicker(g.cfg.Interval)
	defer ticker.Stop()
	defer func() {
		if g.narrowed {
			g.cfg.Procs.Widen()
		}
	}()
	for {
		if err := g.Observe(); err != nil {
			// A failed reading changes nothing; the next one may succeed.
			g.cfg.Logger.Debug("procs: read the process's CPU time", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// Observe takes one reading and narrows or widens the process as its
// load since the last reading says. The first reading only starts the
// count.
func (g *Governor) Observe() error {
	cpu, err := g.cfg.CPUTime()
	if err != nil {
		return fmt.Errorf("procs: %w", err)
	}
	now := g.cfg.Clock.Now()
	if g.lastWall.IsZero() {
		g.lastWall, g.lastCPU = now, cpu
		return nil
	}
	wall := now.Sub(g.lastWall)
	if wall <= 0 {
		return nil // a clock that stood still: wait for the next reading
	}
	cores := float64(cpu-g.lastCPU) / float64(wall)
	g.lastWall, g.lastCPU = now, cpu
	switch {
	case g.narrowed && cores > g.cfg.Above:
		g.narrowed, g.quiet = false, 0
		g.cfg.Procs.Widen()
		g.cfg.Logger.Debug("procs: widened to the runtime's default", "cores", cores)
	case !g.narrowed && cores < g.cfg.Below:
		g.quiet++
		if g.quiet >= g.cfg.Settle {
			g.narrowed = true
			g.cfg.Procs.Narrow()
			g.cfg.Logger.Debug("procs: narrowed to one P", "cores", cores)
		}
	case !g.narrowed:
		g.quiet = 0
	}
	return nil
}

// Narrowed tells whether the governor runs the process on one P.
func (g *Governor) Narrowed() bool { return g.narrowed }

// runtimeProcs is the runtime's GOMAXPROCS.
type runtimeProcs struct{}

func (runtimeProcs) Narrow() { runtime.GOMAXPROCS(1) }
func (runtimeProcs) Widen()  { runtime.SetDefaultGOMAXPROCS() }

// processCPUTime is the user and system time the process has used.
func processCPUTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
