package main

import (
	"testing"
	"time"
)

// pollInterval is how long a wait pauses between two looks at the state it
// waits on: short beside the seconds the engine's reactions take, long
// enough that a wait for minutes does not keep a core busy.
const pollInterval = 20 * time.Millisecond

// eventually looks at cond until it holds or within has passed, and
// reports whether it held. Every wait of these tests on something the
// engine does comes through here (or waitFor), never through a fixed
// sleep: the engine is as slow as the machine it shares.
func eventually(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollInterval)
	}
	return true
}

// waitFor waits until cond holds, failing the test after within.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	if !eventually(within, cond) {
		t.Fatalf("timed out after %s waiting for %s", within, what)
	}
}
