package receiver_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/receiver"
)

// TestParseTimestamp: only the canonical decimal Unix seconds are read, so
// that the header text is exactly what the sender signed.
func TestParseTimestamp(t *testing.T) {
	t.Parallel()
	ts := strconv.Itoa(vectorTimestamp)
	for _, tt := range []struct {
		name, in string
		ok       bool
	}{
		{"Unix seconds", ts, true},
		{"zero", "0", true},
		{"fifteen digits", strings.Repeat("9", 15), true},
		{"empty", "", false},
		{"not a number", "yesterday", false},
		{"RFC 3339", "2021-02-26T15:02:10Z", false},
		{"plus sign", "+" + ts, false},
		{"leading zero", "0" + ts, false},
		{"negative", "-1", false},
		{"fractional", ts + ".5", false},
		{"leading space", " " + ts, false},
		{"sixteen digits", strings.Repeat("9", 16), false},
		{"beyond int64", "99999999999999999999", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := receiver.ParseTimestamp(tt.in)
			if !tt.ok {
				if !errors.Is(err, receiver.ErrInvalidTimestamp) {
					t.Fatalf("ParseTimestamp(%q) = %v, %v; want ErrInvalidTimestamp", tt.in, got, err)
				}
				return
			}
			if err != nil || receiver.FormatTimestamp(got) != tt.in {
				t.Fatalf("ParseTimestamp(%q) = %v, %v; want a time FormatTimestamp writes back as %q", tt.in, got, err, tt.in)
			}
		})
	}
	if got := receiver.FormatTimestamp(time.Unix(vectorTimestamp, 999_999_999)); got != ts {
		t.Errorf("FormatTimestamp keeps whole seconds only: %q, want %q", got, ts)
	}
}
