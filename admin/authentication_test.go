package admin_test

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/testfixtures/testpki"
)

// mtlsReceiver is an endpoint that requires a client certificate issued by
// clientCA and serves one of serverCA; it counts the requests it answered.
type mtlsReceiver struct {
	url      string
	received atomic.Int64
}

func newMTLSReceiver(t *testing.T, serverCA, clientCA *testpki.CA) *mtlsReceiver {
	t.Helper()
	rc := &mtlsReceiver{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.received.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCA.Pool(),
		Certificates: []tls.Certificate{serverCA.Server(t).TLS(t)}}
	// The handshakes refused on purpose are not news.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	rc.url = srv.URL + "/hooks"
	return rc
}

// authenticated is the authentication summary as a client decodes it.
type authenticated struct {
	ID             string `json:"id"`
	Authentication *struct {
		Type     string     `json:"type"`
		Subject  string     `json:"subject"`
		Issuer   string     `json:"issuer"`
		Serial   string     `json:"serial"`
		NotAfter *time.Time `json:"not_after"`
		ServerCA bool       `json:"server_ca"`
	} `json:"authentication"`
}

// TestMTLSDeliveriesAndKeyNeverShown: a subscription with an mtls
// authentication gets every delivery (the first attempt, a test event, a
// redelivery, the endpoint check) over a connection presenting its
// certificate; reads show the certificate's summary, never the key, nor
// do the logs; an update replaces it (another CA's certificate: the
// endpoint refuses the handshake, tls_handshake, retried) and null removes
// it.
func TestMTLSDeliveriesAndKeyNeverShown(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	h := newLoggedPipeline(t, &logs)
	key := h.merchant("m1")
	now := time.Now()
	serverCA, clientCA, strangerCA := testpki.NewCA(t, "endpoint CA"), testpki.NewCA(t, "client CA"), testpki.NewCA(t, "stranger CA")
	rcv := newMTLSReceiver(t, serverCA, clientCA)
	client := clientCA.Client(t, "webhookd-m1", now.Add(-time.Hour), now.Add(90*24*time.Hour))

	created := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
		Body: map[string]any{"url": rcv.url, "events": []string{"*"}, "authentication": map[string]any{
			"type": "mtls", "client_certificate": client.CertPEM, "client_key": client.KeyPEM, "server_ca": serverCA.PEM}}})
	if created.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.Status, created.Body)
	}
	sub := decode[authenticated](t, created)
	if a := sub.Authentication; a == nil || a.Type != "mtls" || a.Subject != "CN=webhookd-m1,O=webhookd tests" ||
		a.Issuer != "CN=client CA" || a.Serial != client.Cert.SerialNumber.String() || !a.ServerCA ||
		a.NotAfter == nil || !a.NotAfter.Equal(client.Cert.NotAfter) {
		t.Fatalf("authentication shown as %s", created.Body)
	}
	keyMaterial := client.KeyPEM[40:100] // inside the base64 of the key
	reads := []response{created}
	for _, path := range []string{"/v1/webhook_subscriptions/" + sub.ID, "/v1/webhook_subscriptions"} {
		reads = append(reads, h.do(request{Method: http.MethodGet, Path: path, Key: key}))
	}

	attemptEveryWay(h, key, "m1", sub.ID)
	if n := rcv.received.Load(); n != 6 { // delivery, test, redelivery, the check's three
		t.Fatalf("the endpoint answered %d requests, want 6", n)
	}

	// Another CA's certificate: the endpoint refuses the handshake, and
	// the attempt is a failure like any other (retried, then failed).
	other := strangerCA.ValidClient(t, "stranger")
	replaced := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key,
		Body: map[string]any{"authentication": map[string]any{
			"type": "mtls", "client_certificate": other.CertPEM, "client_key": other.KeyPEM, "server_ca": serverCA.PEM}}})
	if got := decode[authenticated](t, replaced); got.Authentication == nil || got.Authentication.Issuer != "CN=stranger CA" {
		t.Fatalf("after replace: %d %s", replaced.Status, replaced.Body)
	}
	reads = append(reads, replaced)
	ev := h.publish("m1", "payout.paid", `{"id":"po_2"}`)
	refused := h.waitDelivery(key, h.deliveriesOf(key, ev.ID)[0].ID, "failed", settled)
	if refused.Status != "failed" || len(refused.Attempts) != 3 {
		t.Fatalf("delivery with another CA's certificate: %+v", refused)
	}
	for _, a := range refused.Attempts {
		if a.Error == nil || *a.Error != "tls_handshake" {
			t.Fatalf("attempt %d error %v, want tls_handshake", a.Number, a.Error)
		}
	}

	removed := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key, Body: `{"authentication":null}`})
	if got := decode[authenticated](t, removed); removed.Status != http.StatusOK || got.Authentication != nil {
		t.Fatalf("after remove: %d %s", removed.Status, removed.Body)
	}
	for _, r := range append(reads, removed) {
		if bytes.Contains(r.Body, []byte(keyMaterial)) || bytes.Contains(r.Body, []byte(other.KeyPEM[40:100])) ||
			bytes.Contains(r.Body, []byte("PRIVATE KEY")) {
			t.Fatalf("a read shows the key: %s", r.Body)
		}
	}
	if l := logs.String(); l == "" || strings.Contains(l, keyMaterial) || strings.Contains(l, other.KeyPEM[40:100]) || strings.Contains(l, "PRIVATE KEY") {
		t.Fatalf("the key is in the logs (or nothing was logged):\n%s", l)
	}
}

