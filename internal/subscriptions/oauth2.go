package subscriptions

import (
	"fmt"
	"slices"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/oauthtoken"
	"github.com/webhookd/webhookd/internal/store"
)

// AuthenticationOAuth2 sends a bearer token from the merchant's own
// authorization server (OAuth2 client credentials) with every attempt.
const AuthenticationOAuth2 = "oauth2_client_credentials"

// The credential kinds an oauth2_client_credentials authentication shows
// on read (AuthenticationSummary.Credential).
const (
	// CredentialClientSecret authenticates to the token endpoint with a
	// client secret (client_secret_basic).
	CredentialClientSecret = "client_secret"
	// CredentialPrivateKey authenticates with a private_key_jwt assertion
	// (RFC 7523) signed by a private key.
	CredentialPrivateKey = "private_key"
)

// Limits on the oauth2 fields besides the token URL (which has the target
// URL's).
const (
	maxClientIDLength     = 256
	maxClientSecretLength = 1024
	maxScopes             = 20
	maxScopeLength        = 128
	maxAudienceLength     = 512
)

// authentication checks in by its type's rules: mtls by checkAuthentication
// at the rules' now; oauth2_client_credentials here, its token URL by the
// target URL's rules (https, and no private address, unless the rules lift
// them for endpoints too).
func (c checker) authentication(param string, in AuthenticationInput) (Authentication, store.AuthenticationSummary, error) {
	if in.Type == nil || *in.Type != AuthenticationOAuth2 {
		return checkAuthentication(param, in, c.rules.now())
	}
	return c.oauth2(param, in)
}

// oauth2 checks an oauth2_client_credentials authentication: a token URL
// as a target URL would be checked, a client id, exactly one of a client
// secret and a private key, and optional scopes and audience.
func (c checker) oauth2(param string, in AuthenticationInput) (Authentication, store.AuthenticationSummary, error) {
	none := store.AuthenticationSummary{}
	if in.ClientCertificate != nil || in.ClientKey != nil || in.ServerCA != nil {
		return Authentication{}, none, invalid.Value(param, "authentication_field_of_other_type",
			param+" of type "+AuthenticationOAuth2+" takes no client_certificate, client_key or server_ca.")
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	tokenURL, err := c.url(param+".token_url", str(in.TokenURL))
	if err != nil {
		return Authentication{}, none, err
	}
	creds := oauthtoken.Credentials{TokenURL: tokenURL, ClientID: str(in.ClientID), ClientSecret: str(in.ClientSecret),
		PrivateKey: str(in.PrivateKey), Audience: str(in.Audience), Scopes: slices.Clone(in.Scopes)}
	for _, lim := range []struct {
		name  string
		value string
		max   int
	}{
		{"client_id", creds.ClientID, maxClientIDLength},
		{"client_secret", creds.ClientSecret, maxClientSecretLength},
		{"private_key", creds.PrivateKey, maxPEMLength},
		{"audience", creds.Audience, maxAudienceLength},
	} {
		if len(lim.value) > lim.max {
			return Authentication{}, none, invalid.Value(param+"."+lim.name, "too_long",
				fmt.Sprintf("%s.%s must be at most %d characters.", param, lim.name, lim.max))
		}
	}
	if len(creds.Scopes) > maxScopes {
		return Authentication{}, none, invalid.Value(param+".scopes", "too_many_scopes",
			fmt.Sprintf("%s.scopes may list at most %d scopes.", param, maxScopes))
	}
	for _, s := range creds.Scopes {
		// RFC 6749 §3.3: scope tokens are printable ASCII without space,
		// double quote or backslash.
		if len(s) > maxScopeLength || !scopeToken(s) {
			return Authentication{}, none, invalid.Value(param+".scopes", "scope_invalid",
				fmt.Sprintf("%s.scopes must be scope tokens (printable ASCII without spaces, quotes or backslashes, at most %d characters).", param, maxScopeLength))
		}
	}
	if err := creds.Validate(); err != nil {
		if bad := invalid.As(err); bad != nil {
			return Authentication{}, none, bad.Within(param + ".")
		}
		return Authentication{}, none, err
	}
	kind := CredentialClientSecret
	if creds.PrivateKey != "" {
		kind = CredentialPrivateKey
	}
	a := Authentication{Type: AuthenticationOAuth2, TokenURL: creds.TokenURL, ClientID: creds.ClientID,
		ClientSecret: creds.ClientSecret, PrivateKey: creds.PrivateKey, Scopes: creds.Scopes, Audience: creds.Audience}
	return a, store.AuthenticationSummary{Type: AuthenticationOAuth2, TokenURL: creds.TokenURL, ClientID: creds.ClientID,
		Scopes: creds.Scopes, Audience: creds.Audience, Credential: kind}, nil
}

// scopeToken reports whether s is one RFC 6749 scope token.
func scopeToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < 0x21 || r > 0x7e || r == '"' || r == '\\' {
			return false
		}
	}
	return true
}

// OAuth2Credentials are an oauth2_client_credentials authentication's
// credentials for oauthtoken. They were checked when they were set.
func (a Authentication) OAuth2Credentials() (oauthtoken.Credentials, error) {
	if a.Type != AuthenticationOAuth2 {
		return oauthtoken.Credentials{}, fmt.Errorf("authentication of type %q has no oauth2 credentials", a.Type)
	}
	return oauthtoken.Credentials{TokenURL: a.TokenURL, ClientID: a.ClientID, ClientSecret: a.ClientSecret,
		PrivateKey: a.PrivateKey, Scopes: a.Scopes, Audience: a.Audience}, nil
}
