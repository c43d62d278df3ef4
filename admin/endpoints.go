package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher/publish"
	"github.com/webhookd/webhookd/internal/sessions"
)

// EndpointChecker sends an endpoint the three deliveries of a check and
// reports how it answered (dispatcher.Dispatcher is one).
type EndpointChecker interface {
	// CheckEndpoint checks the merchant's subscription; a stranger's or a
	// missing one is store.ErrNotFound.
	CheckEndpoint(ctx context.Context, merchantID string, subscriptionID uuid.UUID) (publish.CheckReport, error)
}

// endpointRoutes are what the portal asks of one endpoint beyond the
// subscription itself: its secret, its health, and a check that it
// verifies signatures (rate-limited per merchant like send_test_event:
// each check sends three requests to a URL the merchant chose).
func (s *Server) endpointRoutes(r chi.Router) {
	r.With(s.requireCapability(sessions.ViewSecret)).Get("/webhook_subscriptions/{id}/secret", s.handle(s.revealSecret))
	r.With(s.requireCapability(sessions.View)).Get("/webhook_subscriptions/{id}/health", s.handle(s.endpointHealth))
	r.With(s.requireCapability(sessions.ManageEndpoints), s.limitRate(s.testEventRateLimit())).
		Post("/webhook_subscriptions/{id}/check", s.handle(s.checkEndpoint))
}

// secretJSON is a revealed signing secret.
type secretJSON struct {
	Secret                  string     `json:"secret"`
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at"`
}

func (s *Server) revealSecret(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	rev, err := s.secrets.Reveal(r.Context(), principalOf(r.Context()).Merchant.ID, id)
	if err != nil {
		return err
	}
	// The answer holds a secret: no cache may keep it.
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, secretJSON{Secret: rev.Secret, PreviousSecretExpiresAt: utcPtr(rev.PreviousExpiresAt)})
	return nil
}

// endpointHealthJSON is an endpoint's health: the subscription's running
// counts and its attempts of the last 24 hours (test deliveries excluded).
type endpointHealthJSON struct {
	ConsecutiveFailures int        `json:"consecutive_failures"`
	LastSuccessAt       *time.Time `json:"last_success_at"`
	LastFailureAt       *time.Time `json:"last_failure_at"`
	Attempts24h         int        `json:"attempts_24h"`
	Succeeded24h        int        `json:"succeeded_24h"`
	SuccessRate24h      *float64   `json:"success_rate_24h"`
}

// healthWindow is the period of the health's counts.
const healthWindow = 24 * time.Hour

func (s *Server) endpointHealth(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	merchant := principalOf(r.Context()).Merchant.ID
	sub, err := s.reads.GetSubscription(r.Context(), merchant, id)
	if err != nil {
		return err
	}
	counts, err := s.reads.SubscriptionAttemptsSince(r.Context(), merchant, id, s.cfg.Now().Add(-healthWindow))
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

type checkResultJSON struct {
	Case       string    `json:"case"`
	DeliveryID uuid.UUID `json:"delivery_id"`
	HTTPStatus *int      `json:"http_status"`
	Error      *string   `json:"error"`
	Accepted   bool      `json:"accepted"`
}

// checkEndpoint sends the three deliveries of a check and answers once
// the endpoint answered them (each within the delivery timeout).
func (s *Server) checkEndpoint(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if err := decodeNoFields(r); err != nil {
		return err
	}
	if s.cfg.Checker == nil {
		return errCheckUnavailable
	}
	rep, err := s.cfg.Checker.CheckEndpoint(r.Context(), principalOf(r.Context()).Merchant.ID, id)
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
