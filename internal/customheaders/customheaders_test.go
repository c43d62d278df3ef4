package customheaders_test

import (
	"strings"
	"testing"

	"github.com/webhookd/webhookd/internal/customheaders"
	"github.com/webhookd/webhookd/internal/invalid"
)

func TestCheck(t *testing.T) {
	many := map[string]string{}
	for i := range customheaders.MaxHeaders + 1 {
		many["X-H"+strings.Repeat("a", i)] = "v"
	}
	cases := []struct {
		name    string
		headers map[string]string
		rule    string // "" when accepted
	}{
		{"custom headers", map[string]string{"Authorization": "Bearer x", "X-Tenant": "t1"}, ""},
		{"none", nil, ""},
		{"too many", many, "headers_too_many"},
		{"a signature header", map[string]string{"Webhook-Signature": "v1,x"}, "header_reserved"},
		{"host", map[string]string{"host": "evil.example"}, "header_reserved"},
		{"content-length", map[string]string{"Content-Length": "1"}, "header_reserved"},
		{"content-type", map[string]string{"Content-Type": "text/plain"}, "header_reserved"},
		{"connection", map[string]string{"Connection": "close"}, "header_reserved"},
		{"keep-alive", map[string]string{"Keep-Alive": "timeout=5"}, "header_reserved"},
		{"any proxy- header", map[string]string{"Proxy-Connection": "x"}, "header_reserved"},
		{"te", map[string]string{"TE": "trailers"}, "header_reserved"},
		{"trailer", map[string]string{"Trailer": "X"}, "header_reserved"},
		{"trailers", map[string]string{"Trailers": "X"}, "header_reserved"},
		{"transfer-encoding", map[string]string{"Transfer-Encoding": "chunked"}, "header_reserved"},
		{"upgrade", map[string]string{"Upgrade": "websocket"}, "header_reserved"},
		{"twice", map[string]string{"X-A": "1", "x-a": "2"}, "header_duplicate"},
		{"not a token", map[string]string{"X A": "1"}, "header_name_invalid"},
		{"name too long", map[string]string{strings.Repeat("a", customheaders.MaxNameBytes+1): "1"}, "header_name_invalid"},
		{"empty value", map[string]string{"X-A": ""}, "header_value_empty"},
		{"value too long", map[string]string{"X-A": strings.Repeat("a", customheaders.MaxValueBytes+1)}, "header_value_too_long"},
		{"a split request", map[string]string{"X-A": "a\r\nHost: b"}, "header_value_invalid"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := customheaders.Check("headers", c.headers)
			switch {
			case c.rule == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.rule == "":
			case invalid.As(err) == nil || invalid.As(err).Rule != c.rule:
				t.Fatalf("error %v, want rule %s", err, c.rule)
			}
		})
	}
}

// FuzzCheck: whatever a merchant sends, an accepted map holds no reserved
// name, no name twice, and no value that could split a request.
func FuzzCheck(f *testing.F) {
	f.Add("Authorization", "Bearer x", "X-Tenant", "t1")
	f.Add("Webhook-Id", "x", "x-a", "1")
	f.Add("X-A", "a\r\nb", "x-a", "2")
	f.Add("Connection", "close", "", "")
	f.Fuzz(func(t *testing.T, n1, v1, n2, v2 string) {
		h := map[string]string{n1: v1, n2: v2}
		err := customheaders.Check("headers", h)
		if err != nil {
			if bad := invalid.As(err); bad == nil || !strings.HasPrefix(bad.Param, "headers") {
				t.Fatalf("error %v does not name headers", err)
			}
			return
		}
		seen := map[string]bool{}
		for name, value := range h {
			lower := strings.ToLower(name)
			if seen[lower] || customheaders.Reserved(name) {
				t.Fatalf("accepted %q", name)
			}
			seen[lower] = true
			if strings.ContainsAny(name+value, "\r\n\x00") || name == "" {
				t.Fatalf("accepted %q: %q", name, value)
			}
		}
	})
}
