package notify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/dispatcher/notify"
	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
	"github.com/webhookd/webhookd/internal/testfixtures/tokenserver"
)

// received is the envelope of an operational event a receiver got.
type received struct {
	Type string         `json:"type"`
	Data map[string]any `json:"payload"`
}

// operational decodes what rcv got, in order.
func operational(t *testing.T, rcv *dispatchertest.Receiver) []received {
	t.Helper()
	var out []received
	for _, r := range rcv.Got() {
		var env received
		if err := json.Unmarshal(r.Body, &env); err != nil {
			t.Fatalf("body %s: %v", r.Body, err)
		}
		out = append(out, env)
	}
	return out
}

// taking is a receiver that takes every delivery.
func taking(t *testing.T) *dispatchertest.Receiver {
	return dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusOK))
}

// types lists the event types of evs.
func types(evs []received) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

// A flapping subscription A yields one event per change of state at B,
// the merchant's other subscription, within seconds, and none at A; a
// state set again, or an enabled never announced disabled, yields none.
func TestStateChangesReachOtherSubscriptionsOncePerChange(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	ctx := context.Background()
	rcvA, rcvB, rcvAll := taking(t), taking(t), taking(t)
	a, _ := e.Subscribe("m1", rcvA.URL, "payout.paid", catalogue.EndpointDisabled, catalogue.EndpointEnabled)
	b, _ := e.Subscribe("m1", rcvB.URL, catalogue.EndpointDisabled, catalogue.EndpointEnabled)
	e.Subscribe("m1", rcvAll.URL, "*") // '*' names no operational type
	d, _ := e.Dispatcher()
	e.Run(d)

	em := d.Emitter
	em.AnnounceStatus(ctx, "m1", a.ID, store.SubscriptionEnabled) // never disabled: nothing to tell
	for _, s := range []store.SubscriptionStatus{store.SubscriptionDisabled, store.SubscriptionDisabled, store.SubscriptionEnabled,
		store.SubscriptionEnabled, store.SubscriptionDisabled} {
		em.AnnounceStatus(ctx, "m1", a.ID, s)
	}
	want := []string{catalogue.EndpointDisabled, catalogue.EndpointEnabled, catalogue.EndpointDisabled}
	e.WaitFor("B to get the three changes", 5*time.Second, func() bool { return len(rcvB.Got()) >= len(want) })
	e.WaitQuiet()
	got := operational(t, rcvB)
	if !slices.Equal(types(got), want) {
		t.Fatalf("B got %v, want %v", types(got), want)
	}
	if got[0].Data["subscription_id"] != a.ID.String() || got[0].Data["disabled_by"] != notify.ByMerchant ||
		got[1].Data["enabled_by"] != notify.ByMerchant {
		t.Errorf("payloads %+v", got)
	}
	if n := len(rcvA.Got()); n != 0 {
		t.Errorf("A, subscribed to the operational types, got %d events about itself", n)
	}
	// B's own change reaches A, not B.
	em.Disabled(ctx, "m1", b.ID, notify.ByOperator, "Disabled by an operator.", nil)
	e.WaitFor("A to hear of B", 5*time.Second, func() bool { return len(rcvA.Got()) == 1 })
	e.WaitQuiet()
	if n := len(rcvB.Got()); n != len(want) {
		t.Errorf("B got %d events, want still %d", n, len(want))
	}
	if n := len(rcvAll.Got()); n != 0 {
		t.Errorf("a subscription to '*' got %d operational events", n)
	}
}

// afterEmitter counts DeliveryFailed calls; the Chain calls it after the
// Emitter, so a count reached means the Emitter is done with them.
type afterEmitter struct{ calls atomic.Int32 }

func (c *afterEmitter) DeliveryFailed(context.Context, store.Delivery) { c.calls.Add(1) }