// TestMTLSAuthenticationRefused: each malformed field is refused with
// parameter_invalid (parameter_missing when absent) naming it, on create
// and on update.
func TestMTLSAuthenticationRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m1")
	now := time.Now()
	ca := testpki.NewCA(t, "client CA")
	good := ca.ValidClient(t, "good")
	other := ca.ValidClient(t, "other")
	expired := ca.Client(t, "expired", now.Add(-48*time.Hour), now.Add(-time.Hour))
	mtls := func(fields ...string) map[string]any {
		m := map[string]any{"type": "mtls", "client_certificate": good.CertPEM, "client_key": good.KeyPEM}
		for i := 0; i+1 < len(fields); i += 2 {
			m[fields[i]] = fields[i+1]
		}
		return m
	}
	existing := h.createSubscription(key, map[string]any{"url": "https://example.com/h", "events": []string{"*"}})
	for _, tc := range []struct {
		name  string
		auth  any
		param string
		code  string // "" for parameter_invalid
	}{
		{"not an object", "mtls", "authentication", ""},
		{"unknown field", mtls("password", "x"), "authentication", ""},
		{"camelCase field on /v1", map[string]any{"type": "mtls", "clientCertificate": good.CertPEM, "client_key": good.KeyPEM}, "authentication", ""},
		{"no type", map[string]any{"client_certificate": good.CertPEM}, "authentication.type", "parameter_missing"},
		{"unknown type", mtls("type", "basic"), "authentication.type", ""},
		{"type not a string", map[string]any{"type": 1}, "authentication.type", ""},
		{"certificate not PEM", mtls("client_certificate", "not a certificate"), "authentication.client_certificate", ""},
		{"expired certificate", mtls("client_certificate", expired.CertPEM, "client_key", expired.KeyPEM), "authentication.client_certificate", ""},
		{"certificate and key do not match", mtls("client_key", other.KeyPEM), "authentication.client_certificate", ""},
		{"no certificate", mtls("client_certificate", ""), "authentication.client_certificate", "parameter_missing"},
		{"key not PEM", mtls("client_key", "hunter2"), "authentication.client_key", ""},
		{"no key", map[string]any{"type": "mtls", "client_certificate": good.CertPEM}, "authentication.client_key", "parameter_missing"},
		{"server CA not PEM", mtls("server_ca", "ca"), "authentication.server_ca", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := h.with(t)
			r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
				Body: map[string]any{"url": "https://example.com/h", "events": []string{"*"}, "authentication": tc.auth}})
			code := tc.code
			if code == "" {
				code = "parameter_invalid"
			}
			m := expectError(t, r, http.StatusBadRequest, code)
			if m["param"] != tc.param {
				t.Fatalf("create: param %v, want %s (%v)", m["param"], tc.param, m["message"])
			}
			r = h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + existing.ID, Key: key,
				Body: map[string]any{"authentication": tc.auth}})
			m = expectError(t, r, http.StatusBadRequest, code)
			if m["param"] != tc.param {
				t.Fatalf("update: param %v, want %s (%v)", m["param"], tc.param, m["message"])
			}
			if strings.Contains(string(r.Body), good.KeyPEM[40:100]) {
				t.Fatalf("the refusal quotes the key: %s", r.Body)
			}
		})
	}
}

