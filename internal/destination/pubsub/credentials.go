package pubsub

import (
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/keybounds"
)

// maxCredentialsJSON bounds credentials_json: a service account key is
// about 2.4 KiB.
const maxCredentialsJSON = 16 << 10

// Google's own addresses, the only ones a service account key may name:
// the key's JSON is read by Google's library, which would fetch tokens
// from whatever token_uri it names (with its own HTTP client, not
// env.Dial) and publish under whatever universe_domain.
const (
	googleTokenURI       = "https://oauth2.googleapis.com/token"
	googleUniverseDomain = "googleapis.com"
)

// serviceAccountKey is a service account key as Google gives it (the JSON
// file of a key made in the console). Only these members are accepted;
// external_account, authorized_user, impersonated_service_account and
// the rest, which can name files, commands and other token endpoints, are
// refused by their type.
type serviceAccountKey struct {
	Type                    string `json:"type,omitempty"`
	ProjectID               string `json:"project_id,omitempty"`
	PrivateKeyID            string `json:"private_key_id,omitempty"`
	PrivateKey              string `json:"private_key,omitempty"`
	ClientEmail             string `json:"client_email,omitempty"`
	ClientID                string `json:"client_id,omitempty"`
	AuthURI                 string `json:"auth_uri,omitempty"`
	TokenURI                string `json:"token_uri,omitempty"`
	AuthProviderX509CertURL string `json:"auth_provider_x509_cert_url,omitempty"`
	ClientX509CertURL       string `json:"client_x509_cert_url,omitempty"`
	UniverseDomain          string `json:"universe_domain,omitempty"`
}

// parseServiceAccount reads a service account key by allow-list: type
// "service_account", an email, an RSA private key within keybounds, and
// Google's own token endpoint and universe when they are named. Its
// messages never quote the key.
func parseServiceAccount(param, raw string) (serviceAccountKey, error) {
	bad := invalid.Value(param, "destination_credentials_invalid", param+
		` must be a service account key as Google gives it: a JSON object with "type": "service_account", "client_email" and "private_key", and no other member than Google puts in one.`)
	if len(raw) > maxCredentialsJSON {
		return serviceAccountKey{}, bad
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	var key serviceAccountKey
	if err := dec.Decode(&key); err != nil || dec.More() {
		return serviceAccountKey{}, bad
	}
	if key.Type != "service_account" {
		return serviceAccountKey{}, invalid.Value(param, "destination_credentials_type", param+
			` must be a key of "type": "service_account"; other kinds of Google credentials (external_account, authorized_user, impersonation) are not accepted.`)
	}
	for _, f := range []string{key.ProjectID, key.PrivateKeyID, key.ClientEmail, key.ClientID, key.AuthURI, key.AuthProviderX509CertURL, key.ClientX509CertURL} {
		if len(f) > destination.MaxURL || strings.ContainsFunc(f, destination.IsControl) {
			return serviceAccountKey{}, bad
		}
	}
	if key.ClientEmail == "" || !strings.Contains(key.ClientEmail, "@") {
		return serviceAccountKey{}, bad
	}
	if (key.TokenURI != "" && key.TokenURI != googleTokenURI) || (key.UniverseDomain != "" && key.UniverseDomain != googleUniverseDomain) {
		return serviceAccountKey{}, invalid.Value(param, "destination_credentials_endpoint", fmt.Sprintf(
			"%s may name only Google's own token_uri (%s) and universe_domain (%s).", param, googleTokenURI, googleUniverseDomain))
	}
	// Google signs with RS256: an RSA key, within keybounds.
	pk, err := keybounds.ParsePrivateKeyPEM([]byte(key.PrivateKey))
	if _, isRSA := pk.(*rsa.PrivateKey); err == nil && !isRSA {
		return serviceAccountKey{}, bad
	}
	if errors.Is(err, keybounds.ErrKeyNotAccepted) {
		return serviceAccountKey{}, keybounds.Fault(param, err)
	}
	if err != nil {
		return serviceAccountKey{}, bad
	}
	return key, nil
}

// serviceAccountJSON is the key as the publisher hands it to Google's
// library: rebuilt from the members it uses, checked again, Google's own
// token endpoint and universe always named, so that nothing else of the
// merchant's text reaches the library. nil when c has none (an
// emulator).
func (c Config) serviceAccountJSON() ([]byte, error) {
	if c.CredentialsJSON == "" {
		return nil, nil
	}
	key, err := parseServiceAccount("destination.credentials_json", c.CredentialsJSON)
	if err != nil {
		return nil, err
	}
	return json.Marshal(serviceAccountKey{Type: key.Type, ProjectID: key.ProjectID, PrivateKeyID: key.PrivateKeyID,
		PrivateKey: key.PrivateKey, ClientEmail: key.ClientEmail, ClientID: key.ClientID, TokenURI: googleTokenURI,
		UniverseDomain: googleUniverseDomain})
}