// Several deliveries to A exhausted within the interval yield one
// webhook_delivery.exhausted at B, carrying the first one's last attempt;
// an operational event's own exhausted delivery yields none.
func TestExhaustedOncePerInterval(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	rcvA := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusServiceUnavailable))
	rcvB := taking(t)
	a, _ := e.Subscribe("m1", rcvA.URL, "payout.paid", catalogue.DeliveryExhausted)
	e.Subscribe("m1", rcvB.URL, catalogue.DeliveryExhausted)
	counter := &afterEmitter{}
	d, _ := e.Dispatcher(func(c *dispatcher.Config) { c.Notifier = counter })
	e.Run(d)

	var failed []uuid.UUID
	for range 3 {
		for _, del := range e.Deliveries(e.Publish(d, "m1", "payout.paid").ID) {
			failed = append(failed, del.ID)
		}
	}
	for _, id := range failed {
		if got := e.WaitSettled(id, 10*time.Second); got.Status != store.DeliveryFailed {
			t.Fatalf("delivery %s, want failed", got.Status)
		}
	}
	e.WaitFor("the notifiers to hear of the three", 5*time.Second, func() bool { return counter.calls.Load() >= 3 })
	e.WaitQuiet()
	got := operational(t, rcvB)
	if len(got) != 1 || got[0].Type != catalogue.DeliveryExhausted {
		t.Fatalf("B got %v, want one %s", types(got), catalogue.DeliveryExhausted)
	}
	p := got[0].Data
	if p["subscription_id"] != a.ID.String() || !slices.Contains(failed, uuid.MustParse(p["delivery_id"].(string))) ||
		p["event_type"] != "payout.paid" || p["last_http_status"] != float64(503) || p["attempts"] != float64(len(dispatchertest.FastSchedule.Delays)+1) {
		t.Errorf("payload %+v", p)
	}
	for _, r := range operational(t, rcvA) {
		if r.Type != "payout.paid" {
			t.Errorf("A got %s about itself", r.Type)
		}
	}

	// An operational event's own delivery failing for good announces
	// nothing (no loop): it takes no claim.
	c, _ := e.Subscribe("m1", rcvA.URL, catalogue.EndpointDisabled)
	d.Emitter.DeliveryFailed(context.Background(), store.Delivery{ID: uuid.New(), MerchantID: "m1", SubscriptionID: c.ID,
		EventType: catalogue.EndpointDisabled, AttemptCount: 4})
	if won, err := e.Store.EndpointHealth.ClaimOperational(context.Background(), c.ID, store.ClaimExhausted, "", time.Hour); err != nil || !won {
		t.Errorf("an operational event's exhaustion took the claim: %v %v", won, err)
	}
}

// A token endpoint failing is told once it has failed TokenFailingAfter,
// once per episode, with the token URL's host alone; an expiring
// certificate is told with its days left.
func TestTokenFailingAndCertificateExpiring(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	ctx := context.Background()
	rcvA, rcvB := taking(t), taking(t)
	a, _ := e.Subscribe("m1", rcvA.URL, catalogue.TokenFailing, catalogue.CertificateExpiring)
	e.Subscribe("m1", rcvB.URL, catalogue.TokenFailing, catalogue.CertificateExpiring)
	d, clk := e.DispatcherAhead()
	e.Run(d)

	now := clk.Now()
	tokenURL := "https://client:s3cret@auth.example.com/tenant/oauth/token?key=hidden"
	d.Emitter.TokenFailing(ctx, "m1", a.ID, tokenURL, now.Add(-notify.TokenFailingAfter+time.Minute), "token endpoint answered 500")
	since := now.Add(-notify.TokenFailingAfter - time.Minute)
	d.Emitter.TokenFailing(ctx, "m1", a.ID, tokenURL, since, "token endpoint answered 500")
	d.Emitter.TokenFailing(ctx, "m1", a.ID, tokenURL, since, "token endpoint answered 502") // same episode
	notAfter := now.Add(10*24*time.Hour + time.Hour)
	d.Emitter.CertificateExpiring(ctx, store.ExpiringCertificate{SubscriptionID: a.ID, MerchantID: "m1",
		Certificate: store.AuthenticationSummary{NotAfter: &notAfter}}, now)
	e.WaitFor("B to get both", 5*time.Second, func() bool { return len(rcvB.Got()) >= 2 })
	e.WaitIdle()
	got := operational(t, rcvB)
	if !slices.Equal(types(got), []string{catalogue.TokenFailing, catalogue.CertificateExpiring}) {
		t.Fatalf("B got %v", types(got))
	}
	if p := got[0].Data; p["token_host"] != "auth.example.com" || p["last_error"] != "token endpoint answered 500" {
		t.Errorf("token_failing payload %+v", p)
	}
	for _, r := range rcvB.Got() {
		if s := string(r.Body); slices.ContainsFunc([]string{"s3cret", "hidden", "/tenant"}, func(x string) bool { return strings.Contains(s, x) }) {
			t.Errorf("the event carries a secret of the token URL: %s", s)
		}
	}
	if p := got[1].Data; p["days_left"] != float64(10) {
		t.Errorf("certificate_expiring payload %+v", p)
	}
	if n := len(rcvA.Got()); n != 0 {
		t.Errorf("A got %d events about itself", n)
	}
}

