package publish_test

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
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
	webhookreceiver "github.com/webhookd/webhookd/receiver"
)

// TestCheckEndpoint: the three deliveries of a check reach the endpoint
// signed as each case says (judged by the Standard Webhooks library and by
// webhookd's verifier), are recorded as final test deliveries with one
// attempt, and are never sent again, by a worker or the sweeper.
func TestCheckEndpoint(t *testing.T) {
	e := dispatchertest.New(t)
	var secret atomic.Pointer[string]
	var verifying *dispatchertest.Receiver
	verifying = dispatchertest.NewReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		wh, err := standardwebhooks.NewWebhook(*secret.Load())
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		// The receiver read the body already; it keeps it in its n-th
		// request.
		if wh.Verify(verifying.Got()[n-1].Body, r.Header) != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	sub, s := e.Subscribe("m_check", verifying.URL, "*")
	secret.Store(&s)
	d, reg := e.Dispatcher()
	e.Run(d)

	rep, err := d.Checker.CheckEndpoint(context.Background(), "m_check", sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.VerifiesSignatures || len(rep.Results) != 3 {
		t.Fatalf("report %+v, want an endpoint that verifies", rep)
	}
	got := verifying.Got()
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
		stored := e.Delivery(res.Delivery.ID)
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
	e.WaitSwept(reg)
	if n := len(verifying.Got()); n != 3 {
		t.Errorf("the endpoint got %d requests after a sweep, want still 3", n)
	}
	if h, err := e.Store.Subscriptions.GetSubscription(context.Background(), "m_check", sub.ID); err != nil || h.Health.ConsecutiveFailures != 0 || h.Health.LastFailureAt != nil {
		t.Errorf("the check changed the subscription's health: %+v, %v", h.Health, err)
	}
}

func TestCheckEndpointRefusals(t *testing.T) {
	e := dispatchertest.New(t)
	lax := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusOK))
	sub, _ := e.Subscribe("m_check", lax.URL, "*")

	t.Run("an endpoint accepting everything does not verify", func(t *testing.T) {
		d, _ := e.Dispatcher()
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
		d, _ := e.Dispatcher()
		before := len(lax.Got())
		if _, err := d.Checker.CheckEndpoint(context.Background(), "m_stranger", sub.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("check of a stranger's subscription: %v, want ErrNotFound", err)
		}
		if len(lax.Got()) != before {
			t.Error("a stranger's check reached the endpoint")
		}
	})
	t.Run("the SSRF guard", func(t *testing.T) {
		d, _ := e.Dispatcher(func(c *dispatcher.Config) { c.AllowPrivateTargets = false })
		before := len(lax.Got())
		rep, err := d.Checker.CheckEndpoint(context.Background(), "m_check", sub.ID)
		if err != nil || rep.VerifiesSignatures {
			t.Fatalf("report %+v, %v", rep, err)
		}
		for _, res := range rep.Results {
			if res.Error == nil || *res.Error != "target_blocked" || res.HTTPStatus != nil {
				t.Errorf("%s: %+v, want target_blocked", res.Case, res)
			}
		}
		if len(lax.Got()) != before {
			t.Error("a blocked check reached the endpoint")
		}
	})
}
