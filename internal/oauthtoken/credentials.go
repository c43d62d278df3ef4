package oauthtoken

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/url"

	"github.com/golang-jwt/jwt/v5"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/keybounds"
)

// Credentials are what a subscription's endpoint gave the merchant to get
// tokens from its authorization server. Exactly one of ClientSecret and
// PrivateKey is set.
type Credentials struct {
	// TokenURL is the authorization server's token endpoint.
	TokenURL string
	// ClientID identifies webhookd to that server.
	ClientID string
	// ClientSecret authenticates with client_secret_basic.
	ClientSecret string
	// PrivateKey, a PEM RSA (2048 to 4096 bits, keybounds) or ECDSA
	// P-256/P-384 key,
	// authenticates with a private_key_jwt assertion (RFC 7523) instead.
	PrivateKey string
	// Scopes are asked for, space-separated on the wire.
	Scopes []string
	// Audience, when set, is sent as the audience parameter (Auth0, Okta
	// and others name the API the token is for with it).
	Audience string
}

// String keeps credentials printed by mistake from showing the secret.
func (c Credentials) String() string {
	return "oauthtoken.Credentials{" + c.TokenURL + " " + c.ClientID + " (secrets redacted)}"
}

// GoString is String for %#v.
func (c Credentials) GoString() string { return c.String() }

// LogValue implements slog.LogValuer: slog's handlers print a struct's
// fields otherwise, not its String.
func (c Credentials) LogValue() slog.Value { return slog.StringValue(c.String()) }

// Validate reports the first field that breaks a rule, as an *invalid.Error
// whose Param is the field's API name ("token_url", "private_key"); the
// subscription's rules qualify it with Within("authentication.").
func (c Credentials) Validate() error {
	u, err := url.Parse(c.TokenURL)
	switch {
	case c.TokenURL == "":
		return invalid.Missing("token_url")
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil:
		return invalid.Value("token_url", "url_invalid", "token_url must be an absolute http(s) URL without credentials.")
	case c.ClientID == "":
		return invalid.Missing("client_id")
	case c.ClientSecret == "" && c.PrivateKey == "":
		return invalid.Missing("client_secret")
	case c.ClientSecret != "" && c.PrivateKey != "":
		return invalid.Value("private_key", "secret_and_key", "Give client_secret or private_key, not both.")
	}
	if c.PrivateKey != "" {
		if _, _, err := c.signingKey(); err != nil {
			code := "key_invalid"
			if bound := (*keybounds.Error)(nil); errors.As(err, &bound) {
				code = bound.Code
			}
			return invalid.Value("private_key", code, err.Error())
		}
	}
	for _, s := range c.Scopes {
		if s == "" {
			return invalid.Value("scopes", "scope_empty", "A scope cannot be empty.")
		}
	}
	return nil
}

// signingKey parses PrivateKey within keybounds, when the credentials are
// set and again for each assertion (credentials stored by an older build
// may hold a key beyond them), and names the JWS algorithm its type calls
// for. Its errors say what is wrong with the key, never what it holds; a
// key beyond the bounds is a *keybounds.Error.
func (c Credentials) signingKey() (crypto.Signer, jwt.SigningMethod, error) {
	key, err := keybounds.ParsePrivateKeyPEM([]byte(c.PrivateKey))
	var bound *keybounds.Error
	switch {
	case errors.As(err, &bound):
		return nil, nil, &keybounds.Error{Code: bound.Code, Reason: "private_key holds " + bound.Reason + "."}
	case errors.Is(err, keybounds.ErrUnparsable):
		return nil, nil, errors.New("private_key is not a PKCS #8, PKCS #1 or SEC 1 private key.")
	case err != nil:
		return nil, nil, errors.New("private_key must be a PEM private key.")
	}
	switch k := key.(type) {
	case *rsa.PrivateKey:
		return k, jwt.SigningMethodRS256, nil
	case *ecdsa.PrivateKey:
		switch k.Curve {
		case elliptic.P256():
			return k, jwt.SigningMethodES256, nil
		case elliptic.P384():
			return k, jwt.SigningMethodES384, nil
		}
	}
	return nil, nil, errors.New("private_key must be an RSA or an ECDSA P-256 or P-384 key.")
}

// fingerprint names this set of credentials in Redis keys: an HMAC under a
// key derived from the master key, so that a changed secret gets a key of
// its own (an old token is never served for it) while the key name tells
// nothing about a secret, even a weak one, to whoever can list Redis keys.
func (c Credentials) fingerprint(hashKey []byte) string {
	mac := hmac.New(sha256.New, hashKey)
	for _, field := range append([]string{c.TokenURL, c.ClientID, c.ClientSecret, c.PrivateKey, c.Audience}, c.Scopes...) {
		// Each field is length-prefixed so that moving a character from
		// one field to the next changes the fingerprint.
		mac.Write(binary.BigEndian.AppendUint64(nil, uint64(len(field))))
		mac.Write([]byte(field))
	}
	return hex.EncodeToString(mac.Sum(nil)[:16])
}
