package admin

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/sessions"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
)

// subscriptionRoutes are the /v1/webhook_subscriptions routes. Their
// send_test_event sibling lives with the delivery pipeline's routes.
func (s *Server) subscriptionRoutes(r chi.Router) {
	read, manage := s.requireCapability(sessions.View), s.requireCapability(sessions.ManageEndpoints)
	r.With(manage).Post("/webhook_subscriptions", s.handle(s.createSubscriptionV1))
	r.With(read).Get("/webhook_subscriptions", s.handle(s.listSubscriptions))
	r.With(read).Get("/webhook_subscriptions/{id}", s.handle(s.getSubscription))
	r.With(manage).Post("/webhook_subscriptions/{id}", s.handle(s.updateSubscriptionV1))
	r.With(manage).Delete("/webhook_subscriptions/{id}", s.handle(s.deleteSubscription))
	r.With(manage).Post("/webhook_subscriptions/{id}/rotate_secret", s.handle(s.rotateSecret))
}

// subscriptionJSON is the Banking resource (DESIGN.md "Resources").
type subscriptionJSON struct {
	ID          uuid.UUID                `json:"id"`
	Type        string                   `json:"type"`
	URL         string                   `json:"url"`
	Events      []string                 `json:"events"`
	Description *string                  `json:"description"`
	Status      store.SubscriptionStatus `json:"status"`
	Metadata    map[string]string        `json:"metadata"`
	Health      healthJSON               `json:"health"`
	CreatedAt   time.Time                `json:"created_at"`
	UpdatedAt   time.Time                `json:"updated_at"`
	RateLimit   *int                     `json:"rate_limit"`
	Ordering    any                      `json:"ordering"`
	// Filter and Headers are the delivery controls (admin/controls.go);
	// Headers are masked.
	Filter  *string           `json:"filter"`
	Headers map[string]string `json:"headers"`
	// Secret is only in the answers of create and rotate_secret.
	Secret string `json:"secret,omitempty"`
}

type healthJSON struct {
	ConsecutiveFailures int        `json:"consecutive_failures"`
	LastSuccessAt       *time.Time `json:"last_success_at"`
	LastFailureAt       *time.Time `json:"last_failure_at"`
}

func subscriptionView(sub store.Subscription) subscriptionJSON {
	rateLimit, ordering := controlsView(sub)
	return subscriptionJSON{
		RateLimit: rateLimit, Ordering: ordering,
		ID: sub.ID, Type: "webhook_subscription", URL: sub.URL, Events: sub.Events,
		Description: sub.Description, Status: sub.Status, Metadata: sub.Metadata,
		Health: healthJSON{
			ConsecutiveFailures: sub.Health.ConsecutiveFailures,
			LastSuccessAt:       utcPtr(sub.Health.LastSuccessAt), LastFailureAt: utcPtr(sub.Health.LastFailureAt),
		},
		CreatedAt: sub.CreatedAt.UTC(), UpdatedAt: sub.UpdatedAt.UTC(), Filter: sub.Filter,
	}
}

// subscriptionInput is the body of create, and the fields of update. Both
// surfaces use it: their names are the same in snake_case and camelCase.
type subscriptionInput struct {
	URL         *string           `json:"url"`
	Events      []string          `json:"events"`
	Description optionalString    `json:"description"`
	Metadata    map[string]string `json:"metadata"`
	RateLimit   optionalInt       `json:"rate_limit"`
	Ordering    rawField          `json:"ordering"`
	Filter      optionalString    `json:"filter"`
	Headers     optionalHeaders   `json:"headers"`
}

// subscriptionPatch is an update: every field is optional. It repeats the
// fields of subscriptionInput rather than embedding it, because the JSON
// decoder would name a bad field after the embedded Go type.
type subscriptionPatch struct {
	URL         *string           `json:"url"`
	Events      []string          `json:"events"`
	Description optionalString    `json:"description"`
	Metadata    map[string]string `json:"metadata"`
	Status      *string           `json:"status"`
	RateLimit   optionalInt       `json:"rate_limit"`
	Ordering    rawField          `json:"ordering"`
	Filter      optionalString    `json:"filter"`
	Headers     optionalHeaders   `json:"headers"`
}

// optionalString tells a field that is absent from one that is null, so
// that an update can clear the description.
type optionalString struct {
	Set   bool
	Value *string
}

// UnmarshalJSON records that the field was present; null clears it.
func (o *optionalString) UnmarshalJSON(b []byte) error {
	o.Set = true
	if string(b) == "null" {
		o.Value = nil
		return nil
	}
	var v string
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	o.Value = &v
	return nil
}

// parseID reads a resource id. A malformed id names no resource, so it is
// 404 like an unknown one.
func parseID(raw string) (uuid.UUID, error) {
	id, err := uuid.Parse(raw)
	if err != nil {
		return uuid.Nil, errNotFound
	}
	return id, nil
}

