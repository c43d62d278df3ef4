package subscriptions

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/internal/invalid"
)

var v1Names = RetryPolicyNames{Timeout: "timeout_seconds"}

func TestParseRetryPolicy(t *testing.T) {
	t.Parallel()
	fourteen := `["1s","1s","1s","1s","1s","1s","1s","1s","1s","1s","1s","1s","1s","1s"]`
	for _, tc := range []struct {
		raw      string
		schedule []int64 // nil: the engine's
		timeout  int
		none     bool   // the engine's policy (nil)
		param    string // refused under this name; "" for accepted
		rule     string
	}{
		{raw: `null`, none: true},
		{raw: `{}`, none: true},
		{raw: `{"schedule": null, "timeout_seconds": null}`, none: true},
		{raw: `{"schedule": ["5s", "1m", "2h", "1d"]}`, schedule: []int64{5, 60, 7200, 86400}},
		{raw: `{"schedule": ["90s", "1h30m", "1d2h3m4s"], "timeout_seconds": 10}`, schedule: []int64{90, 5400, 93784}, timeout: 10},
		{raw: `{"schedule": []}`, schedule: []int64{}},
		{raw: `{"timeout_seconds": 1}`, timeout: 1},
		{raw: `{"timeout_seconds": 25}`, timeout: 25},
		{raw: `{"schedule": ["30d"]}`, schedule: []int64{30 * 86400}},
		{raw: `{"schedule": ` + fourteen + `}`, schedule: slices.Repeat([]int64{1}, 14)},
		// Refused, each under the exact field.
		{raw: `"5s"`, param: "retry_policy", rule: "retry_policy_invalid"},
		{raw: `[]`, param: "retry_policy", rule: "retry_policy_invalid"},
		{raw: `{"schedule": [], "max_attempts": 3}`, param: "retry_policy", rule: "retry_policy_field_unknown"},
		{raw: `{"timeoutSeconds": 3}`, param: "retry_policy", rule: "retry_policy_field_unknown"},
		{raw: `{"schedule": "5s,1m"}`, param: "retry_policy.schedule", rule: "retry_schedule_invalid"},
		{raw: `{"schedule": ` + strings.Replace(fourteen, `[`, `["1s",`, 1) + `}`, param: "retry_policy.schedule", rule: "retry_schedule_too_long"},
		{raw: `{"schedule": ["5s", "1m", "1h", "1.5h"]}`, param: "retry_policy.schedule[3]", rule: "retry_delay_invalid"},
		{raw: `{"schedule": ["5s", 60]}`, param: "retry_policy.schedule[1]", rule: "retry_delay_invalid"},
		{raw: `{"schedule": ["0s"]}`, param: "retry_policy.schedule[0]", rule: "retry_delay_too_short"},
		{raw: `{"schedule": ["500ms"]}`, param: "retry_policy.schedule[0]", rule: "retry_delay_invalid"},
		{raw: `{"schedule": ["-5s"]}`, param: "retry_policy.schedule[0]", rule: "retry_delay_invalid"},
		{raw: `{"schedule": ["+5s"]}`, param: "retry_policy.schedule[0]", rule: "retry_delay_invalid"},
		{raw: `{"schedule": ["1e3s"]}`, param: "retry_policy.schedule[0]", rule: "retry_delay_invalid"},
		{raw: `{"schedule": ["5 s"]}`, param: "retry_policy.schedule[0]", rule: "retry_delay_invalid"},
		{raw: `{"schedule": ["5"]}`, param: "retry_policy.schedule[0]", rule: "retry_delay_invalid"},
		{raw: `{"schedule": [""]}`, param: "retry_policy.schedule[0]", rule: "retry_delay_invalid"},
		{raw: `{"schedule": ["1m1h"]}`, param: "retry_policy.schedule[0]", rule: "retry_delay_invalid"},
		{raw: `{"schedule": ["1s1s"]}`, param: "retry_policy.schedule[0]", rule: "retry_delay_invalid"},
		{raw: `{"schedule": ["1w"]}`, param: "retry_policy.schedule[0]", rule: "retry_delay_invalid"},
		{raw: `{"schedule": ["99999999s"]}`, param: "retry_policy.schedule[0]", rule: "retry_delay_invalid"},
		{raw: `{"schedule": ["1d1h1m1s000000000"]}`, param: "retry_policy.schedule[0]", rule: "retry_delay_invalid"},
		{raw: `{"schedule": ["30d1s"]}`, param: "retry_policy.schedule[0]", rule: "retry_schedule_too_long"},
		{raw: `{"schedule": ["20d", "9d", "1d", "1s"]}`, param: "retry_policy.schedule[3]", rule: "retry_schedule_too_long"},
		{raw: `{"timeout_seconds": 0}`, param: "retry_policy.timeout_seconds", rule: "retry_timeout_range"},
		{raw: `{"timeout_seconds": 26}`, param: "retry_policy.timeout_seconds", rule: "retry_timeout_range"},
		{raw: `{"timeout_seconds": 2.5}`, param: "retry_policy.timeout_seconds", rule: "retry_timeout_range"},
		{raw: `{"timeout_seconds": "10"}`, param: "retry_policy.timeout_seconds", rule: "retry_timeout_range"},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			t.Parallel()
			p, err := ParseRetryPolicy("retry_policy", v1Names, json.RawMessage(tc.raw))
			if tc.param != "" {
				bad := invalid.As(err)
				if bad == nil || bad.Param != tc.param || bad.Rule != tc.rule {
					t.Fatalf("got %v (%#v), want a refusal of %s (%s)", p, err, tc.param, tc.rule)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if tc.none {
				if p != nil {
					t.Fatalf("got %+v, want the engine's (nil)", p)
				}
				return
			}
			if p == nil || !slices.Equal(p.Schedule, tc.schedule) || (p.Schedule == nil) != (tc.schedule == nil) || p.TimeoutSeconds != tc.timeout {
				t.Fatalf("got %+v, want schedule %v timeout %d", p, tc.schedule, tc.timeout)
			}
		})
	}
}

