package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
)

// legacyRoutes are POST /api/service/webhook-subscription/create|update|delete
// (DESIGN.md "Legacy webhook subscription"). They share the store and the
// validation of the Banking routes, so a subscription made on one surface is
// the same object on the other; only the JSON is camelCase.
func (s *Server) legacyRoutes(r chi.Router) {
	write := s.requireScope(ScopeWrite)
	r.With(write).Post("/create", s.handle(s.legacyCreate))
	r.With(write).Post("/update", s.handle(s.legacyUpdate))
	r.With(write).Post("/delete", s.handle(s.legacyDelete))
}

// legacySubscriptionJSON is the legacy resource.
type legacySubscriptionJSON struct {
	ID          string                   `json:"id"`
	URL         string                   `json:"url"`
	Events      []string                 `json:"events"`
	Description *string                  `json:"description"`
	Status      store.SubscriptionStatus `json:"status"`
	Metadata    map[string]string        `json:"metadata"`
	Filter      *string                  `json:"filter"`
	Headers     map[string]string        `json:"headers"`
	// Secret is only in the answer of create.
	Secret    string    `json:"secret,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	RateLimit *int      `json:"rateLimit"`
	Ordering  any       `json:"ordering"`
}

func (s *Server) legacySubscriptionView(ctx context.Context, sub store.Subscription) legacySubscriptionJSON {
	rateLimit, ordering := controlsView(sub)
	return legacySubscriptionJSON{
		RateLimit: rateLimit, Ordering: ordering,
		ID: sub.ID.String(), URL: sub.URL, Events: sub.Events, Description: sub.Description,
		Status: sub.Status, Metadata: sub.Metadata, CreatedAt: sub.CreatedAt.UTC(), UpdatedAt: sub.UpdatedAt.UTC(),
		Filter: sub.Filter, Headers: s.maskedHeaders(ctx, sub),
	}
}

func (s *Server) legacyCreate(w http.ResponseWriter, r *http.Request) error {
	var legacy struct {
		URL         *string           `json:"url"`
		Events      []string          `json:"events"`
		Description optionalString    `json:"description"`
		Metadata    map[string]string `json:"metadata"`
		RateLimit   optionalInt       `json:"rateLimit"`
		Ordering    rawField          `json:"ordering"`
		Filter      optionalString    `json:"filter"`
		Headers     optionalHeaders   `json:"headers"`
	}
	if err := decodeJSON(r, &legacy); err != nil {
		return err
	}
	in := subscriptionInput(legacy)
	sub, secret, err := s.subscriptions.Create(r.Context(), principalOf(r.Context()).Merchant.ID, in.draft())
	if err != nil {
		return err
	}
	v := s.legacySubscriptionView(r.Context(), sub)
	v.Secret = secret
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) legacyUpdate(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		ID          *string           `json:"id"`
		URL         *string           `json:"url"`
		Events      []string          `json:"events"`
		Description optionalString    `json:"description"`
		Metadata    map[string]string `json:"metadata"`
		Status      *string           `json:"status"`
		RateLimit   optionalInt       `json:"rateLimit"`
		Ordering    rawField          `json:"ordering"`
		Filter      optionalString    `json:"filter"`
		Headers     optionalHeaders   `json:"headers"`
	}
	if err := decodeJSON(r, &in); err != nil {
		return err
	}
	id, err := legacyID(in.ID)
	if err != nil {
		return err
	}
	patch := subscriptionPatch{URL: in.URL, Events: in.Events, Description: in.Description, Metadata: in.Metadata, Status: in.Status,
		RateLimit: in.RateLimit, Ordering: in.Ordering,
		Filter: in.Filter, Headers: in.Headers}
	sub, err := s.subscriptions.Update(r.Context(), principalOf(r.Context()).Merchant.ID, id, patch.change())
	if err != nil {
		return err
	}
	s.dropIfDisabled(r, sub)
	writeJSON(w, http.StatusOK, s.legacySubscriptionView(r.Context(), sub))
	return nil
}

func (s *Server) legacyDelete(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		ID *string `json:"id"`
	}
	if err := decodeJSON(r, &in); err != nil {
		return err
	}
	id, err := legacyID(in.ID)
	if err != nil {
		return err
	}
	if err := s.store.DeleteSubscription(r.Context(), principalOf(r.Context()).Merchant.ID, id); err != nil {
		return err
	}
	s.dropWork(r, id)
	writeJSON(w, http.StatusOK, map[string]any{"id": id.String(), "deleted": true})
	return nil
}

// legacyID reads the id field that the legacy update and delete bodies
// carry instead of a path parameter.
func legacyID(raw *string) (uuid.UUID, error) {
	if raw == nil {
		return uuid.Nil, errMissing("id")
	}
	return parseID(*raw)
}
