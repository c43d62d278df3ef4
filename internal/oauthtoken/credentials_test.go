package oauthtoken_test

import (
	"testing"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/oauthtoken"
)

func TestCredentialsValidate(t *testing.T) {
	rsa2048, _ := newKey(t, "rsa2048")
	rsa1024, _ := newKey(t, "rsa1024")
	p256, _ := newKey(t, "p256")
	p521, _ := newKey(t, "p521")
	ok := oauthtoken.Credentials{TokenURL: "https://auth.bank.example/oauth2/token", ClientID: "webhookd", ClientSecret: "s3cret"}
	with := func(change func(*oauthtoken.Credentials)) oauthtoken.Credentials {
		c := ok
		change(&c)
		return c
	}
	cases := []struct {
		name      string
		creds     oauthtoken.Credentials
		wantParam string
	}{
		{"a client secret", ok, ""},
		{"an RSA key", with(func(c *oauthtoken.Credentials) { c.ClientSecret, c.PrivateKey = "", rsa2048 }), ""},
		{"a P-256 key", with(func(c *oauthtoken.Credentials) { c.ClientSecret, c.PrivateKey = "", p256 }), ""},
		{"scopes and audience", with(func(c *oauthtoken.Credentials) { c.Scopes, c.Audience = []string{"a", "b"}, "api" }), ""},
		{"no token URL", with(func(c *oauthtoken.Credentials) { c.TokenURL = "" }), "token_url"},
		{"a relative token URL", with(func(c *oauthtoken.Credentials) { c.TokenURL = "/token" }), "token_url"},
		{"a token URL of another scheme", with(func(c *oauthtoken.Credentials) { c.TokenURL = "ftp://auth.example/token" }), "token_url"},
		{"a token URL with credentials", with(func(c *oauthtoken.Credentials) { c.TokenURL = "https://u:p@auth.example/token" }), "token_url"},
		{"no client id", with(func(c *oauthtoken.Credentials) { c.ClientID = "" }), "client_id"},
		{"neither secret nor key", with(func(c *oauthtoken.Credentials) { c.ClientSecret = "" }), "client_secret"},
		{"both secret and key", with(func(c *oauthtoken.Credentials) { c.PrivateKey = p256 }), "private_key"},
		{"a key that is not PEM", with(func(c *oauthtoken.Credentials) { c.ClientSecret, c.PrivateKey = "", "MIIEvQIBADANBg" }), "private_key"},
		{"a short RSA key", with(func(c *oauthtoken.Credentials) { c.ClientSecret, c.PrivateKey = "", rsa1024 }), "private_key"},
		{"a P-521 key", with(func(c *oauthtoken.Credentials) { c.ClientSecret, c.PrivateKey = "", p521 }), "private_key"},
		{"an empty scope", with(func(c *oauthtoken.Credentials) { c.Scopes = []string{"a", ""} }), "scopes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.creds.Validate()
			if c.wantParam == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if e := invalid.As(err); e == nil || e.Param != c.wantParam {
				t.Fatalf("error %v, want an invalid.Error naming %s", err, c.wantParam)
			}
		})
	}
}
