// Package sysmon keeps the Go runtime's system monitor from polling every
// 20 µs whenever a lightly loaded server wakes up.
//
// The runtime's monitor thread (sysmon) sleeps while every P is idle and
// is woken by the next system call; each such wake resets its poll
// interval to 20 µs, which it doubles only after 1 ms without work to
// retake. A server at light load goes idle and wakes several times per
// request, so its monitor spends most of its time at 20 µs: tens of
// thousands of sleeps and context switches a second. At 300 events/s that
// was a quarter of the engine's CPU (BENCHMARKS.md, November 28). With
// GODEBUG's schedtrace set the monitor never takes that deep sleep, so
// nothing resets its interval, which then stays at its 10 ms ceiling
// unless it has Ps to retake, as under steady load. What the runtime
// does at 10 ms instead of 20 µs (retake a P from a goroutine blocked in
// a system call when others wait for it, preempt a goroutine running
// for over 10 ms) waits at most 10 ms more; the engine's I/O goes through
// the network poller, not blocking calls.
//
// schedtrace's own output, a line of scheduler state on standard error
// every that many milliseconds, comes at the largest period the runtime
// takes (24.8 days, counted from the machine's boot), and its detailed
// form before the goroutine dump of a fatal error. GODEBUG can only be
// set before the runtime starts (a //go:debug directive refuses this
// setting), so the server commands execute themselves again with it.
package sysmon

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// Setting is what the server commands add to GODEBUG.
const Setting = "schedtrace=2147483647"

// Environ returns environ with Setting added to its GODEBUG, and whether
// it added it. A GODEBUG that sets schedtrace already is the operator's
// choice (schedtrace=0 turns this off) and is kept as it is.
func Environ(environ []string) ([]string, bool) {
	out := make([]string, 0, len(environ)+1)
	found := false
	for _, kv := range environ {
		value, ok := strings.CutPrefix(kv, "GODEBUG=")
		if !ok {
			out = append(out, kv)
			continue
		}
		if found {
			continue // the runtime reads the first; so does this
		}
		found = true
		for _, setting := range strings.Split(value, ",") {
			if strings.HasPrefix(strings.TrimSpace(setting), "schedtrace=") {
				return environ, false
			}
		}
		if strings.TrimSpace(value) == "" {
			out = append(out, "GODEBUG="+Setting)
		} else {
			out = append(out, "GODEBUG="+value+","+Setting)
		}
	}
	if !found {
		out = append(out, "GODEBUG="+Setting)
	}
	return out, true
}

// Reexec replaces the process with its own executable, same arguments,
// under Environ's environment, unless that would change nothing. It
// returns nil without executing anything when the environment has the
// setting already, and an error when the executable cannot be found or
// executed (the caller runs on without the setting).
func Reexec() error {
	env, changed := Environ(os.Environ())
	if !changed {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("sysmon: find the executable: %w", err)
	}
	if err := syscall.Exec(exe, os.Args, env); err != nil {
		return fmt.Errorf("sysmon: execute %s again with GODEBUG=%s: %w", exe, Setting, err)
	}
	return nil // not reached: Exec returns only on failure
}
