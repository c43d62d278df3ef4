package subscriptions

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/keybounds"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/signer"
)

// Authentication types.
const (
	// AuthenticationMTLS presents a client certificate on every connection
	// to the endpoint.
	AuthenticationMTLS = "mtls"
)

// maxPEMLength bounds each PEM field: a certificate chain of a few
// certificates, with room to spare.
const maxPEMLength = 64 << 10

// AuthenticationInput is an endpoint authentication as a merchant gives
// it, before any rule is checked; nil fields are absent. Which fields a
// type takes is the type's to say.
type AuthenticationInput struct {
	Type              *string
	ClientCertificate *string
	ClientKey         *string
	ServerCA          *string
	// The oauth2_client_credentials fields (oauth2.go); Scopes nil is
	// absent.
	TokenURL, ClientID, ClientSecret, PrivateKey, Audience *string
	Scopes                                                 []string
}

// Authentication is a checked endpoint authentication, the whole of it:
// what is sealed for storage and what the dispatcher opens for each
// attempt. It holds secrets: it prints as its type alone.
type Authentication struct {
	Type string `json:"type"`
	// ClientCertificate (a PEM chain, the leaf first) and ClientKey (PEM)
	// are the mtls identity; ServerCA (PEM), when set, is the only root
	// the endpoint's certificate may chain to.
	ClientCertificate string `json:"client_certificate,omitempty"`
	ClientKey         string `json:"client_key,omitempty"`
	ServerCA          string `json:"server_ca,omitempty"`
	// TokenURL, ClientID, ClientSecret or PrivateKey (exactly one),
	// Scopes and Audience are the oauth2_client_credentials credentials
	// (oauthtoken.Credentials).
	TokenURL     string   `json:"token_url,omitempty"`
	ClientID     string   `json:"client_id,omitempty"`
	ClientSecret string   `json:"client_secret,omitempty"`
	PrivateKey   string   `json:"private_key,omitempty"`
	Scopes       []string `json:"scopes,omitempty"`
	Audience     string   `json:"audience,omitempty"`
}

// String keeps an Authentication printed by mistake from showing a key.
func (a Authentication) String() string {
	return "subscriptions.Authentication(" + a.Type + ", redacted)"
}

// GoString is String, for %#v.
func (a Authentication) GoString() string { return a.String() }

// LogValue is String, for slog.
func (a Authentication) LogValue() slog.Value { return slog.StringValue(a.String()) }

// ClientTLS is an mtls authentication parsed for a TLS client.
type ClientTLS struct {
	// Certificate is the client certificate and its key.
	Certificate tls.Certificate
	// ServerCA is the only root of the endpoint's certificate; nil: the
	// system's roots.
	ServerCA *x509.CertPool
}

// ErrAuthenticationInvalid: a stored authentication breaks a rule of
// this build (a key or a chain beyond keybounds, set by an older build).
// It wraps the rule's *invalid.Error, which names the field and never
// quotes its value; its attempt error code is CodeAuthenticationInvalid.
var ErrAuthenticationInvalid = errors.New(CodeAuthenticationInvalid)

// CodeAuthenticationInvalid is the attempt error code of
// ErrAuthenticationInvalid.
const CodeAuthenticationInvalid = "authentication_invalid"