// TestRetryPolicyLegacyNames: the legacy surface names its fields in
// camelCase, and refuses the snake_case timeout as unknown.
func TestRetryPolicyLegacyNames(t *testing.T) {
	t.Parallel()
	legacy := RetryPolicyNames{Timeout: "timeoutSeconds"}
	p, err := ParseRetryPolicy("retryPolicy", legacy, json.RawMessage(`{"schedule": ["1s"], "timeoutSeconds": 3}`))
	if err != nil || p.TimeoutSeconds != 3 {
		t.Fatalf("got %+v, %v", p, err)
	}
	_, err = ParseRetryPolicy("retryPolicy", legacy, json.RawMessage(`{"timeoutSeconds": 99}`))
	if bad := invalid.As(err); bad == nil || bad.Param != "retryPolicy.timeoutSeconds" {
		t.Fatalf("got %v, want a refusal of retryPolicy.timeoutSeconds", err)
	}
	view := RetryPolicyView(legacy, p)
	if fmt.Sprint(view["schedule"]) != "[1s]" || *view["timeoutSeconds"].(*int) != 3 {
		t.Fatalf("view %v", view)
	}
}

func TestFormatInterval(t *testing.T) {
	t.Parallel()
	for seconds, want := range map[int64]string{0: "0s", 1: "1s", 90: "1m30s", 3600: "1h", 86400: "1d", 93784: "1d2h3m4s", 30 * 86400: "30d"} {
		if got := FormatInterval(seconds); got != want {
			t.Errorf("FormatInterval(%d) = %q, want %q", seconds, got, want)
		}
		if back, ok := ParseInterval(want); !ok || back != seconds {
			t.Errorf("ParseInterval(%q) = %d, %v; want %d", want, back, ok, seconds)
		}
	}
}

// FuzzParseRetryPolicy feeds arbitrary bodies to ParseRetryPolicy. It
// never panics; a refusal is an *invalid.Error naming retry_policy or a
// field below it; an accepted policy is within every bound and reads back
// the same from its own view.
func FuzzParseRetryPolicy(f *testing.F) {
	for _, s := range []string{
		`null`, `{}`, `{"schedule": ["5s", "1m", "2h", "1d"], "timeout_seconds": 10}`, `{"schedule": []}`,
		`{"schedule": ["1.5h"]}`, `{"schedule": ["-1s"]}`, `{"schedule": ["9999999d"]}`, `{"timeout_seconds": 26}`,
		`{"schedule": ["30d", "1s"]}`, `{"schedule": [null]}`, `{"schedule": {"a": 1}}`, `[`, `{"schedule": ["1d1h1m1s"]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		p, err := ParseRetryPolicy("retry_policy", v1Names, json.RawMessage(raw))
		if err != nil {
			var bad *invalid.Error
			if !errors.As(err, &bad) || !strings.HasPrefix(bad.Param, "retry_policy") {
				t.Fatalf("ParseRetryPolicy(%q) error %#v is not a refusal of retry_policy", raw, err)
			}
			return
		}
		if p == nil {
			return
		}
		if len(p.Schedule) > MaxRetryDelays || (p.TimeoutSeconds != 0 && (p.TimeoutSeconds < MinAttemptTimeout || p.TimeoutSeconds > MaxAttemptTimeout)) {
			t.Fatalf("ParseRetryPolicy(%q) accepted %+v", raw, p)
		}
		var span int64
		for _, s := range p.Schedule {
			if s < 1 {
				t.Fatalf("ParseRetryPolicy(%q) accepted a delay of %d s", raw, s)
			}
			span += s
		}
		if span > int64(MaxRetrySpan.Seconds()) {
			t.Fatalf("ParseRetryPolicy(%q) accepted a span of %d s", raw, span)
		}
		view, err := json.Marshal(RetryPolicyView(v1Names, p))
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseRetryPolicy("retry_policy", v1Names, view)
		if err != nil || !slices.Equal(again.Schedule, p.Schedule) || again.TimeoutSeconds != p.TimeoutSeconds {
			t.Fatalf("%q reads back from its view %s as %+v (%v)", raw, view, again, err)
		}
	})
}
