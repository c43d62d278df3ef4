package main

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestDiskProbeTimesFlushesAndLeavesNothing: the probe times writes and
// flushes in a file of its own in the directory given until stopped, then
// removes that file.
func TestDiskProbeTimesFlushesAndLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	stop, err := diskProbe{dir: dir, interval: time.Millisecond}.start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Wait for the probe's file to hold a block: at least one flush ran.
	deadline := time.Now().Add(10 * time.Second)
	for {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) == 1 {
			if info, err := entries[0].Info(); err == nil && info.Size() == diskProbeBlock {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no probe file of %d bytes in %s within 10 s: %v", diskProbeBlock, dir, entries)
		}
		time.Sleep(time.Millisecond)
	}
	flushes, err := stop()
	if err != nil {
		t.Fatal(err)
	}
	if len(flushes) == 0 {
		t.Fatal("no flush timed")
	}
	for i, d := range flushes {
		if d <= 0 {
			t.Errorf("flush %d took %s", i, d)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the probe left %v in %s", entries, dir)
	}
}

// TestDiskProbeRefusesAMissingDirectory: a directory that cannot hold the
// probe's file fails the run before it is measured, rather than leaving
// its latency without the disk's figures.
func TestDiskProbeRefusesAMissingDirectory(t *testing.T) {
	if _, err := (diskProbe{dir: t.TempDir() + "/missing", interval: time.Millisecond}).start(context.Background()); err == nil {
		t.Fatal("a probe in a missing directory started")
	}
}

// TestReportDiskFlushes: the flushes' percentiles, longest and the count
// of stalls (10 ms or more), or a note when none was timed.
func TestReportDiskFlushes(t *testing.T) {
	cases := []struct {
		name    string
		flushes []time.Duration
		want    map[string]any
		note    bool
	}{
		{name: "none timed", note: true},
		{
			name:    "a quiet disk",
			flushes: []time.Duration{300 * time.Microsecond, 200 * time.Microsecond, 400 * time.Microsecond},
			want: map[string]any{"disk_flushes": 3, "disk_flush_p50_ms": 0.3, "disk_flush_p99_ms": 0.4,
				"disk_flush_max_ms": 0.4, "disk_flushes_10ms_or_more": 0},
		},
		{
			name: "a disk that stalls",
			flushes: []time.Duration{time.Millisecond, 10 * time.Millisecond, time.Millisecond, 1300 * time.Millisecond,
				time.Millisecond},
			want: map[string]any{"disk_flushes": 5, "disk_flush_p50_ms": 1.0, "disk_flush_p99_ms": 1300.0,
				"disk_flush_max_ms": 1300.0, "disk_flushes_10ms_or_more": 2},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &report{}
			reportDiskFlushes(r, tc.flushes)
			if got := len(r.notes) > 0; got != tc.note {
				t.Errorf("note %v, want %v: %v", got, tc.note, r.notes)
			}
			if len(r.figures) != len(tc.want) {
				t.Errorf("%d figures, want %d: %v", len(r.figures), len(tc.want), r.figures)
			}
			for key, want := range tc.want {
				if got, ok := r.get(key); !ok || got != want {
					t.Errorf("%s = %v (%v), want %v", key, got, ok, want)
				}
			}
		})
	}
}
