package gcpace_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/gcpace"
)

const mib = 1 << 20

// TestPercentFor: the goal a percent gives reaches the floor, the percent
// is the least step that does, and a heap at half the floor or more keeps
// the runtime's default.
func TestPercentFor(t *testing.T) {
	for _, tc := range []struct {
		name        string
		live, floor uint64
		want        int
	}{
		{"no collection yet", 0, 64 * mib, 1000},
		{"a tiny heap, at the cap", 1 * mib, 64 * mib, 1000},
		{"16 MiB under a 64 MiB floor", 16 * mib, 64 * mib, 300},
		{"a byte more than 16 MiB still needs 300", 16*mib + 1, 64 * mib, 300},
		{"20 MiB", 20 * mib, 64 * mib, 250},
		{"28 MiB", 28 * mib, 64 * mib, 150},
		{"just under half the floor", 32*mib - 1, 64 * mib, 150},
		{"half the floor", 32 * mib, 64 * mib, 100},
		{"a heap above the floor", 1024 * mib, 64 * mib, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := gcpace.PercentFor(tc.live, tc.floor)
			if got != tc.want {
				t.Fatalf("PercentFor(%d, %d) = %d, want %d", tc.live, tc.floor, got, tc.want)
			}
			if tc.live > 0 && got < 1000 && tc.live*uint64(100+got)/100 < tc.floor && tc.live < tc.floor/2 {
				t.Fatalf("goal %d under the floor %d", tc.live*uint64(100+got)/100, tc.floor)
			}
		})
	}
}

// TestPacerSetsOnlyChanges: the pacer sets the percent its reading calls
// for, only when it changes, and gives back the default when it stops.
func TestPacerSetsOnlyChanges(t *testing.T) {
	live := uint64(16 * mib)
	var set []int
	p, err := gcpace.New(gcpace.Config{Interval: time.Hour, Floor: 64 * mib,
		LiveHeap:   func() uint64 { return live },
		SetPercent: func(v int) int { set = append(set, v); return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []uint64{16 * mib, 16 * mib, 16*mib + 4096, 28 * mib, 500 * mib, 500 * mib} {
		live = l
		p.Observe()
	}
	want := []int{300, 150, 100}
	if len(set) != len(want) {
		t.Fatalf("set %v, want %v", set, want)
	}
	for i := range want {
		if set[i] != want[i] {
			t.Fatalf("set %v, want %v", set, want)
		}
	}
	live = 16 * mib
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if got := set[len(set)-2:]; got[0] != 300 || got[1] != 100 {
		t.Fatalf("a stopped pacer's last settings %v, want [300 100]: the reading, then the default back", got)
	}
}

// TestEnabled: an operator's GOGC or GOMEMLIMIT turns the pacer off.
func TestEnabled(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{}, true},
		{map[string]string{"GOGC": "100"}, false},
		{map[string]string{"GOGC": "off"}, false},
		{map[string]string{"GOMEMLIMIT": "1GiB"}, false},
	} {
		if got := gcpace.Enabled(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Fatalf("Enabled with %v = %v, want %v", tc.env, got, tc.want)
		}
	}
}

// TestRuntimeLiveHeap: the default reading is the runtime's: with 40 MiB
// held live through a collection, the heap is past half the floor and
// keeps the runtime's default.
func TestRuntimeLiveHeap(t *testing.T) {
	p, err := gcpace.New(gcpace.Config{SetPercent: func(v int) int { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	held := make([]byte, 40*mib)
	for i := range held {
		held[i] = byte(i)
	}
	runtime.GC()
	p.Observe()
	runtime.KeepAlive(held)
	if p.Percent() != 100 {
		t.Fatalf("percent %d with 40 MiB live, want 100", p.Percent())
	}
}
