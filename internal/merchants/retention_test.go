package merchants_test

import (
	"strconv"
	"testing"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/merchants"
)

func TestParseRetentionDays(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want int // 0: refused
	}{
		{"1", 1}, {"7", 7}, {"30", 30}, {"07", 7},
		{"0", 0}, {"31", 0}, {"-1", 0}, {"2.5", 0}, {"1e1", 0}, {`"7"`, 0}, {"null", 0}, {"true", 0},
		{"", 0}, {" 7", 0}, {"100", 0}, {"[7]", 0},
	} {
		got, err := merchants.ParseRetentionDays([]byte(tc.raw))
		if tc.want == 0 {
			if e := invalid.As(err); e == nil || e.Param != "retention_days" {
				t.Errorf("ParseRetentionDays(%s) = %d, %v; want a refusal of retention_days", tc.raw, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseRetentionDays(%s) = %d, %v; want %d", tc.raw, got, err, tc.want)
		}
	}
}

// FuzzParseRetentionDays: whatever the text, the answer is a day count
// within the bounds or a refusal, and an accepted one is its own number.
func FuzzParseRetentionDays(f *testing.F) {
	for _, s := range []string{"1", "30", "31", "2.5", `"7"`, "1e1", "-0"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		days, err := merchants.ParseRetentionDays(raw)
		if err != nil {
			if invalid.As(err) == nil {
				t.Fatalf("refusal %v is not an invalid.Error", err)
			}
			return
		}
		if n, convErr := strconv.Atoi(string(raw)); convErr != nil || n != days || days < 1 || days > 30 {
			t.Fatalf("ParseRetentionDays(%q) = %d", raw, days)
		}
	})
}
