package admin

import (
	"context"
	"encoding/json"
	"maps"
	"slices"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
)

// authenticationNames are the names of the authentication object's fields
// on one surface: snake_case on /v1, camelCase on the legacy routes.
type authenticationNames struct {
	clientCertificate, clientKey, serverCA, notAfter string
}

var (
	bankingAuthenticationNames = authenticationNames{clientCertificate: "client_certificate", clientKey: "client_key",
		serverCA: "server_ca", notAfter: "not_after"}
	legacyAuthenticationNames = authenticationNames{clientCertificate: "clientCertificate", clientKey: "clientKey",
		serverCA: "serverCa", notAfter: "notAfter"}
)

// authenticationNamesOf are the names of the request's surface.
func authenticationNamesOf(ctx context.Context) authenticationNames {
	if isLegacy(ctx) {
		return legacyAuthenticationNames
	}
	return bankingAuthenticationNames
}

// authenticationInput reads the authentication field of a create or an
// update as sent (f): absent (set false), null (set, nil: remove it) or an
// object of strings whose keys are exactly the surface's names. Its rules
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
		names.clientKey: &in.ClientKey, names.serverCA: &in.ServerCA}
	// Sorted, so that the same body always names the same field.
	for _, k := range slices.Sorted(maps.Keys(fields)) {
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
// the names of the request's surface; nil for none.
func authenticationView(ctx context.Context, a *store.Authentication) authenticationJSON {
	if a == nil {
		return nil
	}
	names := authenticationNamesOf(ctx)
	s := a.Summary
	v := authenticationJSON{"type": s.Type}
	if s.Type == subscriptions.AuthenticationMTLS {
		v["subject"], v["issuer"], v["serial"] = s.Subject, s.Issuer, s.Serial
		v[names.notAfter], v[names.serverCA] = utcPtr(s.NotAfter), s.ServerCA
	}
	return v
}
