package portal_test

import (
	"slices"
	"testing"

	"github.com/webhookd/webhookd/internal/portal"
)

func TestParseFrameAncestors(t *testing.T) {
	good := []struct {
		in   []string
		want []string
	}{
		{nil, []string{}},
		{[]string{"https://dashboard.example.com"}, []string{"https://dashboard.example.com"}},
		{[]string{" HTTPS://Admin.Example.com:8443/ ", ""}, []string{"https://admin.example.com:8443"}},
		{[]string{"http://localhost:3000", "https://a.example"}, []string{"http://localhost:3000", "https://a.example"}},
	}
	for _, c := range good {
		got, err := portal.ParseFrameAncestors(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ParseFrameAncestors(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	bad := []string{
		"dashboard.example.com",
		"ftp://example.com",
		"https://",
		"https://example.com/path",
		"https://example.com?x=1",
		"https://example.com#frag",
		"https://user@example.com",
		"https://*.example.com",
		"'self'",
		"https://a.example;script-src *",
	}
	for _, in := range bad {
		if got, err := portal.ParseFrameAncestors([]string{in}); err == nil {
			t.Errorf("ParseFrameAncestors(%q) = %q, want an error", in, got)
		}
	}
}
