package merchants_test

import (
	"strings"
	"testing"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/merchants"
)

func TestCheckBranding(t *testing.T) {
	ptr := func(s string) *string { return &s }
	for _, tc := range []struct {
		name                  string
		b                     merchants.Branding
		allowHTTP, allowEmpty bool
		param                 string // "" when accepted
	}{
		{"unset", merchants.Branding{}, false, false, ""},
		{"upper and lower case", merchants.Branding{AccentColor: ptr("#A1b2C3"), LogoURL: ptr("https://cdn.example.com/logo.png")}, false, false, ""},
		{"short colour", merchants.Branding{AccentColor: ptr("#abc")}, false, false, "p_accent_color"},
		{"named colour", merchants.Branding{AccentColor: ptr("red")}, false, false, "p_accent_color"},
		{"colour with alpha", merchants.Branding{AccentColor: ptr("#11223344")}, false, false, "p_accent_color"},
		{"empty clears", merchants.Branding{AccentColor: ptr(""), LogoURL: ptr("")}, false, true, ""},
		{"empty refused", merchants.Branding{LogoURL: ptr("")}, false, false, "p_logo_url"},
		{"relative logo", merchants.Branding{LogoURL: ptr("/logo.png")}, false, false, "p_logo_url"},
		{"javascript logo", merchants.Branding{LogoURL: ptr("javascript:alert(1)")}, true, false, "p_logo_url"},
		{"logo with credentials", merchants.Branding{LogoURL: ptr("https://u:p@example.com/l.png")}, false, false, "p_logo_url"},
		{"huge logo URL", merchants.Branding{LogoURL: ptr("https://example.com/" + strings.Repeat("a", 2048))}, false, false, "p_logo_url"},
		{"plain HTTP refused", merchants.Branding{LogoURL: ptr("http://example.com/l.png")}, false, false, "p_logo_url"},
		{"plain HTTP allowed", merchants.Branding{LogoURL: ptr("http://example.com/l.png")}, true, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := merchants.CheckBranding("p_", tc.b, tc.allowHTTP, tc.allowEmpty)
			if tc.param == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if e := invalid.As(err); e == nil || e.Param != tc.param {
				t.Fatalf("CheckBranding = %v, want a refusal of %s", err, tc.param)
			}
		})
	}
}
