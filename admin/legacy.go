package admin

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/webhookd/webhookd/store"
)

// legacyRoutes are POST /api/service/webhook-subscription/create|update|delete
// (DESIGN.md "Legacy webhook subscription"). They share the store and the
// validation of the Banking routes, so a subscription made on one surface is
// the same object on the other; only the JSON is camelCase.
func (s *Server) legacyRoutes(r chi.Router) {
	write := s.requireScope(ScopeWrite)
	r.With(write).Post("/create", s.legacyCreate)
	r.With(write).Post("/update", s.legacyUpdate)
	r.With(write).Post("/delete", s.legacyDelete)
}

// legacySubscriptionJSON is the legacy resource.
type legacySubscriptionJSON struct {
	ID          string            `json:"id"`
	URL         string            `json:"url"`
	Events      []string          `json:"events"`
	Description *string           `json:"description"`
	Status      string            `json:"status"`
	Metadata    map[string]string `json:"metadata"`
	// Secret is only in the answer of create.
	Secret    string    `json:"secret,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

func legacySubscriptionView(sub store.Subscription) legacySubscriptionJSON {
	return legacySubscriptionJSON{
		ID: sub.ID.String(), URL: sub.URL, Events: sub.Events, Description: sub.Description,
		Status: sub.Status, Metadata: sub.Metadata, CreatedAt: sub.CreatedAt.UTC(), UpdatedAt: sub.UpdatedAt.UTC(),
	}
}

func (s *Server) legacyCreate(w http.ResponseWriter, r *http.Request) {
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
	v := legacySubscriptionView(sub)
	v.Secret = secret
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) legacyUpdate(w http.ResponseWriter, r *http.Request) {
	var in struct {
		ID          *string           `json:"id"`
		URL         *string           `json:"url"`
		Events      []string          `json:"events"`
		Description optionalString    `json:"description"`
		Metadata    map[string]string `json:"metadata"`
		Status      *string           `json:"status"`
	}
	if err := decodeJSON(r, &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	id, err := legacyID(in.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sub, err := s.updateSubscription(r.Context(), principalOf(r.Context()).Merchant.ID, id, subscriptionPatch{
		URL: in.URL, Events: in.Events, Description: in.Description, Metadata: in.Metadata, Status: in.Status,
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, legacySubscriptionView(sub))
}

func (s *Server) legacyDelete(w http.ResponseWriter, r *http.Request) {
	var in struct {
		ID *string `json:"id"`
	}
	if err := decodeJSON(r, &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	id, err := legacyID(in.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.store.DeleteSubscription(r.Context(), principalOf(r.Context()).Merchant.ID, id); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id.String(), "deleted": true})
}

// legacyID reads the id field that the legacy update and delete bodies
// carry instead of a path parameter.
func legacyID(raw *string) (uuid.UUID, error) {
	if raw == nil {
		return uuid.Nil, errMissing("id")
	}
	return parseID(*raw)
}