// An endpoint answering 410 Gone disables its subscription, and the
// merchant's other subscription hears of it, with the 410.
func TestEndpointGoneAnnouncesTheDisable(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	rcvA := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusGone))
	rcvB := taking(t)
	a, _ := e.Subscribe("m1", rcvA.URL, "payout.paid")
	e.Subscribe("m1", rcvB.URL, catalogue.EndpointDisabled)
	d, _ := e.Dispatcher()
	e.Run(d)

	e.Publish(d, "m1", "payout.paid")
	e.WaitFor("B to hear of A's 410", 5*time.Second, func() bool { return len(rcvB.Got()) >= 1 })
	e.WaitQuiet()
	got := operational(t, rcvB)
	if len(got) != 1 || got[0].Type != catalogue.EndpointDisabled {
		t.Fatalf("B got %v", types(got))
	}
	p := got[0].Data
	last, _ := p["last_error"].(map[string]any)
	if p["subscription_id"] != a.ID.String() || p["disabled_by"] != notify.ByEndpointGone || last["http_status"] != float64(410) {
		t.Errorf("payload %+v", p)
	}
}

// The attempts of an OAuth2 endpoint whose token endpoint fails tell the
// Emitter (deliver.TokenNotifier): nothing while the episode is young,
// webhook_endpoint.token_failing at the merchant's other subscription once
// the first failure is TokenFailingAfter old, and once only.
func TestTokenFailingFromTheAttempts(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	server := tokenserver.New(t, "webhookd", time.Now)
	server.Failing(http.StatusServiceUnavailable)
	rcvB := taking(t)
	oauth2, tokenURL, clientID, secret := "oauth2_client_credentials", server.TokenURL(), "webhookd", "s3cret"
	target := rcvB.URL + "/a"
	a, _ := e.SubscribeDraft("m1", subscriptions.Draft{URL: &target, Events: []string{"payout.paid"},
		Authentication: &subscriptions.AuthenticationInput{Type: &oauth2, TokenURL: &tokenURL, ClientID: &clientID, ClientSecret: &secret}})
	e.Subscribe("m1", rcvB.URL, catalogue.TokenFailing)
	d, clk := e.DispatcherAhead(func(c *dispatcher.Config) {
		c.Schedule, c.MasterKey = dispatchertest.SlowSchedule, bytes.Repeat([]byte{7}, 32)
	})
	e.Run(d)

	ev := e.Publish(d, "m1", "payout.paid")
	del := e.Deliveries(ev.ID)[0]
	// Each attempt's failure is told before the next attempt is parked:
	// once the second is recorded, the first two were heard, young.
	e.WaitFor("two failed attempts", 10*time.Second, func() bool { return len(e.Delivery(del.ID).Attempts) >= 2 })
	var claimed int
	if err := e.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM operational_claims WHERE subscription_id = $1 AND kind = $2`,
		a.ID, store.ClaimTokenFailing).Scan(&claimed); err != nil || claimed != 0 {
		t.Fatalf("token_failing claimed %d times (%v) while the episode was young", claimed, err)
	}
	clk.Set(notify.TokenFailingAfter + time.Minute)
	e.WaitFor("a failed attempt past TokenFailingAfter", 20*time.Second, func() bool { return len(e.Delivery(del.ID).Attempts) >= 3 })
	e.WaitFor("token_failing at B", 5*time.Second, func() bool { return len(operational(t, rcvB)) >= 1 })
	e.WaitIdle()
	got := operational(t, rcvB)
	if len(got) != 1 || got[0].Type != catalogue.TokenFailing || got[0].Data["subscription_id"] != a.ID.String() {
		t.Fatalf("B got %+v, want one token_failing about A", got)
	}
	if errs := dispatchertest.AttemptErrors(e.Delivery(del.ID)); errs[0] != "oauth_token" {
		t.Errorf("A's attempts failed with %v, want oauth_token", errs)
	}
}
