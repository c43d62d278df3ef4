package merchants

import (
	"net/url"
	"regexp"

	"github.com/webhookd/webhookd/internal/invalid"
)

// accentColor is the one colour form the portal takes: #RRGGBB.
var accentColor = regexp.MustCompile(`^#[0-9A-Fa-f]{6}$`)

// maxLogoURL bounds a logo URL, so that a setting cannot bloat every
// answer that carries it.
const maxLogoURL = 2048

// Branding is how a merchant's portal looks: nil leaves a field unset.
type Branding struct {
	AccentColor *string
	LogoURL     *string
}

// CheckBranding applies the rules of the portal's branding: the accent
// colour is #RRGGBB, the logo an absolute https URL (http too when
// allowHTTP, for development). prefix is put before each field's name in
// the param of a refusal ("branding." in a session's body, "portal_" in
// the merchant settings). An empty value is allowed when allowEmpty (it
// clears a setting).
func CheckBranding(prefix string, b Branding, allowHTTP, allowEmpty bool) error {
	if c := b.AccentColor; c != nil && !(allowEmpty && *c == "") && !accentColor.MatchString(*c) {
		return invalid.Value(prefix+"accent_color", "color_malformed", prefix+"accent_color must be a colour #RRGGBB, such as #1A2B3C.")
	}
	if l := b.LogoURL; l != nil && !(allowEmpty && *l == "") {
		u, err := url.Parse(*l)
		ok := err == nil && len(*l) <= maxLogoURL && u.Host != "" && u.User == nil &&
			(u.Scheme == "https" || allowHTTP && u.Scheme == "http")
		if !ok {
			msg := prefix + "logo_url must be an absolute https URL of at most 2048 characters."
			if allowHTTP {
				msg = prefix + "logo_url must be an absolute http or https URL of at most 2048 characters."
			}
			return invalid.Value(prefix+"logo_url", "logo_url_invalid", msg)
		}
	}
	return nil
}
