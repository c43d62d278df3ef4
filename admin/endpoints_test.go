package admin_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/receiver"
	"github.com/webhookd/webhookd/signer"
)

// What the portal asks of one endpoint: its secret, its health, a check.

type revealedSecret struct {
	Secret                  string     `json:"secret"`
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at"`
}

func TestRevealSecret(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m_secret")
	created := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key, Body: hookBody("https://example.com/hook")})
	sub := decode[struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}](t, created)
	path := "/v1/webhook_subscriptions/" + sub.ID + "/secret"

	r := h.do(request{Method: http.MethodGet, Path: path, Key: key})
	got := decode[revealedSecret](t, r)
	if r.Status != http.StatusOK || got.Secret != sub.Secret || got.PreviousSecretExpiresAt != nil {
		t.Fatalf("reveal: %d %+v, want the secret of the create and no previous one", r.Status, got)
	}
	if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", cc)
	}

	rotated := decode[struct {
		Secret string `json:"secret"`
	}](t, h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID + "/rotate_secret", Key: key}))
	session := h.session("m_secret", map[string]any{"capabilities": []string{"view_secret"}})
	got = decode[revealedSecret](t, h.do(request{Method: http.MethodGet, Path: path, Key: session.Token}))
	if got.Secret != rotated.Secret || got.Secret == sub.Secret || got.PreviousSecretExpiresAt == nil {
		t.Fatalf("after a rotation: %+v, want the new secret and the previous one's expiry", got)
	}
	if d := time.Until(*got.PreviousSecretExpiresAt); d < signer.RotationOverlap-time.Minute || d > signer.RotationOverlap {
		t.Errorf("the previous secret expires in %v, want %v", d, signer.RotationOverlap)
	}
}

// attemptAt is one attempt to record: when, and whether it succeeded.
type attemptAt struct {
	at time.Time
	ok bool
}

