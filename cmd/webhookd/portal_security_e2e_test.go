package main

import (
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/internal/testfixtures/testpki"
)

// TestPortalEndpointSecurityInTheBrowser: the endpoint form makes an mTLS
// endpoint (a certificate and key pasted) and an OAuth2 one (token URL,
// client id, secret, scopes), and the endpoint pages show each mode: the
// certificate's subject, issuer and expiry with the 14-day warning, the
// token URL, client id and which credential, never the key or the secret;
// an edit that leaves the section alone keeps the authentication.
func TestPortalEndpointSecurityInTheBrowser(t *testing.T) {
	storetest.FullLane(t, "a browser test of the real binary")
	t.Parallel() // it measures no latency: the browser tests run beside each other
	e := newEngine(t)
	e.start()
	key := e.keysCreate("m_security")
	ca := testpki.NewCA(t, "portal CA")
	now := time.Now()
	client := ca.Client(t, "portal-client", now.Add(-time.Hour), now.Add(10*24*time.Hour))
	const secret = "portal-oauth-secret-never-shown"
	b := newBrowser(t)
	tb := b.newTab(1280)
	defer tb.checkClean()
	tb.open("http://" + e.public + "/portal/#token=" + key)
	tb.see("Endpoints", "No endpoints yet.")

	// Mutual TLS, pasted.
	tb.route("#/endpoints/new")
	tb.see("Endpoint security", "Authentication", "Signature scheme")
	tb.typeInto("URL", "https://mtls.example.com/hooks")
	tb.setField("Authentication", "mtls")
	tb.setField("Client certificate", client.CertPEM)
	tb.setField("Client key", client.KeyPEM)
	tb.click("Create endpoint")
	tb.see("Endpoint created.", "Mutual TLS (client certificate)", "CN=portal-client,O=webhookd tests", "CN=portal CA",
		"This certificate expires within 14 days", "HMAC-SHA256")
	if strings.Contains(tb.text(), "PRIVATE KEY") {
		t.Fatalf("the endpoint page shows the key:\n%s", tb.text())
	}
	tb.screenshot("endpoint-mtls")

	// OAuth2 client credentials, with a secret.
	tb.route("#/endpoints/new")
	tb.see("Endpoint security")
	tb.typeInto("URL", "https://oauth.example.com/hooks")
	tb.setField("Authentication", "oauth2_client_credentials")
	tb.typeInto("Token URL", "https://auth.example.com/oauth2/token")
	tb.typeInto("Client ID", "webhookd-portal")
	tb.typeInto("Client secret", secret)
	tb.typeInto("Scopes", "webhooks:write events:read")
	tb.click("Create endpoint")
	tb.see("Endpoint created.", "OAuth2 client credentials (bearer token)", "https://auth.example.com/oauth2/token",
		"webhookd-portal", "A client secret", "webhooks:write events:read")
	tb.notSee(secret)
	id := strings.TrimPrefix(tb.hashOf(), "#/endpoints/")

	// An edit that leaves the security section as it is keeps it.
	tb.route("#/endpoints/" + id + "/edit")
	tb.see("Keep as it is (OAuth2)")
	tb.typeInto("Description", "Orders")
	tb.click("Save changes")
	tb.see("Endpoint saved.", "Orders", "OAuth2 client credentials (bearer token)", "webhookd-portal")

	// A form left half-filled is explained before anything is sent.
	tb.route("#/endpoints/" + id + "/edit")
	tb.setField("Authentication", "mtls")
	tb.click("Save changes")
	tb.see("Paste the client certificate and its key (PEM).")
}
