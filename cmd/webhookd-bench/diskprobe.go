package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// diskProbe times what every commit waits for, an 8 KiB write and its
// flush to the disk, in dir every interval while a run is measured
// (-disk-probe). webhookd answers a publish once its event is committed,
// and starts the first attempt then, so a flush that takes a second holds
// every publish behind it for that second whatever the engine does: with
// the probe's figures beside it, a run's p99 publish → arrival tells the
// engine's delay from the disk's.
type diskProbe struct {
	// dir is a directory on the disk whose flushes are timed: the one
	// Postgres writes its WAL to.
	dir string
	// interval is the pause between two flushes.
	interval time.Duration
}

// diskProbeInterval is the probe's pause between flushes: a hundred
// flushes a second find a stall of 10 ms or more, and add no load a disk
// that carries the run's commits would notice.
const diskProbeInterval = 10 * time.Millisecond

// diskProbeBlock is what each probe writes before its flush: one WAL page.
const diskProbeBlock = 8 << 10

// start begins timing flushes in a file of its own in p.dir; stop ends
// the probe, removes the file and returns every flush's duration.
func (p diskProbe) start(ctx context.Context) (stop func() ([]time.Duration, error), err error) {
	f, err := os.CreateTemp(p.dir, "webhookd-bench-disk-probe-*")
	if err != nil {
		return nil, fmt.Errorf("disk probe: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var flushes []time.Duration
	var flushErr error
	go func() {
		defer close(done)
		block := make([]byte, diskProbeBlock)
		tick := time.NewTicker(p.interval)
		defer tick.Stop()
		for {
			started := time.Now()
			if _, err := f.WriteAt(block, 0); err != nil {
				flushErr = fmt.Errorf("disk probe: write: %w", err)
				return
			}
			if err := f.Sync(); err != nil {
				flushErr = fmt.Errorf("disk probe: flush: %w", err)
				return
			}
			flushes = append(flushes, time.Since(started))
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() ([]time.Duration, error) {
		cancel()
		<-done
		return flushes, errors.Join(flushErr, f.Close(), os.Remove(f.Name()))
	}, nil
}

// diskSlowFlush is the flush time the probe counts as a stall: the whole
// p99 publish → arrival the light-load bench aims at (BENCHMARKS.md).
const diskSlowFlush = 10 * time.Millisecond

// reportDiskFlushes adds what the probe measured: the flushes' p50, p99
// and longest, and how many took diskSlowFlush or longer.
func reportDiskFlushes(r *report, flushes []time.Duration) {
	if len(flushes) == 0 {
		r.note("disk probe: no flush timed")
		return
	}
	slow := 0
	for _, d := range flushes {
		if d >= diskSlowFlush {
			slow++
		}
	}
	s := summarize(flushes)
	r.add("disk_flushes", s.N, "flushes")
	r.add("disk_flush_p50_ms", ms(s.P50), "ms")
	r.add("disk_flush_p99_ms", ms(s.P99), "ms")
	r.add("disk_flush_max_ms", ms(s.Max), "ms")
	r.add("disk_flushes_10ms_or_more", slow, "flushes")
}
