package subscriptions

import (
	"testing"

	"github.com/webhookd/webhookd/internal/invalid"
)

// TestOAuth2TokenURLFollowsTheTargetRules: the token URL is checked as an
// endpoint's URL is: https, and no private address, unless the rules lift
// those for endpoints too (development and tests).
func TestOAuth2TokenURLFollowsTheTargetRules(t *testing.T) {
	t.Parallel()
	in := func(tokenURL string) AuthenticationInput {
		return AuthenticationInput{Type: ptr(AuthenticationOAuth2), TokenURL: &tokenURL, ClientID: ptr("c"), ClientSecret: ptr("s"),
			Scopes: []string{"read"}}
	}
	strict, lifted := newChecker(Rules{}), newChecker(Rules{AllowHTTPTargets: true, AllowPrivateTargets: true})
	for _, tc := range []struct {
		url          string
		strictRule   string // "" when accepted
		liftedAccept bool
	}{
		{"https://auth.example.com/oauth/token", "", true},
		{"http://auth.example.com/oauth/token", "url_not_https", true},
		{"https://127.0.0.1:8443/token", "url_private", true},
		{"https://localhost/token", "url_private", true},
		{"https://auth.example.com/token#x", "url_fragment", false},
	} {
		_, _, err := strict.authentication("authentication", in(tc.url))
		if bad := invalid.As(err); (tc.strictRule == "") != (err == nil) || (bad != nil && (bad.Rule != tc.strictRule || bad.Param != "authentication.token_url")) {
			t.Errorf("strict rules, %s: %v, want %q", tc.url, err, tc.strictRule)
		}
		a, summary, err := lifted.authentication("authentication", in(tc.url))
		if (err == nil) != tc.liftedAccept {
			t.Errorf("lifted rules, %s: %v", tc.url, err)
		}
		if err == nil && (a.ClientSecret != "s" || summary.Credential != CredentialClientSecret || summary.TokenURL != tc.url ||
			len(summary.Scopes) != 1) {
			t.Errorf("lifted rules, %s: %+v %+v", tc.url, a, summary)
		}
	}
}
