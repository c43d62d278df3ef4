package admin

import (
	"context"
	"encoding/json"
	"maps"
	"slices"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
)

// authenticationNames are the names of the authentication object's fields
// on one surface: snake_case on /v1, camelCase on the legacy routes.
type authenticationNames struct {
	clientCertificate, clientKey, serverCA, notAfter, expiresSoon string
	tokenURL, clientID, clientSecret, privateKey                  string
}

var (
	bankingAuthenticationNames = authenticationNames{clientCertificate: "client_certificate", clientKey: "client_key",
		serverCA: "server_ca", notAfter: "not_after", expiresSoon: "expires_soon",
		tokenURL: "token_url", clientID: "client_id", clientSecret: "client_secret", privateKey: "private_key"}
	legacyAuthenticationNames = authenticationNames{clientCertificate: "clientCertificate", clientKey: "clientKey",
		serverCA: "serverCa", notAfter: "notAfter", expiresSoon: "expiresSoon",
		tokenURL: "tokenUrl", clientID: "clientId", clientSecret: "clientSecret", privateKey: "privateKey"}
)

// scopesName is the name of the oauth2 scopes, the same on both surfaces
// (as is audience).
const scopesName = "scopes"

// authenticationNamesOf are the names of the request's surface.
func authenticationNamesOf(ctx context.Context) authenticationNames {
	if isLegacy(ctx) {
		return legacyAuthenticationNames
	}
	return bankingAuthenticationNames
}

// authenticationInput reads the authentication field of a create or an
// update as sent (f): absent (set false), null (set, nil: remove it) or an
// object of strings (scopes: an array of strings) whose keys are exactly
// the surface's names. Its rules
// are the registry's; this only reads the object, naming the field at
// fault. Values are never quoted: they hold a private key.
func authenticationInput(ctx context.Context, f rawField) (set bool, in *subscriptions.AuthenticationInput, err error) {
	if !f.Set || string(f.Raw) == "null" {
		return f.Set, nil, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(f.Raw, &fields); err != nil || fields == nil {
		return true, nil, invalid.Value("authentication", "authentication_not_object",
			`authentication must be an object such as {"type": "mtls", ...}, or null to remove it.`)
	}
	names := authenticationNamesOf(ctx)
	in = &subscriptions.AuthenticationInput{}
	targets := map[string]**string{"type": &in.Type, names.clientCertificate: &in.ClientCertificate,
		names.clientKey: &in.ClientKey, names.serverCA: &in.ServerCA, names.tokenURL: &in.TokenURL,
		names.clientID: &in.ClientID, names.clientSecret: &in.ClientSecret, names.privateKey: &in.PrivateKey,
		"audience": &in.Audience}
	// Sorted, so that the same body always names the same field.
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if k == scopesName {
			if string(fields[k]) == "null" {
				continue
			}
			if err := json.Unmarshal(fields[k], &in.Scopes); err != nil || in.Scopes == nil {
				return true, nil, invalid.Value("authentication."+k, "authentication_not_strings",
					"authentication."+k+" must be an array of strings.")
			}
			continue
		}
		target, ok := targets[k]
		if !ok {
			return true, nil, invalid.Value("authentication", "authentication_field_unknown",
				"authentication has no field "+invalid.Quote(k)+".")
		}
		if string(fields[k]) == "null" {
			continue
		}
		var v string
		if err := json.Unmarshal(fields[k], &v); err != nil {
			return true, nil, invalid.Value("authentication."+k, "authentication_not_string", "authentication."+k+" must be a string.")
		}
		*target = &v
	}
	return true, in, nil
}

// authenticationJSON is what a read shows of an authentication: never a
// secret. Its keys follow the surface (see authenticationView).
type authenticationJSON map[string]any

// authenticationView is the summary of a subscription's authentication in
// the names of the request's surface, at now (an mtls certificate's
// expires_soon); nil for none. Never a secret: an oauth2 authentication
// shows which kind of credential it holds, not the credential.
func (c subscriptionChanges) authenticationView(ctx context.Context, a *store.Authentication) authenticationJSON {
	if a == nil {
		return nil
	}
	names := authenticationNamesOf(ctx)
	s := a.Summary
	v := authenticationJSON{"type": s.Type}
	switch s.Type {
	case subscriptions.AuthenticationMTLS:
		v["subject"], v["issuer"], v["serial"] = s.Subject, s.Issuer, s.Serial
		v[names.notAfter], v[names.serverCA] = utcPtr(s.NotAfter), s.ServerCA
		v[names.expiresSoon] = s.NotAfter != nil && subscriptions.ExpiresSoon(*s.NotAfter, clock.Or(c.clock).Now())
	case subscriptions.AuthenticationOAuth2:
		scopes := s.Scopes
		if scopes == nil {
			scopes = []string{}
		}
		var audience *string
		if s.Audience != "" {
			audience = &s.Audience
		}
		v[names.tokenURL], v[names.clientID], v[scopesName], v["audience"], v["credential"] =
			s.TokenURL, s.ClientID, scopes, audience, s.Credential
	}
	return v
}
