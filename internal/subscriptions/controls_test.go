package subscriptions

import (
	"testing"

	"github.com/webhookd/webhookd/internal/invalid"
)

// TestMaskedValue: no character of a credential is shown, only an
// authorization scheme's name before one.
func TestMaskedValue(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Bearer sk_live_0123456789":   "Bearer ••••••",
		"Basic dXNlcjpwYXNzd29yZA==":  "Basic ••••••",
		"key_0123456789abcdef":        "••••••",
		"sk_live_0123456789 trailing": "••••••",
		"Bearer ":                     "••••••",
		"short":                       "••••••",
		"ééééééééééééééééé":           "••••••",
		"é-scheme secret":             "••••••",
	} {
		if got := MaskedValue(in); got != want {
			t.Errorf("MaskedValue(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseOrdering(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw  string
		want string // "" for none
		rule string // "" for accepted
	}{
		{raw: `"none"`},
		{raw: `null`},
		{raw: `{"key": "payload.id"}`, want: "payload.id"},
		{raw: `{"key": "payload.account_id.v-2"}`, want: "payload.account_id.v-2"},
		{raw: `{"key": "type"}`, want: "type"},
		{raw: `"fifo"`, rule: "ordering_invalid"},
		{raw: `{}`, rule: "ordering_invalid"},
		{raw: `{"key": 3}`, rule: "ordering_invalid"},
		{raw: `{"key": "payload.id", "x": 1}`, rule: "ordering_invalid"},
		{raw: `[]`, rule: "ordering_invalid"},
		{raw: `{"key": ""}`, rule: "ordering_key_path"},
		{raw: `{"key": "data.id"}`, rule: "ordering_key_path"},
		{raw: `{"key": "payload..id"}`, rule: "ordering_key_path"},
		{raw: `{"key": "payload.a b"}`, rule: "ordering_key_path"},
		{raw: `{"key": "payload.a.b.c.d.e.f.g.h"}`, rule: "ordering_key_path"},
	} {
		key, err := ParseOrdering("ordering", []byte(tc.raw))
		if tc.rule != "" {
			if e := invalid.As(err); e == nil || e.Rule != tc.rule || e.Param != "ordering" {
				t.Errorf("%s: error %v, want rule %s on ordering", tc.raw, err, tc.rule)
			}
			continue
		}
		got := ""
		if key != nil {
			got = *key
		}
		if err != nil || got != tc.want {
			t.Errorf("%s = %q, %v; want %q", tc.raw, got, err, tc.want)
		}
	}
}

func TestCheckRateLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		limit *int
		ok    bool
	}{
		{nil, true}, {intPtr(1), true}, {intPtr(10000), true}, {intPtr(0), false}, {intPtr(-5), false}, {intPtr(10001), false},
	} {
		err := CheckRateLimit("rate_limit", tc.limit)
		if (err == nil) != tc.ok {
			t.Errorf("CheckRateLimit(%v) = %v", tc.limit, err)
		}
	}
}

func intPtr(v int) *int { return &v }
