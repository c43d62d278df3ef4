package sns_test

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/desttest"
	"github.com/webhookd/webhookd/receiver"
	"github.com/webhookd/webhookd/signer"
)

// env is the environment desttest gives a kind: a plain dialer, 5 s.
func env() destination.Env {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return destination.Env{Dial: d.DialContext, Timeout: 5 * time.Second, Clock: clock.Or(nil), Version: "test"}
}

// message is a message signed as the engine signs an attempt, with a
// fresh secret, its headers those desttest's carry: the Standard
// Webhooks three, content-type, user-agent and one of the merchant's.
func message(t *testing.T, eventID, orderingKey string) (string, destination.Message) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"id": eventID, "type": "payout.paid", "data": map[string]any{"amount": 1250}})
	secret, m := messageWithBody(t, eventID, body)
	m.OrderingKey = orderingKey
	return secret, m
}

// messageWithBody is message with body, unordered.
func messageWithBody(t *testing.T, eventID string, body []byte) (string, destination.Message) {
	t.Helper()
	secret, err := signer.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	key, err := signer.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "webhookd/test")
	h.Set("X-Merchant-Header", "kept")
	signer.SetHeaders(h, eventID, now, body, key)
	headers := map[string]string{}
	for name := range h {
		headers[strings.ToLower(name)] = h.Get(name)
	}
	return secret, destination.Message{DeliveryID: "dlv_" + eventID, EventID: eventID, EventType: "payout.paid", Body: body,
		ContentType: "application/json", Headers: headers, SignedAt: now, Size: 1}
}

// verify checks with package receiver that what arrived is m, signed,
// from its body and attributes alone.
func verify(t *testing.T, secret string, m destination.Message, got desttest.Arrived) {
	t.Helper()
	if string(got.Body) != string(m.Body) {
		t.Fatalf("body arrived as %q, want %q", got.Body, m.Body)
	}
	v, err := receiver.NewVerifier(receiver.VerifierConfig{Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.VerifyValues(got.Headers["webhook-id"], got.Headers["webhook-timestamp"], got.Headers["webhook-signature"], got.Body); err != nil {
		t.Fatalf("the message that arrived does not verify: %v (attributes %v)", err, got.Headers)
	}
}
