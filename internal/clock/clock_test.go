package clock_test

import (
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/clock"
)

func TestOrDefaultsToTheSystemClock(t *testing.T) {
	fixed := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name  string
		given clock.Clock
		check func(time.Time) bool
	}{
		{"nil is the wall clock", nil, func(got time.Time) bool { return time.Since(got).Abs() < time.Minute }},
		{"a clock given is kept", clock.Func(func() time.Time { return fixed }), func(got time.Time) bool { return got.Equal(fixed) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := clock.Or(c.given).Now(); !c.check(got) {
				t.Fatalf("Now() = %v", got)
			}
		})
	}
}
