package retry_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/retry"
)

// FuzzParse feeds arbitrary WEBHOOKD_RETRY_SCHEDULE values to Parse. It
// must never panic; a refusal wraps ErrInvalidSchedule; an accepted
// schedule has one delay per comma-separated item, each in (0, MaxDelay],
// and formats back to a text that Parse reads as the same delays.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"1s,2s", " 1s , 500ms ", retry.Default().String(), "720h", "720h0m0.000000001s", "0s", "-1s", "1s,,2s",
		"1s,", "", " ", "1", "1d", "9223372036854775807ns", "9223372036854775808ns", "1.5h,90m", "1µs,1us",
		"0.0000000001s", "1e3s", "1h\x002s", "\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := retry.Parse(text)
		if err != nil {
			if !errors.Is(err, retry.ErrInvalidSchedule) {
				t.Fatalf("Parse(%q) error %v does not wrap ErrInvalidSchedule", text, err)
			}
			return
		}
		if n := strings.Count(text, ",") + 1; len(s.Delays) != n || s.Attempts() != n+1 {
			t.Fatalf("Parse(%q) = %d delays, want %d", text, len(s.Delays), n)
		}
		var span time.Duration
		for _, d := range s.Delays {
			if d <= 0 || d > retry.MaxDelay {
				t.Fatalf("Parse(%q) accepted delay %v", text, d)
			}
			span += d
		}
		if span != s.Span() {
			t.Fatalf("Span() = %v, want %v", s.Span(), span)
		}
		again, err := retry.Parse(s.String())
		if err != nil {
			t.Fatalf("Parse(%q) refused its own String %q: %v", text, s.String(), err)
		}
		if again.String() != s.String() || len(again.Delays) != len(s.Delays) {
			t.Fatalf("%q re-formats as %q, which reads as %q", text, s.String(), again.String())
		}
		for i := range s.Delays {
			if again.Delays[i] != s.Delays[i] {
				t.Fatalf("delay %d of %q: %v, read back as %v", i+1, text, s.Delays[i], again.Delays[i])
			}
		}
	})
}
