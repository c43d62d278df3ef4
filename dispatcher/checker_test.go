package dispatcher_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/dispatcher/publish"
	"github.com/webhookd/webhookd/internal/store"
	webhookreceiver "github.com/webhookd/webhookd/receiver"
)

// TestCheckEndpoint: the three deliveries of a check reach the endpoint
// signed as each case says (judged by the Standard Webhooks library and by
// webhookd's verifier), are recorded as final test deliveries with one
// attempt, and are never sent again, by a worker or the sweeper.
func TestCheckEndpoint(t *testing.T) {
	e := newEnv(t)
	var secret atomic.Pointer[string]
	var verifying *receiver
	verifying = newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		wh, err := standardwebhooks.NewWebhook(*secret.Load())
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		// The receiver read the body already; it keeps it in its n-th
		// request.
		if wh.Verify(verifying.got()[n-1].Body, r.Header) != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	sub, s := e.subscribe("m_check", verifying.URL, "*")
	secret.Store(&s)
	d, reg := e.dispatcher()
	e.run(d)

	rep, err := d.Checker.CheckEndpoint(context.Background(), "m_check", sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.VerifiesSignatures || len(rep.Results) != 3 {
		t.Fatalf("report %+v, want an endpoint that verifies", rep)
	}
	got := verifying.got()
	if len(got) != 3 {
		t.Fatalf("the endpoint got %d requests, want 3", len(got))
	}
	ours, err := webhookreceiver.NewVerifier(webhookreceiver.VerifierConfig{Secrets: []string{s}})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		name   string
		status int
	}{{publish.CheckValid, 200}, {publish.CheckWrongSignature, 401}, {publish.CheckStaleTimestamp, 401}} {
		res := rep.Results[i]
		if res.Case != want.name || res.HTTPStatus == nil || *res.HTTPStatus != want.status || res.Accepted != (want.status == 200) {
			t.Errorf("result %d: %+v, want %s answered %d", i, res, want.name, want.status)
		}
		stored := e.delivery(res.Delivery.ID)
		wantStatus := store.DeliveryFailed
		if res.Accepted {
			wantStatus = store.DeliverySucceeded
		}
		if !stored.Test || stored.EventType != publish.TestEventType || stored.Status != wantStatus ||
			stored.NextAttemptAt != nil || len(stored.Attempts) != 1 || stored.Attempts[0].Trigger != store.TriggerManual {
			t.Errorf("stored %s delivery: %+v", want.name, stored)
		}
		// webhookd's own verifier agrees with the library on each request.
		for _, r := range got {
			if r.Header.Get("webhook-id") != stored.EventID.String() {
				continue
			}
			ourErr := ours.Verify(r.Header, r.Body)
			if (ourErr == nil) != res.Accepted {
				t.Errorf("%s: webhookd's verifier says %v, the library accepted=%t", want.name, ourErr, res.Accepted)
			}
			ts, _ := strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
			age := time.Since(time.Unix(ts, 0))
			if stale := want.name == publish.CheckStaleTimestamp; stale != (age > 9*time.Minute) {
				t.Errorf("%s: timestamp %v old", want.name, age)
			}
		}
	}
	// The sweeper has its turn: it finds nothing to send again.
	e.waitSwept(reg)
	if n := len(verifying.got()); n != 3 {
		t.Errorf("the endpoint got %d requests after a sweep, want still 3", n)
	}
	if h, err := e.store.Subscriptions.GetSubscription(context.Background(), "m_check", sub.ID); err != nil || h.Health.ConsecutiveFailures != 0 || h.Health.LastFailureAt != nil {
		t.Errorf("the check changed the subscription's health: %+v, %v", h.Health, err)
	}
}

func TestCheckEndpointRefusals(t *testing.T) {
	e := newEnv(t)
	lax := newReceiver(t, answer(http.StatusOK))
	sub, _ := e.subscribe("m_check", lax.URL, "*")

	t.Run("an endpoint accepting everything does not verify", func(t *testing.T) {
		d, _ := e.dispatcher()
		rep, err := d.Checker.CheckEndpoint(context.Background(), "m_check", sub.ID)
		if err != nil || rep.VerifiesSignatures {
			t.Fatalf("report %+v, %v; want verifies_signatures false", rep, err)
		}
		for _, res := range rep.Results {
			if !res.Accepted {
				t.Errorf("%s not accepted: %+v", res.Case, res)
			}
		}
	})
	t.Run("another merchant's subscription", func(t *testing.T) {
		d, _ := e.dispatcher()
		before := len(lax.got())
		if _, err := d.Checker.CheckEndpoint(context.Background(), "m_stranger", sub.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("check of a stranger's subscription: %v, want ErrNotFound", err)
		}
		if len(lax.got()) != before {
			t.Error("a stranger's check reached the endpoint")
		}
	})
	t.Run("the SSRF guard", func(t *testing.T) {
		d, _ := e.dispatcher(func(c *dispatcher.Config) { c.AllowPrivateTargets = false })
		before := len(lax.got())
		rep, err := d.Checker.CheckEndpoint(context.Background(), "m_check", sub.ID)
		if err != nil || rep.VerifiesSignatures {
			t.Fatalf("report %+v, %v", rep, err)
		}
		for _, res := range rep.Results {
			if res.Error == nil || *res.Error != "target_blocked" || res.HTTPStatus != nil {
				t.Errorf("%s: %+v, want target_blocked", res.Case, res)
			}
		}
		if len(lax.got()) != before {
			t.Error("a blocked check reached the endpoint")
		}
	})
}
