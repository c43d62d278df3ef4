// Package gcpace keeps a small heap from being collected many times a
// second: it sets the collector's percent so that the heap goal is at
// least a floor.
//
// The runtime starts a collection when the heap reaches its goal, the
// live heap times 1 + GOGC/100. The engine's live heap is small (16–28 MB
// at full speed on one process, BENCHMARKS.md, November 28, sixth
// session), so at the default GOGC of 100 it collected ten times a second
// there, 11 % of its CPU. With the goal held at no less than Floor (64 MiB
// by default) a small heap is collected a third as often; a heap whose
// live part is already half the floor or more keeps the default percent,
// so the floor adds at most Floor to the process's memory and never
// multiplies a large heap.
//
// An operator's GOGC or GOMEMLIMIT variable is a decision already made:
// Enabled is false and the pacer is not started.
package gcpace

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The pacer's defaults: a reading a second, a floor of 64 MiB, percents
// from the runtime's default to ten times it, in steps of 50.
const (
	DefaultInterval = time.Second
	DefaultFloor    = 64 << 20
	// minPercent is the runtime's default, which a large heap keeps.
	minPercent = 100
	// maxPercent bounds the percent for a heap that is nearly empty (a
	// process just started), whose goal then grows with it.
	maxPercent = 1000
	// step rounds the percent up, so that a live heap that wavers does
	// not change it at every reading.
	step = 50
)

// Config configures a Pacer. Zero fields take the defaults.
type Config struct {
	// Interval is how often the live heap is read.
	Interval time.Duration
	// Floor is the least heap goal, in bytes.
	Floor uint64
	// LiveHeap reads the bytes the last collection found live (default:
	// the runtime's /gc/heap/live:bytes).
	LiveHeap func() uint64
	// SetPercent sets the collector's percent and returns the previous
	// one (default: debug.SetGCPercent).
	SetPercent func(int) int
	// Logger receives each change at debug level (default: discarded).
	Logger *slog.Logger
}

// Pacer holds the heap goal at no less than its floor. Its Run owns the
// collector's percent; nothing else in the process changes it.
type Pacer struct {
	cfg     Config
	percent int // the percent set; 0 before the first reading
}

// Enabled tells whether a pacer should run in a process whose environment
// getenv reads: not when the operator set GOGC or GOMEMLIMIT.
func Enabled(getenv func(string) string) bool {
	return getenv("GOGC") == "" && getenv("GOMEMLIMIT") == ""
}

// New returns a Pacer for cfg, its zero fields defaulted.
func New(cfg Config) (*Pacer, error) {
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Floor == 0 {
		cfg.Floor = DefaultFloor
	}
	if cfg.Interval < 0 {
		return nil, errors.New("gcpace: the interval must not be negative")
	}
	if cfg.LiveHeap == nil {
		cfg.LiveHeap = runtimeLiveHeap
	}
	if cfg.SetPercent == nil {
		cfg.SetPercent = debug.SetGCPercent
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Pacer{cfg: cfg}, nil
}

// Run reads the live heap every Interval and sets the percent until ctx
// is done; it then gives the process back the runtime's default.
func (p *Pacer) Run(ctx context.Context) error {
	ticker := time.NewTicker(p.cfg.Interval)
	defer ticker.Stop()
	defer func() {
		if p.percent != 0 && p.percent != minPercent {
			p.cfg.SetPercent(minPercent)
		}
	}()
	for {
		p.Observe()
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// Observe takes one reading and sets the percent it calls for, when that
// differs from the one set.
func (p *Pacer) Observe() {
	want := PercentFor(p.cfg.LiveHeap(), p.cfg.Floor)
	if want == p.percent {
		return
	}
	p.cfg.SetPercent(want)
	p.cfg.Logger.Debug("gcpace: set the collector's percent", "percent", want, "previous", p.percent)
	p.percent = want
}

// Percent is the percent set, 0 before the first reading.
func (p *Pacer) Percent() int { return p.percent }

// PercentFor is the least percent, rounded up to a step, whose goal
// (live × (1 + percent/100)) reaches floor, between the runtime's default
// and ten times it. A live heap of 0 (no collection yet) takes the most.
func PercentFor(live, floor uint64) int {
	if live == 0 {
		return maxPercent
	}
	if live >= floor/2 {
		return minPercent
	}
	// floor ≤ live × (1 + p/100) ⇔ p ≥ 100 × (floor − live) / live.
	need := (100*(floor-live) + live - 1) / live
	percent := int((need + step - 1) / step * step)
	return min(max(percent, minPercent), maxPercent)
}

// runtimeLiveHeap is the runtime's count of the heap bytes the last
// collection marked live.
func runtimeLiveHeap() uint64 {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return sample[0].Value.Uint64()
}
