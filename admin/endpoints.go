package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher/publish"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
)

// EndpointChecker sends an endpoint the three deliveries of a check and
// reports how it answered (publish.Checker is one).
type EndpointChecker interface {
	// CheckEndpoint checks the merchant's subscription; a stranger's or a
	// missing one is store.ErrNotFound.
	CheckEndpoint(ctx context.Context, merchantID string, subscriptionID uuid.UUID) (publish.CheckReport, error)
}

// endpointSubscriptions is where the endpoint routes read the
// subscription they are about.
type endpointSubscriptions interface {
	// GetSubscription reads the merchant's subscription.
	GetSubscription(ctx context.Context, merchantID string, id uuid.UUID) (store.Subscription, error)
}

// endpointAttempts is what the health route counts of a subscription's
// attempts.
type endpointAttempts interface {
	// SubscriptionAttemptsFrom counts the subscription's attempts in the
	// hours from the one holding from.
	SubscriptionAttemptsFrom(ctx context.Context, merchantID string, subscriptionID uuid.UUID, from time.Time) (store.AttemptCounts, error)
}

// endpointHandlers serve what the portal asks of one endpoint beyond the
// subscription itself: its signing secret, its health, and a check that
// it verifies signatures. They are separate from the subscription routes
// because they need what those do not: the secret revealer, the attempt
// counts and the endpoint checker, which sends the endpoint requests.
type endpointHandlers struct {
	secrets *subscriptions.SecretRevealer
	// subscriptions, attempts and statistics are where the routes read
	// (the replica when there is one).
	subscriptions endpointSubscriptions
	attempts      endpointAttempts
	statistics    statsReads
	// checker is nil on a server whose Publisher sends nothing itself.
	checker EndpointChecker
	clock   clock.Clock
}

// secretJSON is a revealed signing secret.
type secretJSON struct {
	Secret                  string     `json:"secret"`
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at"`
}

// revealSecret answers the current signing secret.
func (h endpointHandlers) revealSecret(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	rev, err := h.secrets.Reveal(r.Context(), principalOf(r.Context()).Merchant.ID, id)
	if err != nil {
		return err
	}
	// The answer holds a secret: no cache may keep it.
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, secretJSON{Secret: rev.Secret, PreviousSecretExpiresAt: utcPtr(rev.PreviousExpiresAt)})
	return nil
}

// endpointHealthJSON is an endpoint's health: the subscription's running
// counts and its attempts of the stats endpoint's 24-hour window (the
// current hour and the 23 before it; test deliveries excluded).
type endpointHealthJSON struct {
	ConsecutiveFailures int        `json:"consecutive_failures"`
	LastSuccessAt       *time.Time `json:"last_success_at"`
	LastFailureAt       *time.Time `json:"last_failure_at"`
	Attempts24h         int        `json:"attempts_24h"`
	Succeeded24h        int        `json:"succeeded_24h"`
	SuccessRate24h      *float64   `json:"success_rate_24h"`
}

// health answers the endpoint's health.
func (h endpointHandlers) health(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	merchant := principalOf(r.Context()).Merchant.ID
	sub, err := h.subscriptions.GetSubscription(r.Context(), merchant, id)
	if err != nil {
		return err
	}
	// The hours the stats endpoint's 24h window shows: the two agree.
	day := statsWindows["24h"]
	counts, err := h.attempts.SubscriptionAttemptsFrom(r.Context(), merchant, id, windowStart(h.clock.Now(), day.step, day.buckets))
	if err != nil {
		return err
	}
	out := endpointHealthJSON{ConsecutiveFailures: sub.Health.ConsecutiveFailures,
		LastSuccessAt: utcPtr(sub.Health.LastSuccessAt), LastFailureAt: utcPtr(sub.Health.LastFailureAt),
		Attempts24h: counts.Attempts, Succeeded24h: counts.Succeeded}
	if counts.Attempts > 0 {
		rate := float64(counts.Succeeded) / float64(counts.Attempts)
		out.SuccessRate24h = &rate
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// checkJSON is the answer of an endpoint check.
type checkJSON struct {
	VerifiesSignatures bool              `json:"verifies_signatures"`
	Results            []checkResultJSON `json:"results"`
}

// checkResultJSON is one delivery of a check.
type checkResultJSON struct {
	Case       string    `json:"case"`
	DeliveryID uuid.UUID `json:"delivery_id"`
	HTTPStatus *int      `json:"http_status"`
	Error      *string   `json:"error"`
	Accepted   bool      `json:"accepted"`
}

// check sends the three deliveries of a check and answers once
// the endpoint answered them (each within the delivery timeout).
func (h endpointHandlers) check(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if err := decodeNoFields(r); err != nil {
		return err
	}
	if h.checker == nil {
		return errCheckUnavailable
	}
	rep, err := h.checker.CheckEndpoint(r.Context(), principalOf(r.Context()).Merchant.ID, id)
	if err != nil {
		return err
	}
	out := checkJSON{VerifiesSignatures: rep.VerifiesSignatures, Results: make([]checkResultJSON, 0, len(rep.Results))}
	for _, res := range rep.Results {
		out.Results = append(out.Results, checkResultJSON{Case: res.Case, DeliveryID: res.Delivery.ID,
			HTTPStatus: res.HTTPStatus, Error: res.Error, Accepted: res.Accepted})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// errCheckUnavailable answers a check on a server built without a checker
// (its Publisher sends nothing itself).
var errCheckUnavailable = newError(http.StatusServiceUnavailable, catAPI, "internal_error",
	"Endpoint checks are not available on this server.")
