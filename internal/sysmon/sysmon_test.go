package sysmon_test

import (
	"slices"
	"testing"

	"github.com/webhookd/webhookd/internal/sysmon"
)

// TestEnviron: the setting joins whatever GODEBUG says, and an operator's
// own schedtrace (schedtrace=0 turns the tuning off) is left alone.
func TestEnviron(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		environ     []string
		want        []string
		wantChanged bool
	}{
		{"no GODEBUG", []string{"PATH=/bin", "HOME=/root"},
			[]string{"PATH=/bin", "HOME=/root", "GODEBUG=" + sysmon.Setting}, true},
		{"an empty GODEBUG", []string{"GODEBUG=", "PATH=/bin"},
			[]string{"GODEBUG=" + sysmon.Setting, "PATH=/bin"}, true},
		{"GODEBUG with other settings", []string{"GODEBUG=http2client=0,madvdontneed=1"},
			[]string{"GODEBUG=http2client=0,madvdontneed=1," + sysmon.Setting}, true},
		{"the operator's schedtrace=0", []string{"GODEBUG=schedtrace=0", "PATH=/bin"},
			[]string{"GODEBUG=schedtrace=0", "PATH=/bin"}, false},
		{"already set (the executed process)", []string{"GODEBUG=x=1," + sysmon.Setting},
			[]string{"GODEBUG=x=1," + sysmon.Setting}, false},
		{"GODEBUG twice: the first counts", []string{"GODEBUG=a=1", "GODEBUG=schedtrace=0"},
			[]string{"GODEBUG=a=1," + sysmon.Setting}, true},
		{"a variable that only ends in GODEBUG", []string{"XGODEBUG=schedtrace=0"},
			[]string{"XGODEBUG=schedtrace=0", "GODEBUG=" + sysmon.Setting}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, changed := sysmon.Environ(tc.environ)
			if !slices.Equal(got, tc.want) || changed != tc.wantChanged {
				t.Errorf("Environ(%q) = %q, %v; want %q, %v", tc.environ, got, changed, tc.want, tc.wantChanged)
			}
		})
	}
}
