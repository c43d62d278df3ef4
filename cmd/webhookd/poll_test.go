package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestPollCommandLine: `webhookd poll` needs a subscription id first and
// an API key, refuses a stray argument, and refuses -follow without -ack
// (following acknowledges what it printed). The reads themselves are
// tested against the API in admin/poll_test.go.
func TestPollCommandLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string // in the error; "" for none
	}{
		{"no id", nil, "subscription id is required"},
		{"flag first", []string{"--api-key", "k"}, "subscription id is required"},
		{"no key", []string{"0193a3b4-0000-7000-8000-00000000000a"}, "--api-key is required"},
		{"stray argument", []string{"0193a3b4-0000-7000-8000-00000000000a", "--api-key", "k", "more"}, "unexpected argument"},
		{"follow without ack", []string{"0193a3b4-0000-7000-8000-00000000000a", "--api-key", "k", "--follow"}, "give -ack too"},
		{"help", []string{"--help"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(t.Context(), append([]string{"poll"}, tc.args...), &out, &errOut)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("poll %v: %v", tc.args, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("poll %v = %v, want an error saying %q", tc.args, err, tc.want)
			}
		})
	}
}
