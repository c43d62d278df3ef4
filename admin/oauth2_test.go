package admin_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/testfixtures/tokenserver"
)

// attemptEveryWay makes the merchant's subscription get an attempt by
// every path there is, six requests: a delivery, a test event, a
// redelivery and the endpoint check's three; each must succeed.
func attemptEveryWay(h *harness, key, merchant, subID string) {
	t := h.t
	t.Helper()
	ev := h.publish(merchant, "payout.paid", `{"id":"po_every_way"}`)
	d := h.deliveriesOf(key, ev.ID)[0]
	if got := h.waitDelivery(key, d.ID, "settled", settled); got.Status != "succeeded" {
		t.Fatalf("delivery: %+v", got)
	}
	test := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + subID + "/send_test_event", Key: key})
	if test.Status != http.StatusAccepted {
		t.Fatalf("send_test_event: %d %s", test.Status, test.Body)
	}
	if got := h.waitDelivery(key, decode[delivery](t, test).ID, "settled", settled); got.Status != "succeeded" {
		t.Fatalf("test event: %+v", got)
	}
	if r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_deliveries/" + d.ID + "/redeliver", Key: key}); r.Status != http.StatusAccepted {
		t.Fatalf("redeliver: %d %s", r.Status, r.Body)
	}
	if got := h.waitDelivery(key, d.ID, "redelivered", hasAttempts(2)); got.Attempts[len(got.Attempts)-1].Status != "succeeded" {
		t.Fatalf("redelivery: %+v", got)
	}
	if check := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + subID + "/check", Key: key}); check.Status != http.StatusOK {
		t.Fatalf("check: %d %s", check.Status, check.Body)
	}
}

// oauth2Shown is an oauth2 authentication as a read shows it.
type oauth2Shown struct {
	ID             string `json:"id"`
	Authentication *struct {
		Type       string   `json:"type"`
		TokenURL   string   `json:"token_url"`
		ClientID   string   `json:"client_id"`
		Scopes     []string `json:"scopes"`
		Audience   *string  `json:"audience"`
		Credential string   `json:"credential"`
	} `json:"authentication"`
}

// ecKeyPEM is a new P-256 private key in PKCS #8 PEM, and its public key.
func ecKeyPEM(t *testing.T) (string, *ecdsa.PublicKey) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), &k.PublicKey
}