// recordDelivery stores a delivery to the subscription and records its
// attempts, in order, as the workers would: pending until the last.
func recordDelivery(t *testing.T, st *store.Store, merchant string, subID uuid.UUID, test bool, attempts ...attemptAt) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	ev := store.Event{ID: uuid.Must(uuid.NewV7()), MerchantID: merchant, Type: "payout.paid", APIVersion: admin.DefaultVersion,
		Body: []byte(`{"payload":{}}`), CreatedAt: now}
	_, ds, _, err := st.Events.CreateEvent(ctx, ev, store.Audience{SubscriptionID: &subID, Test: test})
	if err != nil || len(ds) != 1 {
		t.Fatalf("create event: %v, %d deliveries", err, len(ds))
	}
	for i, a := range attempts {
		l, err := st.Deliveries.LeaseDelivery(ctx, ds[0].ID, ds[0].CreatedAt, i+1, time.Now(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		rec := store.AttemptRecord{Delivery: l.Delivery, Status: store.DeliveryPending,
			Attempt: store.Attempt{DeliveryID: l.ID, Number: i + 1, Status: store.AttemptFailed, Trigger: store.TriggerScheduled,
				DurationMS: 5, AttemptedAt: a.at}}
		next := a.at.Add(time.Minute)
		rec.NextAttemptAt = &next
		if a.ok {
			rec.Attempt.Status, rec.Status, rec.NextAttemptAt = store.AttemptSucceeded, store.DeliverySucceeded, nil
		} else if i == len(attempts)-1 {
			rec.Status, rec.NextAttemptAt = store.DeliveryFailed, nil
		}
		if err := st.Deliveries.RecordAttempt(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
}

type endpointHealth struct {
	ConsecutiveFailures int        `json:"consecutive_failures"`
	LastSuccessAt       *time.Time `json:"last_success_at"`
	LastFailureAt       *time.Time `json:"last_failure_at"`
	Attempts24h         int        `json:"attempts_24h"`
	Succeeded24h        int        `json:"succeeded_24h"`
	SuccessRate24h      *float64   `json:"success_rate_24h"`
}

// TestEndpointHealth: on known attempts, some older than 24 hours and
// some of a test delivery, the health counts the real ones of the window.
// The API's clock runs 30 hours ahead, so that attempts dated now are
// outside the window while their deliveries sit in today's partition.
func TestEndpointHealth(t *testing.T) {
	t.Parallel()
	clock := &movableClock{}
	clock.Advance(30 * time.Hour)
	h := newHarness(t, func(c *admin.Config) { c.Clock = clock })
	key := h.merchant("m_health")
	sub := h.createSubscription(key, hookBody("https://example.com/hook"))
	path := "/v1/webhook_subscriptions/" + sub.ID + "/health"

	empty := decode[endpointHealth](t, h.do(request{Method: http.MethodGet, Path: path, Key: key}))
	if empty.Attempts24h != 0 || empty.SuccessRate24h != nil || empty.LastSuccessAt != nil {
		t.Errorf("health with no attempt: %+v", empty)
	}

	base := time.Now().UTC().Truncate(time.Microsecond) // 30 h before the API's now
	id := uuid.MustParse(sub.ID)
	recordDelivery(t, h.store, "m_health", id, false, attemptAt{base, false}, attemptAt{base.Add(28 * time.Hour), true})
	recordDelivery(t, h.store, "m_health", id, false, attemptAt{base.Add(29 * time.Hour), false}, attemptAt{base.Add(29*time.Hour + 30*time.Minute), false})
	recordDelivery(t, h.store, "m_health", id, true, attemptAt{base.Add(29*time.Hour + 50*time.Minute), true})

	got := decode[endpointHealth](t, h.do(request{Method: http.MethodGet, Path: path, Key: key}))
	want := endpointHealth{ConsecutiveFailures: 2, Attempts24h: 3, Succeeded24h: 1}
	if got.ConsecutiveFailures != want.ConsecutiveFailures || got.Attempts24h != want.Attempts24h || got.Succeeded24h != want.Succeeded24h ||
		got.SuccessRate24h == nil || *got.SuccessRate24h != 1.0/3 ||
		got.LastSuccessAt == nil || !got.LastSuccessAt.Equal(base.Add(28*time.Hour)) ||
		got.LastFailureAt == nil || !got.LastFailureAt.Equal(base.Add(29*time.Hour+30*time.Minute)) {
		t.Errorf("health %+v, want %+v, a third succeeded, last success at +28h and last failure at +29.5h", got, want)
	}
}

// signatureReceiver is an endpoint that verifies each delivery with the
// Standard Webhooks library and answers 204 or 400; it also verifies with
// webhookd's own verifier, which must agree.
type signatureReceiver struct {
	*httptest.Server
	secret atomic.Pointer[string]
	mu     sync.Mutex
	got    int
	// disagreements are requests the two verifiers judged differently.
	disagreements int
}

func newSignatureReceiver(t *testing.T) *signatureReceiver {
	rc := &signatureReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		wh, err := standardwebhooks.NewWebhook(*rc.secret.Load())
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		libErr := wh.Verify(body, r.Header)
		ours, err := receiver.NewVerifier(receiver.VerifierConfig{Secrets: []string{*rc.secret.Load()}})
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		ourErr := ours.Verify(r.Header, body)
		rc.mu.Lock()
		rc.got++
		if (libErr == nil) != (ourErr == nil) {
			rc.disagreements++
		}
		rc.mu.Unlock()
		if libErr != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.Close)
	return rc
}

type checkAnswer struct {
	VerifiesSignatures bool `json:"verifies_signatures"`
	Results            []struct {
		Case       string  `json:"case"`
		DeliveryID string  `json:"delivery_id"`
		HTTPStatus *int    `json:"http_status"`
		Error      *string `json:"error"`
		Accepted   bool    `json:"accepted"`
	} `json:"results"`
}

// TestCheckEndpoint: against a receiver that verifies signatures the check
// reports true, against one that accepts everything false; each case is a
// test delivery in the log with its one attempt, and the subscription's
// health is untouched.
func TestCheckEndpoint(t *testing.T) {
	t.Parallel()
	h, _ := newPipelineHarness(t)
	key := h.merchant("m_check")
	verifying := newSignatureReceiver(t)
	created := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key, Body: hookBody(verifying.URL)})
	withSecret := decode[struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}](t, created)
	verifying.secret.Store(&withSecret.Secret)
	lax := newHookReceiver(t, http.StatusOK)
	laxSub := h.createSubscription(key, hookBody(lax.URL))

	for _, tc := range []struct {
		name     string
		subID    string
		verifies bool
		statuses []int // valid, wrong_signature, stale_timestamp
		received func() int
	}{
		{"verifying receiver", withSecret.ID, true, []int{204, 400, 400}, func() int {
			verifying.mu.Lock()
			defer verifying.mu.Unlock()
			return verifying.got
		}},
		{"receiver accepting everything", laxSub.ID, false, []int{200, 200, 200}, func() int { return len(lax.requests()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.with(t).do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + tc.subID + "/check", Key: key})
			if r.Status != http.StatusOK {
				t.Fatalf("check: %d %s", r.Status, r.Body)
			}
			got := decode[checkAnswer](t, r)
			if got.VerifiesSignatures != tc.verifies || len(got.Results) != 3 {
				t.Fatalf("check %s, want verifies_signatures %t and three results", r.Body, tc.verifies)
			}
			if n := tc.received(); n != 3 {
				t.Errorf("the receiver got %d requests, want 3", n)
			}
			for i, want := range []string{"valid", "wrong_signature", "stale_timestamp"} {
				res := got.Results[i]
				if res.Case != want || res.HTTPStatus == nil || *res.HTTPStatus != tc.statuses[i] ||
					res.Accepted != (tc.statuses[i] < 300) || (res.Error == nil) != res.Accepted {
					t.Errorf("result %d: %+v, want %s answered %d", i, res, want, tc.statuses[i])
				}
				d := decode[delivery](t, h.with(t).do(request{Method: http.MethodGet, Path: "/v1/webhook_deliveries/" + res.DeliveryID, Key: key}))
				wantStatus := "failed"
				if res.Accepted {
					wantStatus = "succeeded"
				}
				if !d.Test || d.EventType != "ping.test" || d.SubscriptionID != tc.subID || d.Status != wantStatus ||
					d.AttemptCount != 1 || len(d.Attempts) != 1 || d.NextAttemptAt != nil ||
					d.Attempts[0].HTTPStatus == nil || *d.Attempts[0].HTTPStatus != tc.statuses[i] {
					t.Errorf("delivery of %s: %+v", want, d)
				}
			}
			sub := decode[subscription](t, h.with(t).do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + tc.subID, Key: key}))
			if sub.Health.ConsecutiveFailures != 0 || sub.Health.LastFailureAt != nil {
				t.Errorf("the check changed the subscription's health: %+v", sub.Health)
			}
		})
	}
	verifying.mu.Lock()
	defer verifying.mu.Unlock()
	if verifying.disagreements != 0 {
		t.Errorf("webhookd's verifier and the Standard Webhooks library disagreed on %d requests", verifying.disagreements)
	}
}
