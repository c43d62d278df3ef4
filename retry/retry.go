// Package retry computes when a failed webhook delivery is attempted again.
//
// The functions are pure: no clock, no randomness, no I/O. The caller passes
// the current time and a jitter value (see [RandomJitter]) so that the
// schedule can be tested, and recomputed, exactly.
//
// The default schedule makes 15 attempts in total over about 54 hours: after
// attempt k (1 ≤ k ≤ 14) the next one comes min(5s·3^(k-1), 8h15m) later.
// Backing off fast at first rides out a receiver's brief blips in seconds;
// the cap keeps a receiver that is down for a day or two from waiting longer
// than a working day between tries once it is back.
package retry

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// Parameters of the default schedule.
const (
	// DefaultAttempts is the number of attempts of a delivery, the first included.
	DefaultAttempts = 15
	// DefaultBase is the delay after the first attempt.
	DefaultBase = 5 * time.Second
	// DefaultFactor multiplies each delay to get the next one.
	DefaultFactor = 3
	// DefaultCap bounds every delay. With 8 uncapped delays (5 s … 10935 s,
	// 16400 s in all) and 6 capped ones, the span is 16400 s + 6·29700 s =
	// 194600 s, 54 h 3 min 20 s: the "about 54 hours" of the spec.
	DefaultCap = 8*time.Hour + 15*time.Minute
)

// MaxJitter is the largest relative change jitter makes to a delay: ±10 %.
const MaxJitter = 0.10

// MaxDelay bounds one delay of a configured schedule. Events are kept for 30
// days, so a longer delay would schedule an attempt for an event already
// deleted; it also keeps every time computation far from overflow.
const MaxDelay = 30 * 24 * time.Hour

// ErrInvalidSchedule is wrapped by every error of [Parse].
var ErrInvalidSchedule = errors.New("retry: invalid schedule")

// Schedule is the list of delays between consecutive attempts of a delivery:
// Delays[k-1] separates attempt k from attempt k+1. A delivery is therefore
// attempted len(Delays)+1 times; the zero Schedule makes a single attempt.
type Schedule struct {
	Delays []time.Duration
}

// Default returns the default schedule (see the package doc). Each call
// returns a fresh slice, so callers may modify it without affecting others.
func Default() Schedule {
	delays := make([]time.Duration, DefaultAttempts-1)
	d := DefaultBase
	for i := range delays {
		delays[i] = min(d, DefaultCap)
		if d < DefaultCap { // stop multiplying once capped: no overflow
			d *= DefaultFactor
		}
	}
	return Schedule{Delays: delays}
}

// Parse reads a schedule written as a comma-separated list of Go durations,
// the form of WEBHOOKD_RETRY_SCHEDULE: "1s, 2s, 500ms" means 4 attempts.
// Spaces around items are ignored. Empty items, unparsable durations, and
// durations that are not positive or exceed [MaxDelay] are rejected, and the
// error names the item (1-based) and its text.
func Parse(s string) (Schedule, error) {
	if strings.TrimSpace(s) == "" {
		return Schedule{}, fmt.Errorf("%w: empty; give a comma-separated list of durations such as \"1s,2s\"", ErrInvalidSchedule)
	}
	items := strings.Split(s, ",")
	delays := make([]time.Duration, 0, len(items))
	for i, item := range items {
		item = strings.TrimSpace(item)
		if item == "" {
			return Schedule{}, fmt.Errorf("%w: item %d is empty", ErrInvalidSchedule, i+1)
		}
		d, err := time.ParseDuration(item)
		if err != nil {
			return Schedule{}, fmt.Errorf("%w: item %d %q: %w", ErrInvalidSchedule, i+1, item, err)
		}
		if d <= 0 {
			return Schedule{}, fmt.Errorf("%w: item %d %q: delay must be positive", ErrInvalidSchedule, i+1, item)
		}
		if d > MaxDelay {
			return Schedule{}, fmt.Errorf("%w: item %d %q: delay exceeds %s", ErrInvalidSchedule, i+1, item, MaxDelay)
		}
		delays = append(delays, d)
	}
	return Schedule{Delays: delays}, nil
}

// String formats s in the form [Parse] reads, for logs and error messages.
func (s Schedule) String() string {
	var b strings.Builder
	for i, d := range s.Delays {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(d.String())
	}
	return b.String()
}

// Attempts returns the number of attempts of a delivery, the first included.
func (s Schedule) Attempts() int { return len(s.Delays) + 1 }

// Span returns the time from the first attempt to the last one, jitter aside.
func (s Schedule) Span() time.Duration {
	var total time.Duration
	for _, d := range s.Delays {
		total += d
	}
	return total
}

// NextAttempt returns when attempt+1 is due, given that attempt (1-based)
// has just failed at now, and true; or false when attempt was the last one
// and the delivery has failed for good. An attempt below 1 means none has run
// yet: the first attempt is due at now.
//
// jitter, in [-1, 1], moves the delay by up to ±[MaxJitter]: the delay
// becomes delay·(1 + 0.1·jitter). Without it, every delivery that failed
// during an outage of a receiver would come back in lockstep, and the
// receiver would be hit by the whole backlog at once just as it recovers;
// jitter spreads them out. Pass [RandomJitter]() in production and a fixed
// value in tests. Values outside [-1, 1] are clamped and NaN counts as 0.
func (s Schedule) NextAttempt(attempt int, now time.Time, jitter float64) (time.Time, bool) {
	if attempt < 1 {
		return now, true
	}
	if attempt > len(s.Delays) {
		return time.Time{}, false
	}
	return now.Add(Jittered(s.Delays[attempt-1], jitter)), true
}

// Jittered returns d moved by jitter·[MaxJitter]·d, jitter clamped to [-1, 1].
// The offset is computed from d/10 in integer nanoseconds, so the bounds are
// exact: jitter ±1 gives d ± d/10 to the nanosecond.
func Jittered(d time.Duration, jitter float64) time.Duration {
	switch {
	case math.IsNaN(jitter):
		jitter = 0
	case jitter > 1:
		jitter = 1
	case jitter < -1:
		jitter = -1
	}
	maxOffset := d / 10 // MaxJitter, kept as an integer division for exactness
	return d + time.Duration(math.Round(float64(maxOffset)*jitter))
}

// RandomJitter returns a uniformly distributed jitter value in [-1, 1) for
// [Schedule.NextAttempt]. It uses the goroutine-safe global generator of
// math/rand/v2: jitter needs spread, not unpredictability.
func RandomJitter() float64 {
	return rand.Float64()*2 - 1
}