// TestOAuth2DeliveriesCarryABearerToken: every attempt path (a delivery,
// a test event, a redelivery, the endpoint check) sends the subscription's
// token, one token for all of them; a token the endpoint refuses (401) is
// replaced within the same attempt; a failing token endpoint fails the
// attempts with oauth_token and its status; reads show the credential's
// kind and never the secret, nor do the logs the secret or a token.
func TestOAuth2DeliveriesCarryABearerToken(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	h := newLoggedPipeline(t, &logs)
	key := h.merchant("m1")
	const secret = "s3cr3t-client-secret-value"
	server := tokenserver.New(t, "webhookd-m1", time.Now)
	server.Accept(secret)
	rcv := server.NewEndpoint(t)

	created := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
		Body: map[string]any{"url": rcv.URL, "events": []string{"*"}, "authentication": map[string]any{
			"type": "oauth2_client_credentials", "token_url": server.TokenURL(), "client_id": "webhookd-m1",
			"client_secret": secret, "scopes": []string{"webhooks:write"}}}})
	if created.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.Status, created.Body)
	}
	sub := decode[oauth2Shown](t, created)
	if a := sub.Authentication; a == nil || a.Type != "oauth2_client_credentials" || a.TokenURL != server.TokenURL() ||
		a.ClientID != "webhookd-m1" || len(a.Scopes) != 1 || a.Scopes[0] != "webhooks:write" || a.Audience != nil ||
		a.Credential != "client_secret" {
		t.Fatalf("authentication shown as %s", created.Body)
	}
	reads := []response{created, h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key})}

	attemptEveryWay(h, key, "m1", sub.ID)
	if n, refused := rcv.Accepted(), rcv.Refused(); n != 6 || refused != 0 {
		t.Fatalf("the endpoint accepted %d requests and refused %d, want 6 and 0", n, refused)
	}
	if n := server.Requests(); n != 1 {
		t.Fatalf("%d token requests for six deliveries, want 1", n)
	}

	// The authorization server revokes the token: the next attempt is
	// refused once, gets a new token and is accepted, one attempt.
	server.Revoke("token-1-webhookd-m1")
	ev := h.publish("m1", "payout.paid", `{"id":"po_2"}`)
	got := h.waitDelivery(key, h.deliveriesOf(key, ev.ID)[0].ID, "settled", settled)
	if got.Status != "succeeded" || len(got.Attempts) != 1 || rcv.Refused() != 1 || server.Requests() != 2 {
		t.Fatalf("after a revoked token: %+v, %d refused, %d token requests", got, rcv.Refused(), server.Requests())
	}

	// The token endpoint fails: each attempt fails with oauth_token and
	// the token endpoint's status, and is retried on the schedule.
	server.Failing(http.StatusServiceUnavailable)
	replaced := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key,
		Body: map[string]any{"authentication": map[string]any{"type": "oauth2_client_credentials",
			"token_url": server.TokenURL(), "client_id": "webhookd-m1", "client_secret": secret + "-rotated", "audience": "https://api.example"}}})
	if r := decode[oauth2Shown](t, replaced); r.Authentication == nil || r.Authentication.Audience == nil || *r.Authentication.Audience != "https://api.example" {
		t.Fatalf("replace: %d %s", replaced.Status, replaced.Body)
	}
	reads = append(reads, replaced)
	ev = h.publish("m1", "payout.paid", `{"id":"po_3"}`)
	failed := h.waitDelivery(key, h.deliveriesOf(key, ev.ID)[0].ID, "failed", settled)
	if failed.Status != "failed" || len(failed.Attempts) != 3 {
		t.Fatalf("delivery with a failing token endpoint: %+v", failed)
	}
	for _, a := range failed.Attempts {
		if a.Error == nil || *a.Error != "oauth_token" || a.HTTPStatus == nil || *a.HTTPStatus != http.StatusServiceUnavailable ||
			!strings.Contains(a.ResponseBody, "503") {
			t.Fatalf("attempt %d: error %v, status %v, body %q; want oauth_token and 503", a.Number, a.Error, a.HTTPStatus, a.ResponseBody)
		}
	}
	if sub := decode[subscription](t, h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key})); sub.Status != "enabled" {
		t.Fatalf("the subscription is %s after the token endpoint failed", sub.Status)
	}

	for _, r := range reads {
		if strings.Contains(string(r.Body), secret) {
			t.Fatalf("a read shows the secret: %s", r.Body)
		}
	}
	if l := logs.String(); l == "" || strings.Contains(l, secret) || strings.Contains(l, "token-1-webhookd") || strings.Contains(l, "token-2-webhookd") {
		t.Fatalf("the secret or a token is in the logs (or nothing was logged):\n%s", l)
	}
}

// TestOAuth2PrivateKeyJWT: with a private key instead of a secret, the
// token endpoint gets a private_key_jwt assertion it verifies with the
// public key, and the deliveries carry its token.
func TestOAuth2PrivateKeyJWT(t *testing.T) {
	t.Parallel()
	h := newLoggedPipeline(t, &syncBuffer{})
	key := h.merchant("m1")
	server := tokenserver.New(t, "webhookd-jwt", time.Now)
	private, public := ecKeyPEM(t)
	server.PublicKey = public
	rcv := server.NewEndpoint(t)
	created := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
		Body: map[string]any{"url": rcv.URL, "events": []string{"*"}, "authentication": map[string]any{
			"type": "oauth2_client_credentials", "token_url": server.TokenURL(), "client_id": "webhookd-jwt", "private_key": private}}})
	if sub := decode[oauth2Shown](t, created); sub.Authentication == nil || sub.Authentication.Credential != "private_key" ||
		strings.Contains(string(created.Body), "PRIVATE KEY") {
		t.Fatalf("create: %d %s", created.Status, created.Body)
	}
	for i := range 3 {
		ev := h.publish("m1", "payout.paid", `{"id":"po_`+string(rune('a'+i))+`"}`)
		if got := h.waitDelivery(key, h.deliveriesOf(key, ev.ID)[0].ID, "settled", settled); got.Status != "succeeded" {
			t.Fatalf("delivery %d: %+v (the token endpoint refused: %v)", i, got, server.Refused())
		}
	}
	if n, why := server.Requests(), server.Refused(); n != 1 || len(why) != 0 {
		t.Fatalf("%d token requests, refusals %v; want one accepted assertion", n, why)
	}
}