// ClientTLS parses an mtls authentication's certificate, key and server
// CA, checking their bounds again (an error wrapping
// ErrAuthenticationInvalid). They were checked when they were set; any
// other error means the stored value is not what was checked.
func (a Authentication) ClientTLS() (ClientTLS, error) {
	if a.Type != AuthenticationMTLS {
		return ClientTLS{}, fmt.Errorf("authentication of type %q has no client certificate", a.Type)
	}
	// The bounds of keys and chains again, before any of it is used: a
	// value stored by an older build may hold a key too large to sign
	// with at each handshake.
	if err := checkPrivateKey("authentication.client_key", a.ClientKey); err != nil {
		return ClientTLS{}, fmt.Errorf("%w: %w", ErrAuthenticationInvalid, err)
	}
	if _, err := parseCertificates("authentication.client_certificate", a.ClientCertificate); err != nil {
		return ClientTLS{}, fmt.Errorf("%w: %w", ErrAuthenticationInvalid, err)
	}
	cert, err := tls.X509KeyPair([]byte(a.ClientCertificate), []byte(a.ClientKey))
	if err != nil {
		return ClientTLS{}, fmt.Errorf("client certificate: %w", err)
	}
	out := ClientTLS{Certificate: cert}
	if a.ServerCA != "" {
		cas, err := parseCertificates("authentication.server_ca", a.ServerCA)
		if err != nil {
			return ClientTLS{}, fmt.Errorf("%w: %w", ErrAuthenticationInvalid, err)
		}
		out.ServerCA = x509.NewCertPool()
		for _, ca := range cas {
			out.ServerCA.AddCert(ca)
		}
	}
	return out, nil
}

// OpenAuthentication opens what SealAuthentication sealed.
func OpenAuthentication(sealer *signer.Sealer, sealed []byte) (Authentication, error) {
	plain, err := sealer.Open(sealed)
	if err != nil {
		return Authentication{}, fmt.Errorf("open authentication: %w", err)
	}
	var a Authentication
	if err := json.Unmarshal([]byte(plain), &a); err != nil {
		// The JSON error could quote the key: say only that it failed.
		return Authentication{}, fmt.Errorf("open authentication: not the JSON of an authentication")
	}
	return a, nil
}

// sealAuthentication seals a checked authentication with its summary for
// storage.
func sealAuthentication(sealer *signer.Sealer, a Authentication, summary store.AuthenticationSummary) (*store.Authentication, error) {
	plain, err := json.Marshal(a)
	if err != nil {
		return nil, fmt.Errorf("authentication: %w", err)
	}
	sealed, err := sealer.Seal(string(plain))
	if err != nil {
		return nil, fmt.Errorf("authentication: %w", err)
	}
	return &store.Authentication{Sealed: sealed, Summary: summary}, nil
}

// checkAuthentication applies the rules of an authentication's type to
// in, at now (a certificate must be valid then), and returns it checked
// with its public summary. param prefixes each field's name.
func checkAuthentication(param string, in AuthenticationInput, now time.Time) (Authentication, store.AuthenticationSummary, error) {
	if in.Type == nil || *in.Type == "" {
		return Authentication{}, store.AuthenticationSummary{}, invalid.Missing(param + ".type")
	}
	switch *in.Type {
	case AuthenticationMTLS:
		return checkMTLS(param, in, now)
	default:
		return Authentication{}, store.AuthenticationSummary{}, invalid.Value(param+".type", "authentication_type_unknown",
			fmt.Sprintf("%s.type must be %q or %q; %s is not a type of authentication.", param, AuthenticationMTLS,
				AuthenticationOAuth2, invalid.Quote(*in.Type)))
	}
}

