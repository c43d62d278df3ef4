package oauthtoken

import (
	"log/slog"
	"net/http"
	"time"
)

// Token is a bearer token for one subscription's endpoint. Printed or
// logged by mistake, it shows nothing of itself.
type Token struct {
	// AccessToken is the token as the authorization server issued it.
	AccessToken string
	// Expiry is when the authorization server said it expires.
	Expiry time.Time
}

// SetAuthHeader sets h's Authorization to the token, as a Bearer token
// (RFC 6750 §2.1) whatever token_type the server named: an endpoint that
// takes webhooks takes bearer tokens.
func (t Token) SetAuthHeader(h http.Header) { h.Set("Authorization", "Bearer "+t.AccessToken) }

// String implements fmt.Stringer without the token.
func (t Token) String() string { return "oauthtoken.Token(redacted)" }

// GoString is String for %#v.
func (t Token) GoString() string { return t.String() }

// LogValue implements slog.LogValuer without the token.
func (t Token) LogValue() slog.Value { return slog.StringValue(t.String()) }