// TestLegacyOAuth2Authentication: the legacy surface takes and shows an
// oauth2 authentication in camelCase.
func TestLegacyOAuth2Authentication(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m1")
	r := h.legacy("create", key, "", map[string]any{"url": "https://example.com/h", "events": []string{"*"},
		"authentication": map[string]any{"type": "oauth2_client_credentials", "tokenUrl": "https://auth.example.com/token",
			"clientId": "legacy-client", "clientSecret": "legacy-secret-value", "scopes": []string{"a", "b"}}})
	if r.Status != http.StatusOK {
		t.Fatalf("legacy create: %d %s", r.Status, r.Body)
	}
	shown := decode[struct {
		Authentication map[string]any `json:"authentication"`
	}](t, r)
	if shown.Authentication["tokenUrl"] != "https://auth.example.com/token" || shown.Authentication["clientId"] != "legacy-client" ||
		shown.Authentication["credential"] != "client_secret" || strings.Contains(string(r.Body), "legacy-secret-value") {
		t.Fatalf("legacy create shows %s", r.Body)
	}
}

// TestOAuth2AuthenticationRefused: each malformed field is refused with
// parameter_invalid (parameter_missing when absent) naming it, on create
// and on update, without quoting a secret or a key.
func TestOAuth2AuthenticationRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m1")
	ecKey, _ := ecKeyPEM(t)
	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	weakDER, err := x509.MarshalPKCS8PrivateKey(weak)
	if err != nil {
		t.Fatal(err)
	}
	weakPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: weakDER}))
	const secret = "do-not-show-this-secret"
	oauth2 := func(fields ...any) map[string]any {
		m := map[string]any{"type": "oauth2_client_credentials", "token_url": "https://auth.example.com/oauth/token",
			"client_id": "webhookd", "client_secret": secret}
		for i := 0; i+1 < len(fields); i += 2 {
			if fields[i+1] == nil {
				delete(m, fields[i].(string))
				continue
			}
			m[fields[i].(string)] = fields[i+1]
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
		{"no token URL", oauth2("token_url", nil), "authentication.token_url", "parameter_missing"},
		{"token URL not a URL", oauth2("token_url", "auth.example.com/token"), "authentication.token_url", ""},
		{"token URL with credentials", oauth2("token_url", "https://u:p@auth.example.com/token"), "authentication.token_url", ""},
		{"token URL not a string", oauth2("token_url", 7), "authentication.token_url", ""},
		{"no client id", oauth2("client_id", nil), "authentication.client_id", "parameter_missing"},
		{"client id too long", oauth2("client_id", strings.Repeat("c", 257)), "authentication.client_id", ""},
		{"neither secret nor key", oauth2("client_secret", nil), "authentication.client_secret", "parameter_missing"},
		{"secret and key", oauth2("private_key", ecKey), "authentication.private_key", ""},
		{"key not PEM", oauth2("client_secret", nil, "private_key", "hunter2"), "authentication.private_key", ""},
		{"RSA key too short", oauth2("client_secret", nil, "private_key", weakPEM), "authentication.private_key", ""},
		{"scopes not an array", oauth2("scopes", "read write"), "authentication.scopes", ""},
		{"scope empty", oauth2("scopes", []string{""}), "authentication.scopes", ""},
		{"scope with a space", oauth2("scopes", []string{"read write"}), "authentication.scopes", ""},
		{"audience too long", oauth2("audience", strings.Repeat("a", 513)), "authentication.audience", ""},
		{"an mtls field", oauth2("client_certificate", "x"), "authentication", ""},
		{"camelCase field on /v1", oauth2("tokenUrl", "https://auth.example.com/token"), "authentication", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := h.with(t)
			code := tc.code
			if code == "" {
				code = "parameter_invalid"
			}
			r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key,
				Body: map[string]any{"url": "https://example.com/h", "events": []string{"*"}, "authentication": tc.auth}})
			if m := expectError(t, r, http.StatusBadRequest, code); m["param"] != tc.param {
				t.Fatalf("create: param %v, want %s (%v)", m["param"], tc.param, m["message"])
			}
			u := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + existing.ID, Key: key,
				Body: map[string]any{"authentication": tc.auth}})
			if m := expectError(t, u, http.StatusBadRequest, code); m["param"] != tc.param {
				t.Fatalf("update: param %v, want %s (%v)", m["param"], tc.param, m["message"])
			}
			for _, body := range []string{string(r.Body), string(u.Body)} {
				if strings.Contains(body, secret) || strings.Contains(body, ecKey[40:90]) || strings.Contains(body, weakPEM[40:90]) {
					t.Fatalf("the refusal quotes a secret: %s", body)
				}
			}
		})
	}
}
