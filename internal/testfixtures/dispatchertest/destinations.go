package dispatchertest

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
	webhooks "github.com/webhookd/webhookd/receiver"
	"github.com/webhookd/webhookd/retry"
)

// SlowSchedule keeps retrying long enough for a broker to come back.
var SlowSchedule = retry.Schedule{Delays: []time.Duration{
	100 * time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond,
	500 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond, time.Second, time.Second, time.Second, time.Second,
	time.Second, time.Second, time.Second, time.Second, time.Second, time.Second, time.Second, time.Second}}

// SubscribeTo creates an enabled subscription of merchant to events
// delivered to destination (its JSON, as the API takes it) through the
// registry, as the API would, and returns it with its secret.
func (e *Env) SubscribeTo(merchant string, destination map[string]any, ordering string, events ...string) (store.Subscription, string) {
	e.T.Helper()
	ctx := context.Background()
	if _, err := e.Store.Merchants.EnsureMerchant(ctx, merchant, TestVersion); err != nil {
		e.T.Fatal(err)
	}
	raw, err := json.Marshal(destination)
	if err != nil {
		e.T.Fatal(err)
	}
	d := subscriptions.Draft{Events: events, Destination: raw}
	if ordering != "" {
		d.Ordering = []byte(`{"key": "` + ordering + `"}`)
	}
	return e.SubscribeDraft(merchant, d)
}

// SubscribeDraft subscribes merchant as the API would take d, by the
// rules of the engine's kinds, and returns the subscription and its
// secret.
func (e *Env) SubscribeDraft(merchant string, d subscriptions.Draft) (store.Subscription, string) {
	e.T.Helper()
	ctx := context.Background()
	if _, err := e.Store.Merchants.EnsureMerchant(ctx, merchant, TestVersion); err != nil {
		e.T.Fatal(err)
	}
	reg := subscriptions.NewRegistry(e.Store.Subscriptions, e.Store.Listeners, bytes.Repeat([]byte{9}, 32), subscriptions.Rules{
		AllowHTTPTargets: true, AllowPrivateTargets: true, EventTypes: append(dispatcher.DefaultEventTypes(), "payout.paid"),
		Kinds: e.Cfg.Kinds})
	sub, secret, err := reg.Create(ctx, merchant, d)
	if err != nil {
		e.T.Fatal(err)
	}
	return sub, secret
}

// Verifier checks messages signed with secret.
func Verifier(t *testing.T, secret string) *webhooks.Verifier {
	t.Helper()
	v, err := webhooks.NewVerifier(webhooks.VerifierConfig{Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// AttemptErrors are the error codes of a delivery's attempts, "" for a
// success.
func AttemptErrors(d store.Delivery) []string {
	out := make([]string, len(d.Attempts))
	for i, a := range d.Attempts {
		if a.Error != nil {
			out[i] = *a.Error
		}
	}
	return out
}

// CheckBrokerAttempts checks a delivery that succeeded after failing with
// code: every attempt but the last failed with it, the last one recorded
// the broker's confirmation.
func CheckBrokerAttempts(t *testing.T, d store.Delivery, code string) {
	t.Helper()
	if d.Status != store.DeliverySucceeded || len(d.Attempts) < 2 {
		t.Fatalf("delivery %s after %d attempts (%v), want succeeded after a failure", d.Status, len(d.Attempts), AttemptErrors(d))
	}
	for _, a := range d.Attempts[:len(d.Attempts)-1] {
		if a.Error == nil || *a.Error != code || a.HTTPStatus != nil || a.ResponseBody == "" {
			t.Errorf("failed attempt %d: error %v, body %q; want %s with the broker's error", a.Number, a.Error, a.ResponseBody, code)
		}
	}
	if last := d.Attempts[len(d.Attempts)-1]; last.Error != nil || !strings.Contains(last.ResponseBody, "confirmed") {
		t.Errorf("last attempt: error %v, body %q; want confirmed", last.Error, last.ResponseBody)
	}
}
