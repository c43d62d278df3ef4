package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/webhookd/webhookd/signer"
	"github.com/webhookd/webhookd/store"
)

// subscriptionRoutes are the /v1/webhook_subscriptions routes. Their
// send_test_event sibling lives with the delivery pipeline's routes.
func (s *Server) subscriptionRoutes(r chi.Router) {
	read, write := s.requireScope(ScopeRead), s.requireScope(ScopeWrite)
	r.With(write).Post("/webhook_subscriptions", s.createSubscriptionV1)
	r.With(read).Get("/webhook_subscriptions", s.listSubscriptions)
	r.With(read).Get("/webhook_subscriptions/{id}", s.getSubscription)
	r.With(write).Post("/webhook_subscriptions/{id}", s.updateSubscriptionV1)
	r.With(write).Delete("/webhook_subscriptions/{id}", s.deleteSubscription)
	r.With(write).Post("/webhook_subscriptions/{id}/rotate_secret", s.rotateSecret)
}

// subscriptionJSON is the Banking resource (DESIGN.md "Resources").
type subscriptionJSON struct {
	ID          uuid.UUID         `json:"id"`
	Type        string            `json:"type"`
	URL         string            `json:"url"`
	Events      []string          `json:"events"`
	Description *string           `json:"description"`
	Status      string            `json:"status"`
	Metadata    map[string]string `json:"metadata"`
	Health      healthJSON        `json:"health"`
	CreatedAt   time.Time         `json:"created_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
	// Secret is only in the answers of create and rotate_secret.
	Secret string `json:"secret,omitempty"`
}

type healthJSON struct {
	ConsecutiveFailures int        `json:"consecutive_failures"`
	LastSuccessAt       *time.Time `json:"last_success_at"`
	LastFailureAt       *time.Time `json:"last_failure_at"`
}

func subscriptionView(sub store.Subscription) subscriptionJSON {
	return subscriptionJSON{
		ID: sub.ID, Type: "webhook_subscription", URL: sub.URL, Events: sub.Events,
		Description: sub.Description, Status: sub.Status, Metadata: sub.Metadata,
		Health: healthJSON{
			ConsecutiveFailures: sub.Health.ConsecutiveFailures,
			LastSuccessAt:       utcPtr(sub.Health.LastSuccessAt), LastFailureAt: utcPtr(sub.Health.LastFailureAt),
		},
		CreatedAt: sub.CreatedAt.UTC(), UpdatedAt: sub.UpdatedAt.UTC(),
	}
}

// subscriptionInput is the body of create, and the fields of update. Both
// surfaces use it: their names are the same in snake_case and camelCase.
type subscriptionInput struct {
	URL         *string           `json:"url"`
	Events      []string          `json:"events"`
	Description optionalString    `json:"description"`
	Metadata    map[string]string `json:"metadata"`
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

// createSubscription validates in, makes and seals the first signing
// secret, and stores both. It returns the secret in clear: the caller shows
// it once and forgets it.
func (s *Server) createSubscription(ctx context.Context, merchantID string, in subscriptionInput) (store.Subscription, string, error) {
	if in.URL == nil {
		return store.Subscription{}, "", errMissing("url")
	}
	url, err := s.validateURL("url", *in.URL)
	if err != nil {
		return store.Subscription{}, "", err
	}
	events, err := s.validateEvents("events", in.Events)
	if err != nil {
		return store.Subscription{}, "", err
	}
	if err := validateDescription("description", in.Description.Value); err != nil {
		return store.Subscription{}, "", err
	}
	if err := validateMetadata("metadata", in.Metadata); err != nil {
		return store.Subscription{}, "", err
	}
	secret, sealed, err := s.newSealedSecret()
	if err != nil {
		return store.Subscription{}, "", err
	}
	sub, err := s.store.CreateSubscription(ctx, store.NewSubscription{
		MerchantID: merchantID, URL: url, Events: events, Description: in.Description.Value, Metadata: in.Metadata,
	}, sealed)
	if err != nil {
		return store.Subscription{}, "", err
	}
	return sub, secret, nil
}

// updateSubscription validates the fields present in p and applies them.
func (s *Server) updateSubscription(ctx context.Context, merchantID string, id uuid.UUID, p subscriptionPatch) (store.Subscription, error) {
	var u store.SubscriptionUpdate
	if p.URL != nil {
		url, err := s.validateURL("url", *p.URL)
		if err != nil {
			return store.Subscription{}, err
		}
		u.URL = &url
	}
	if p.Events != nil {
		events, err := s.validateEvents("events", p.Events)
		if err != nil {
			return store.Subscription{}, err
		}
		u.Events = events
	}
	if p.Description.Set {
		if err := validateDescription("description", p.Description.Value); err != nil {
			return store.Subscription{}, err
		}
		u.SetDescription, u.Description = true, p.Description.Value
	}
	if p.Status != nil {
		if *p.Status != store.SubscriptionEnabled && *p.Status != store.SubscriptionDisabled {
			return store.Subscription{}, errInvalid("status", "status must be enabled or disabled.")
		}
		u.Status = p.Status
	}
	if p.Metadata != nil {
		if err := validateMetadata("metadata", p.Metadata); err != nil {
			return store.Subscription{}, err
		}
		u.Metadata = p.Metadata
	}
	return s.store.UpdateSubscription(ctx, merchantID, id, u)
}

// newSealedSecret makes a signing secret and its sealed form for storage.
func (s *Server) newSealedSecret() (secret string, sealed []byte, err error) {
	sealer, err := signer.NewSealer(s.cfg.MasterKey)
	if err != nil {
		return "", nil, fmt.Errorf("signing secret: %w", err)
	}
	secret, err = signer.NewSecret()
	if err != nil {
		return "", nil, err
	}
	sealed, err = sealer.Seal(secret)
	if err != nil {
		return "", nil, err
	}
	return secret, sealed, nil
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

func (s *Server) createSubscriptionV1(w http.ResponseWriter, r *http.Request) {
	var in subscriptionInput
	if err := decodeJSON(r, &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	sub, secret, err := s.createSubscription(r.Context(), principalOf(r.Context()).Merchant.ID, in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	v := subscriptionView(sub)
	v.Secret = secret
	writeJSON(w, http.StatusCreated, v)
}

func (s *Server) listSubscriptions(w http.ResponseWriter, r *http.Request) {
	p, err := s.listPage(r, "status")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := r.URL.Query().Get("status")
	if r.URL.Query().Has("status") && status != store.SubscriptionEnabled && status != store.SubscriptionDisabled {
		s.writeError(w, r, errInvalid("status", "status must be enabled or disabled."))
		return
	}
	subs, err := s.store.ListSubscriptions(r.Context(), principalOf(r.Context()).Merchant.ID, store.SubscriptionFilter{Status: status}, p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeList(s, w, r, p, subs, nil, func(sub store.Subscription) store.Cursor {
		return store.Cursor{CreatedAt: sub.CreatedAt, ID: sub.ID.String()}
	}, subscriptionView)
}

func (s *Server) getSubscription(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sub, err := s.store.GetSubscription(r.Context(), principalOf(r.Context()).Merchant.ID, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, subscriptionView(sub))
}

func (s *Server) updateSubscriptionV1(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var p subscriptionPatch
	if err := decodeJSON(r, &p); err != nil {
		s.writeError(w, r, err)
		return
	}
	sub, err := s.updateSubscription(r.Context(), principalOf(r.Context()).Merchant.ID, id, p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, subscriptionView(sub))
}

func (s *Server) deleteSubscription(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.store.DeleteSubscription(r.Context(), principalOf(r.Context()).Merchant.ID, id); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// rotateSecret makes a new current secret and answers the subscription with
// it; the previous secret keeps signing for signer.RotationOverlap.
func (s *Server) rotateSecret(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// The body is optional; when sent it must be an empty object.
	if len(requestBody(r)) > 0 {
		var none struct{}
		if err := decodeJSON(r, &none); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	secret, sealed, err := s.newSealedSecret()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sub, err := s.store.RotateSecret(r.Context(), principalOf(r.Context()).Merchant.ID, id, secret, sealed)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	v := subscriptionView(sub)
	v.Secret = secret
	writeJSON(w, http.StatusOK, v)
}