// draft is the domain's form of a create body.
func (in subscriptionInput) draft() subscriptions.Draft {
	return subscriptions.Draft{URL: in.URL, Events: in.Events, Description: in.Description.Value, Metadata: in.Metadata,
		RateLimit: in.RateLimit.Value, Ordering: in.Ordering.bytes(),
		Filter: in.Filter.Value, Headers: in.Headers.Value}
}

// change is the domain's form of an update body.
func (p subscriptionPatch) change() subscriptions.Change {
	return subscriptions.Change{URL: p.URL, Events: p.Events, SetDescription: p.Description.Set,
		Description: p.Description.Value, Metadata: p.Metadata, Status: p.Status,
		SetRateLimit: p.RateLimit.Set, RateLimit: p.RateLimit.Value, Ordering: p.Ordering.bytes(),
		SetFilter: p.Filter.Set, Filter: p.Filter.Value, SetHeaders: p.Headers.Set, Headers: p.Headers.Value}
}

func (s *Server) createSubscriptionV1(w http.ResponseWriter, r *http.Request) error {
	var in subscriptionInput
	if err := decodeJSON(r, &in); err != nil {
		return err
	}
	sub, secret, err := s.subscriptions.Create(r.Context(), principalOf(r.Context()).Merchant.ID, in.draft())
	if err != nil {
		return err
	}
	v := s.subscriptionView(r.Context(), sub)
	v.Secret = secret
	writeJSON(w, http.StatusCreated, v)
	return nil
}

func (s *Server) listSubscriptions(w http.ResponseWriter, r *http.Request) error {
	p, err := s.listPage(r, "status")
	if err != nil {
		return err
	}
	status := r.URL.Query().Get("status")
	if r.URL.Query().Has("status") {
		if err := subscriptions.CheckStatus("status", status); err != nil {
			return err
		}
	}
	subs, err := s.reads.ListSubscriptions(r.Context(), principalOf(r.Context()).Merchant.ID, store.SubscriptionFilter{Status: store.SubscriptionStatus(status)}, p)
	if err != nil {
		return err
	}
	writeList(s, w, r, p, subs, nil, func(sub store.Subscription) store.Cursor {
		return store.Cursor{CreatedAt: sub.CreatedAt, ID: sub.ID.String()}
	}, func(sub store.Subscription) subscriptionJSON { return s.subscriptionView(r.Context(), sub) })
	return nil
}

func (s *Server) getSubscription(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	sub, err := s.reads.GetSubscription(r.Context(), principalOf(r.Context()).Merchant.ID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.subscriptionView(r.Context(), sub))
	return nil
}

func (s *Server) updateSubscriptionV1(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var p subscriptionPatch
	if err := decodeJSON(r, &p); err != nil {
		return err
	}
	sub, err := s.subscriptions.Update(r.Context(), principalOf(r.Context()).Merchant.ID, id, p.change())
	if err != nil {
		return err
	}
	s.dropIfDisabled(r, sub)
	writeJSON(w, http.StatusOK, s.subscriptionView(r.Context(), sub))
	return nil
}

// dropIfDisabled ends the waiting work of a subscription an update left
// disabled: its parked attempts would otherwise come up one by one only to
// be abandoned.
func (s *Server) dropIfDisabled(r *http.Request, sub store.Subscription) {
	if sub.Status == store.SubscriptionDisabled {
		s.dropWork(r, sub.ID)
	}
}

// dropWork is Publisher.DropSubscription after a change the merchant made;
// a failure is only logged.
func (s *Server) dropWork(r *http.Request, id uuid.UUID) {
	if s.cfg.Publisher == nil {
		return // a server without the delivery pipeline (tests of the API alone)
	}
	if err := s.cfg.Publisher.DropSubscription(r.Context(), principalOf(r.Context()).Merchant.ID, id); err != nil {
		s.logger.WarnContext(r.Context(), "drop the waiting work of a deleted or disabled subscription", "subscription_id", id, "error", err)
	}
}

func (s *Server) deleteSubscription(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if err := s.store.DeleteSubscription(r.Context(), principalOf(r.Context()).Merchant.ID, id); err != nil {
		return err
	}
	s.dropWork(r, id)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// rotateSecret makes a new current secret and answers the subscription with
// it; the previous secret keeps signing for signer.RotationOverlap.
func (s *Server) rotateSecret(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if err := decodeNoFields(r); err != nil {
		return err
	}
	sub, secret, err := s.subscriptions.RotateSecret(r.Context(), principalOf(r.Context()).Merchant.ID, id)
	if err != nil {
		return err
	}
	v := s.subscriptionView(r.Context(), sub)
	v.Secret = secret
	writeJSON(w, http.StatusOK, v)
	return nil
}
