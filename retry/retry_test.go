package retry_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/retry"
)

func TestDefaultDelays(t *testing.T) {
	const capped = 8*time.Hour + 15*time.Minute
	want := []time.Duration{
		5 * time.Second,     // after attempt 1
		15 * time.Second,    // 2
		45 * time.Second,    // 3
		135 * time.Second,   // 4: 2m15s
		405 * time.Second,   // 5: 6m45s
		1215 * time.Second,  // 6: 20m15s
		3645 * time.Second,  // 7: 1h0m45s
		10935 * time.Second, // 8: 3h2m15s, the last uncapped delay
		capped,              // 9: 5s·3^8 = 32805s would exceed the cap
		capped, capped, capped, capped,
		capped, // 14: after it comes attempt 15, the last
	}
	got := retry.Default().Delays
	if len(got) != 14 {
		t.Fatalf("Default has %d delays, want 14", len(got))
	}
	for k := range want {
		if got[k] != want[k] {
			t.Errorf("delay after attempt %d = %s, want %s", k+1, got[k], want[k])
		}
	}
}

func TestDefaultShape(t *testing.T) {
	s := retry.Default()
	if got := s.Attempts(); got != 15 {
		t.Errorf("Attempts = %d, want 15", got)
	}
	const wantSpan = 194600 * time.Second // 16400 s uncapped + 6 × 29700 s
	if got := s.Span(); got != wantSpan {
		t.Errorf("Span = %s, want %s", got, wantSpan)
	}
	if got := s.Span(); got < 53*time.Hour || got > 55*time.Hour {
		t.Errorf("Span = %s, want about 54 h", got)
	}
	// With every delay at +10 % the span stays within 60 h, at -10 % above 48 h.
	if hi := s.Span() + s.Span()/10; hi > 60*time.Hour {
		t.Errorf("maximum jittered span %s exceeds 60 h", hi)
	}
	if got := s.String(); !strings.HasPrefix(got, "5s,15s,45s,2m15s,") || !strings.HasSuffix(got, ",8h15m0s") {
		t.Errorf("String = %q", got)
	}
}

func TestDefaultReturnsAFreshSlice(t *testing.T) {
	a := retry.Default()
	a.Delays[0] = time.Hour
	if b := retry.Default(); b.Delays[0] != 5*time.Second {
		t.Errorf("modifying one Default() changed the next: %s", b.Delays[0])
	}
}