// checkMTLS checks an mtls authentication: a PEM certificate chain valid
// at now, the PEM private key of its leaf, and an optional PEM server CA.
func checkMTLS(param string, in AuthenticationInput, now time.Time) (Authentication, store.AuthenticationSummary, error) {
	certParam, keyParam, caParam := param+".client_certificate", param+".client_key", param+".server_ca"
	none := store.AuthenticationSummary{}
	if in.TokenURL != nil || in.ClientID != nil || in.ClientSecret != nil || in.PrivateKey != nil || in.Audience != nil || in.Scopes != nil {
		return Authentication{}, none, invalid.Value(param, "authentication_field_of_other_type",
			param+" of type "+AuthenticationMTLS+" takes no token_url, client_id, client_secret, private_key, scopes or audience.")
	}
	if in.ClientCertificate == nil || *in.ClientCertificate == "" {
		return Authentication{}, none, invalid.Missing(certParam)
	}
	if in.ClientKey == nil || *in.ClientKey == "" {
		return Authentication{}, none, invalid.Missing(keyParam)
	}
	chain, err := parseCertificates(certParam, *in.ClientCertificate)
	if err != nil {
		return Authentication{}, none, err
	}
	leaf := chain[0]
	switch {
	case now.After(leaf.NotAfter):
		return Authentication{}, none, invalid.Value(certParam, "certificate_expired", fmt.Sprintf(
			"%s expired at %s.", certParam, leaf.NotAfter.UTC().Format(time.RFC3339)))
	case now.Before(leaf.NotBefore):
		return Authentication{}, none, invalid.Value(certParam, "certificate_not_yet_valid", fmt.Sprintf(
			"%s is not valid before %s.", certParam, leaf.NotBefore.UTC().Format(time.RFC3339)))
	}
	if err := checkPrivateKey(keyParam, *in.ClientKey); err != nil {
		return Authentication{}, none, err
	}
	if _, err := tls.X509KeyPair([]byte(*in.ClientCertificate), []byte(*in.ClientKey)); err != nil {
		// The key parsed: what is left is a pair that does not match.
		return Authentication{}, none, invalid.Value(certParam, "certificate_key_mismatch",
			certParam+" does not match "+keyParam+": the key must be the private key of the first certificate.")
	}
	a := Authentication{Type: AuthenticationMTLS, ClientCertificate: *in.ClientCertificate, ClientKey: *in.ClientKey}
	if in.ServerCA != nil && *in.ServerCA != "" {
		if _, err := parseCertificates(caParam, *in.ServerCA); err != nil {
			return Authentication{}, none, err
		}
		a.ServerCA = *in.ServerCA
	}
	notAfter := leaf.NotAfter.UTC()
	return a, store.AuthenticationSummary{Type: AuthenticationMTLS, Subject: leaf.Subject.String(), Issuer: leaf.Issuer.String(),
		Serial: leaf.SerialNumber.String(), NotAfter: &notAfter, ServerCA: a.ServerCA != ""}, nil
}

// parseCertificates reads a PEM chain: one CERTIFICATE block or more and
// nothing else.
func parseCertificates(param, s string) ([]*x509.Certificate, error) {
	notPEM := invalid.Value(param, "pem_invalid", param+" must be one or more PEM CERTIFICATE blocks (-----BEGIN CERTIFICATE-----).")
	if len(s) > maxPEMLength {
		return nil, invalid.Value(param, "pem_too_long", fmt.Sprintf("%s must be at most %d characters.", param, maxPEMLength))
	}
	var chain []*x509.Certificate
	rest := []byte(s)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, notPEM
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, invalid.Value(param, "certificate_invalid", param+" holds a certificate that cannot be parsed (DER inside PEM).")
		}
		chain = append(chain, cert)
	}
	if len(chain) == 0 || len(bytes.TrimSpace(rest)) != 0 {
		return nil, notPEM
	}
	if err := keybounds.Fault(param, keybounds.CheckChain(chain)); err != nil {
		return nil, err
	}
	return chain, nil
}

// checkPrivateKey reads one PEM private key (PKCS #8, PKCS #1 or SEC 1)
// within keybounds. Its messages never quote the value.
func checkPrivateKey(param, s string) error {
	if len(s) > maxPEMLength {
		return invalid.Value(param, "pem_too_long", fmt.Sprintf("%s must be at most %d characters.", param, maxPEMLength))
	}
	_, err := keybounds.ParsePrivateKeyPEM([]byte(s))
	return keybounds.Fault(param, err)
}

// sealAuthentication checks in at the rules' now and seals it (nil: none).
func (g *Registry) sealAuthentication(in *AuthenticationInput) (*store.Authentication, error) {
	if in == nil {
		return nil, nil
	}
	a, summary, err := g.check.authentication("authentication", *in)
	if err != nil {
		return nil, err
	}
	sealer, err := signer.NewSealer(g.masterKey)
	if err != nil {
		return nil, fmt.Errorf("authentication: %w", err)
	}
	return sealAuthentication(sealer, a, summary)
}