// TestLegacyMTLSAuthentication: the legacy surface takes and shows the
// authentication in camelCase.
func TestLegacyMTLSAuthentication(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m1")
	ca := testpki.NewCA(t, "client CA")
	good := ca.ValidClient(t, "legacy")
	r := h.legacy("create", key, "", map[string]any{"url": "https://example.com/h", "events": []string{"*"},
		"authentication": map[string]any{"type": "mtls", "clientCertificate": good.CertPEM, "clientKey": good.KeyPEM, "serverCa": ca.PEM}})
	if r.Status != http.StatusOK {
		t.Fatalf("legacy create: %d %s", r.Status, r.Body)
	}
	shown := decode[struct {
		ID             string         `json:"id"`
		Authentication map[string]any `json:"authentication"`
	}](t, r)
	if shown.Authentication["subject"] != "CN=legacy,O=webhookd tests" || shown.Authentication["serverCa"] != true ||
		shown.Authentication["notAfter"] == nil || bytes.Contains(r.Body, []byte(good.KeyPEM[40:100])) {
		t.Fatalf("legacy create shows %s", r.Body)
	}
	r = h.legacy("update", key, "", map[string]any{"id": shown.ID, "authentication": map[string]any{"type": "mtls",
		"client_certificate": good.CertPEM, "client_key": good.KeyPEM}})
	if r.Status != http.StatusBadRequest {
		t.Fatalf("legacy update in snake_case: %d %s", r.Status, r.Body)
	}
	r = h.legacy("update", key, "", map[string]any{"id": shown.ID, "authentication": nil})
	if r.Status != http.StatusOK || !bytes.Contains(r.Body, []byte(`"authentication":null`)) {
		t.Fatalf("legacy update removing it: %d %s", r.Status, r.Body)
	}
	// The /v1 read of the same subscription shows none either.
	if got := decode[authenticated](t, h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + shown.ID, Key: key})); got.Authentication != nil {
		t.Fatalf("/v1 read after the legacy removal: %+v", got.Authentication)
	}
}

// FuzzSubscriptionAuthenticationBody: create bodies with an
// authentication, malformed ones included (PEM cut short, a key of
// another certificate, wrong types, unknown fields), are answered 201 or a
// 4xx, never a 500.
func FuzzSubscriptionAuthenticationBody(f *testing.F) {
	ca := testpki.NewCA(f, "fuzz CA")
	good := ca.ValidClient(f, "fuzz")
	other := ca.ValidClient(f, "other")
	body := func(auth any) string {
		b, err := json.Marshal(map[string]any{"url": "https://example.com/hook", "events": []string{"*"}, "authentication": auth})
		if err != nil {
			f.Fatal(err)
		}
		return string(b)
	}
	fuzzBody(f, bodyTarget{method: http.MethodPost, path: "/v1/webhook_subscriptions", accepted: checkSubscription,
		seeds: []string{
			body(map[string]any{"type": "mtls", "client_certificate": good.CertPEM, "client_key": good.KeyPEM, "server_ca": ca.PEM}),
			body(map[string]any{"type": "mtls", "client_certificate": good.CertPEM[:200], "client_key": good.KeyPEM}),
			body(map[string]any{"type": "mtls", "client_certificate": good.CertPEM, "client_key": other.KeyPEM}),
			body(map[string]any{"type": "mtls", "client_certificate": good.CertPEM, "client_key": good.KeyPEM, "server_ca": 1}),
			body(map[string]any{"type": "mtls", "client_certificate": good.CertPEM, "client_key": good.KeyPEM, "extra": true}),
			body(map[string]any{"type": "oauth2_client_credentials"}),
			body(map[string]any{"type": "oauth2_client_credentials", "token_url": "https://auth.example.com/token", "client_id": "c",
				"client_secret": "s", "scopes": []string{"a", "b"}, "audience": "https://api.example.com"}),
			body(map[string]any{"type": "oauth2_client_credentials", "token_url": "https://auth.example.com/token", "client_id": "c",
				"private_key": good.KeyPEM}),
			body(map[string]any{"type": "oauth2_client_credentials", "token_url": "http://[::1", "client_id": "c", "scopes": []any{1, nil}}),
			body([]string{"mtls"}),
			body(nil),
		}})
}
