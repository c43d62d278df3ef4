package admin_test

import "time"

// pollEvery is how often eventually asks again.
const pollEvery = 20 * time.Millisecond

// eventually waits until done holds, asking it at once and then every
// pollEvery, and tells whether it held within the time given: the one way
// the admin tests wait for something another goroutine or process does (a
// worker's attempt, a listener's end, a refusal kept). The caller fails
// the test, saying what it found instead.
func eventually(within time.Duration, done func() bool) bool {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for !done() {
		select {
		case <-tick.C:
		case <-deadline.C:
			return done()
		}
	}
	return true
}
