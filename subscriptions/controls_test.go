package subscriptions

import (
	"strings"
	"testing"

	"github.com/webhookd/webhookd/invalid"
)

// TestMaskedValue: long values keep a four-character prefix, short ones
// show nothing.
func TestMaskedValue(t *testing.T) {
	for in, want := range map[string]string{
		"Bearer sk_live_0123456789": "Bear…••••••",
		"short":                     "••••••",
		"exactly-15-char":           "••••••",
		"ééééééééééééééééé":         "éééé…••••••",
	} {
		if got := maskedValue(in); got != want {
			t.Errorf("maskedValue(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzCheckHeaders: whatever a merchant sends, an accepted map holds no
// reserved name, no name twice, and no value that could split a request.
func FuzzCheckHeaders(f *testing.F) {
	f.Add("Authorization", "Bearer x", "X-Tenant", "t1")
	f.Add("Webhook-Id", "x", "x-a", "1")
	f.Add("X-A", "a\r\nb", "x-a", "2")
	f.Add("Connection", "close", "", "")
	f.Fuzz(func(t *testing.T, n1, v1, n2, v2 string) {
		h := map[string]string{n1: v1, n2: v2}
		err := checkHeaders("headers", h)
		if err != nil {
			if bad := invalid.As(err); bad == nil || !strings.HasPrefix(bad.Param, "headers") {
				t.Fatalf("error %v does not name headers", err)
			}
			return
		}
		seen := map[string]bool{}
		for name, value := range h {
			lower := strings.ToLower(name)
			if seen[lower] || strings.HasPrefix(lower, "webhook-") || lower == "host" || lower == "content-type" {
				t.Fatalf("accepted %q", name)
			}
			seen[lower] = true
			if strings.ContainsAny(name+value, "\r\n\x00") || name == "" {
				t.Fatalf("accepted %q: %q", name, value)
			}
		}
	})
}