func TestNextAttempt(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	s := retry.Default()
	tests := []struct {
		name    string
		attempt int
		jitter  float64
		want    time.Time
		wantOK  bool
	}{
		{"no attempt yet: the first is due now", 0, 0, now, true},
		{"after attempt 1: 5 s", 1, 0, now.Add(5 * time.Second), true},
		{"after attempt 1, jitter +1: exactly +10 %", 1, 1, now.Add(5500 * time.Millisecond), true},
		{"after attempt 1, jitter -1: exactly -10 %", 1, -1, now.Add(4500 * time.Millisecond), true},
		{"after attempt 1, jitter +0.5: +5 %", 1, 0.5, now.Add(5250 * time.Millisecond), true},
		{"after attempt 8: 3h2m15s", 8, 0, now.Add(10935 * time.Second), true},
		{"after attempt 14: capped, attempt 15 follows", 14, 0, now.Add(8*time.Hour + 15*time.Minute), true},
		{"after attempt 14, jitter +1: cap + 10 %", 14, 1, now.Add(32670 * time.Second), true},
		{"after attempt 14, jitter -1: cap - 10 %", 14, -1, now.Add(26730 * time.Second), true},
		{"jitter above 1 is clamped", 1, 7, now.Add(5500 * time.Millisecond), true},
		{"jitter below -1 is clamped", 1, -7, now.Add(4500 * time.Millisecond), true},
		{"NaN jitter counts as none", 1, math.NaN(), now.Add(5 * time.Second), true},
		{"after attempt 15 nothing is left", 15, 0, time.Time{}, false},
		{"nor after any later number", 99, 0, time.Time{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := s.NextAttempt(tt.attempt, now, tt.jitter)
			if ok != tt.wantOK || !got.Equal(tt.want) {
				t.Errorf("NextAttempt(%d, now, %v) = %s, %v; want %s, %v", tt.attempt, tt.jitter, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestJitterStaysWithinTenPercent(t *testing.T) {
	for _, d := range retry.Default().Delays {
		lo, hi := d-d/10, d+d/10
		for _, j := range []float64{-1, -0.999, -0.5, 0, 0.5, 0.999, 1} {
			if got := retry.Jittered(d, j); got < lo || got > hi {
				t.Errorf("Jittered(%s, %v) = %s, outside [%s, %s]", d, j, got, lo, hi)
			}
		}
		for range 1000 {
			j := retry.RandomJitter()
			if j < -1 || j > 1 {
				t.Fatalf("RandomJitter = %v, outside [-1, 1]", j)
			}
			if got := retry.Jittered(d, j); got < lo || got > hi {
				t.Fatalf("Jittered(%s, %v) = %s, outside [%s, %s]", d, j, got, lo, hi)
			}
		}
	}
}

func TestAWholeDeliveryRunsFifteenAttempts(t *testing.T) {
	s := retry.Default()
	start := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	now, attempts := start, 1
	for {
		next, ok := s.NextAttempt(attempts, now, 0)
		if !ok {
			break
		}
		now, attempts = next, attempts+1
	}
	if attempts != 15 || now.Sub(start) != s.Span() {
		t.Errorf("ran %d attempts over %s; want 15 over %s", attempts, now.Sub(start), s.Span())
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []time.Duration
		wantErr string // substring of the error; "" means valid
	}{
		{"two delays", "1s,2s", []time.Duration{time.Second, 2 * time.Second}, ""},
		{"one delay", "30s", []time.Duration{30 * time.Second}, ""},
		{"spaces around items", " 1s , 2s,500ms ", []time.Duration{time.Second, 2 * time.Second, 500 * time.Millisecond}, ""},
		{"compound durations", "1h30m,8h15m0s", []time.Duration{90 * time.Minute, 8*time.Hour + 15*time.Minute}, ""},
		{"longest allowed delay", "720h", []time.Duration{720 * time.Hour}, ""},
		{"empty string", "", nil, "empty"},
		{"only spaces", "   ", nil, "empty"},
		{"zero delay", "0s", nil, `item 1 "0s": delay must be positive`},
		{"negative delay", "1s,-2s", nil, `item 2 "-2s": delay must be positive`},
		{"not a duration", "abc", nil, `item 1 "abc"`},
		{"number without unit", "1s,5", nil, `item 2 "5"`},
		{"empty item in the middle", "1s,,2s", nil, "item 2 is empty"},
		{"trailing comma", "1s,2s,", nil, "item 3 is empty"},
		{"delay beyond the retention", "721h", nil, `item 1 "721h": delay exceeds 720h0m0s`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := retry.Parse(tt.in)
			if tt.wantErr == "" {
				if err != nil || !slices.Equal(got.Delays, tt.want) {
					t.Fatalf("Parse(%q) = %v, %v; want %v, nil", tt.in, got.Delays, err, tt.want)
				}
				return
			}
			if !errors.Is(err, retry.ErrInvalidSchedule) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Parse(%q) error = %v; want ErrInvalidSchedule mentioning %q", tt.in, err, tt.wantErr)
			}
		})
	}
}

func TestParsedScheduleAttempts(t *testing.T) {
	s, err := retry.Parse("1s,2s")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Attempts(); got != 3 {
		t.Errorf("Attempts = %d, want 3 (two delays, three attempts)", got)
	}
	now := time.Unix(0, 0)
	if _, ok := s.NextAttempt(3, now, 0); ok {
		t.Error("NextAttempt after attempt 3 of 3 = true, want false")
	}
	if next, ok := s.NextAttempt(2, now, 0); !ok || next != now.Add(2*time.Second) {
		t.Errorf("NextAttempt(2) = %s, %v; want +2s, true", next, ok)
	}
}

func TestStringRoundTrips(t *testing.T) {
	for _, s := range []retry.Schedule{retry.Default(), {Delays: []time.Duration{time.Millisecond, 90 * time.Minute}}} {
		back, err := retry.Parse(s.String())
		if err != nil || !slices.Equal(back.Delays, s.Delays) {
			t.Errorf("Parse(%q) = %v, %v; want the same delays", s.String(), back.Delays, err)
		}
	}
}

func TestZeroScheduleMakesOneAttempt(t *testing.T) {
	var s retry.Schedule
	if s.Attempts() != 1 || s.Span() != 0 {
		t.Errorf("zero Schedule: %d attempts over %s; want 1 over 0s", s.Attempts(), s.Span())
	}
	if _, ok := s.NextAttempt(1, time.Now(), 0); ok {
		t.Error("zero Schedule schedules a retry")
	}
}

func BenchmarkNextAttempt(b *testing.B) {
	s := retry.Default()
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		_, _ = s.NextAttempt(i%16, now, 0.37)
	}
}
