package procs_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/procs"
)

// recordedProcs counts what the governor asked of the runtime.
type recordedProcs struct{ calls []string }

func (r *recordedProcs) Narrow() { r.calls = append(r.calls, "narrow") }
func (r *recordedProcs) Widen()  { r.calls = append(r.calls, "widen") }

// readings feeds a governor a process load per interval: each reading is
// a quarter second of wall time later, the CPU time grown by cores ×
// that quarter second.
type readings struct {
	now time.Time
	cpu time.Duration
}

func (r *readings) step(cores float64) {
	r.now = r.now.Add(procs.DefaultInterval)
	r.cpu += time.Duration(cores * float64(procs.DefaultInterval))
}

// TestGovernor: the process narrows to one P only after two seconds
// under 0.4 of a core, and widens in the first quarter second over 0.6.
func TestGovernor(t *testing.T) {
	t.Parallel()
	quiet := func(n int) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = 0.2
		}
		return out
	}
	cat := func(parts ...[]float64) []float64 {
		var out []float64
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		loads []float64 // cores, one per interval after the first reading
		want  string    // the calls made, in order
	}{
		{"idle from the start narrows after Settle intervals", quiet(8), "narrow"},
		{"one interval short of Settle stays wide", quiet(7), ""},
		{"a busy interval restarts the count", cat(quiet(7), []float64{0.5}, quiet(7)), ""},
		{"the load between the marks changes nothing", []float64{0.5, 0.5, 0.45, 0.55, 0.5, 0.5, 0.5, 0.5, 0.5}, ""},
		{"narrowed, a load under the upper mark stays narrowed", cat(quiet(8), []float64{0.45, 0.59, 0.3}), "narrow"},
		{"narrowed, a burst widens at once", cat(quiet(8), []float64{0.95}), "narrow widen"},
		{"widened, narrowing waits for Settle again", cat(quiet(8), []float64{0.95}, quiet(7)), "narrow widen"},
		{"and narrows after it", cat(quiet(8), []float64{0.95}, quiet(8)), "narrow widen narrow"},
		{"a steady load stays wide", []float64{1.2, 1.5, 1.1, 0.9, 1.3, 1.6, 1.2, 1.4, 1.1}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := &readings{now: time.Date(2026, 11, 28, 2, 0, 0, 0, time.UTC), cpu: time.Second}
			rec := &recordedProcs{}
			g, err := procs.New(procs.Config{
				Clock:   clock.Func(func() time.Time { return r.now }),
				CPUTime: func() (time.Duration, error) { return r.cpu, nil },
				Procs:   rec,
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Observe(); err != nil { // the first reading starts the count
				t.Fatal(err)
			}
			for _, load := range tc.loads {
				r.step(load)
				if err := g.Observe(); err != nil {
					t.Fatal(err)
				}
			}
			if got := strings.Join(rec.calls, " "); got != tc.want {
				t.Fatalf("calls = %q, want %q", got, tc.want)
			}
			if want := strings.HasSuffix(tc.want, "narrow"); g.Narrowed() != want {
				t.Fatalf("Narrowed() = %v, want %v", g.Narrowed(), want)
			}
		})
	}
}

// TestNewRejectsAnInvertedBand: the upper mark must be above the lower,
// or a process would switch at every reading.
func TestNewRejectsAnInvertedBand(t *testing.T) {
	t.Parallel()
	for _, cfg := range []procs.Config{
		{Below: 0.6, Above: 0.4},
		{Below: 0.5, Above: 0.5},
		{Interval: -time.Second},
	} {
		if _, err := procs.New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

// TestEnabled: an operator's GOMAXPROCS is left alone.
func TestEnabled(t *testing.T) {
	t.Parallel()
	env := func(v string) func(string) string {
		return func(name string) string {
			if name == "GOMAXPROCS" {
				return v
			}
			return ""
		}
	}
	if procs.Enabled(env("2")) {
		t.Error("Enabled with GOMAXPROCS=2 set by the operator")
	}
	if want := runtime.GOMAXPROCS(0) > 1; procs.Enabled(env("")) != want {
		t.Errorf("Enabled without GOMAXPROCS = %v, want %v (GOMAXPROCS is %d)", !want, want, runtime.GOMAXPROCS(0))
	}
}

// TestRunSetsTheRuntime drives the real runtime: an idle process runs on
// one P, a busy one gets the runtime's default back, and so does the
// process when the governor stops. It starts from one P more than the
// default, so that narrowing shows on a machine of one CPU too. Not
// parallel: it changes the test binary's GOMAXPROCS.
func TestRunSetsTheRuntime(t *testing.T) {
	runtime.SetDefaultGOMAXPROCS()
	wide := runtime.GOMAXPROCS(0)
	t.Cleanup(runtime.SetDefaultGOMAXPROCS)
	runtime.GOMAXPROCS(wide + 1)
	r := &readings{now: time.Date(2026, 11, 28, 2, 0, 0, 0, time.UTC)}
	load := make(chan float64)
	g, err := procs.New(procs.Config{
		Interval: time.Millisecond,
		Clock:    clock.Func(func() time.Time { return r.now }),
		CPUTime: func() (time.Duration, error) {
			select {
			case cores := <-load:
				r.step(cores)
			default: // between the test's loads, time stands still
			}
			return r.cpu, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	waitFor := func(what string, want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for runtime.GOMAXPROCS(0) != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: GOMAXPROCS = %d, want %d", what, runtime.GOMAXPROCS(0), want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// One more than Settle: the first reading may take a load and only
	// start the count.
	for range procs.DefaultSettle + 1 {
		load <- 0.1
	}
	waitFor("idle", 1)
	load <- 1.0
	waitFor("busy", wide)
	for range procs.DefaultSettle {
		load <- 0.1
	}
	waitFor("idle again", 1)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != wide {
		t.Fatalf("after Run: GOMAXPROCS = %d, want the default %d", got, wide)
	}
}
