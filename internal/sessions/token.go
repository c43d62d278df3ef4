package sessions

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
)

// TokenPrefix starts every portal session token, so that the API tells a
// session from an API key before any lookup, and a token found in a log
// says what it is.
const TokenPrefix = "whps_"

// NewToken makes a session token: the prefix and 32 random bytes,
// base64url without padding.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate portal session token: %w", err)
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// IsToken tells whether a credential is shaped as a session token.
func IsToken(credential string) bool { return strings.HasPrefix(credential, TokenPrefix) }
