package admin

import (
	"bytes"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/webhookd/webhookd/merchants"
	"github.com/webhookd/webhookd/store"
)

// apiKeyRoutes are the internal routes of a merchant's API keys: issue,
// list, revoke and roll.
func (s *Server) apiKeyRoutes(r chi.Router) {
	r.Post("/merchants/{id}/api_keys", s.handle(s.createAPIKey))
	r.Get("/merchants/{id}/api_keys", s.handle(s.listAPIKeys))
	r.Delete("/merchants/{id}/api_keys/{key_id}", s.handle(s.revokeAPIKey))
	r.Post("/merchants/{id}/api_keys/{key_id}/roll", s.handle(s.rollAPIKey))
}

// apiKeyJSON is what the internal API shows of a key: never the key nor
// its hash.
type apiKeyJSON struct {
	ID uuid.UUID `json:"id"`
	// Prefix is null for a key issued before webhookd kept prefixes.
	Prefix      *string    `json:"prefix"`
	Environment string     `json:"environment"`
	Scopes      []string   `json:"scopes"`
	Status      string     `json:"status"`
	CreatedAt   time.Time  `json:"created_at"`
	LastUsedAt  *time.Time `json:"last_used_at"`
	ExpiresAt   *time.Time `json:"expires_at"`
	RevokedAt   *time.Time `json:"revoked_at"`
}

// issuedKeyJSON is a key just made, with the key itself: shown this once.
type issuedKeyJSON struct {
	apiKeyJSON
	Key string `json:"key"`
}

// apiKeyView renders a stored key at now.
func apiKeyView(k store.APIKey, now time.Time) apiKeyJSON {
	v := apiKeyJSON{ID: k.ID, Environment: k.Environment, Scopes: k.Scopes, Status: merchants.KeyStatus(k, now),
		CreatedAt: k.CreatedAt.UTC(), LastUsedAt: utcOrNil(k.LastUsedAt), ExpiresAt: utcOrNil(k.ExpiresAt),
		RevokedAt: utcOrNil(k.RevokedAt)}
	if k.Prefix != "" {
		v.Prefix = &k.Prefix
	}
	return v
}

func utcOrNil(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func (s *Server) createAPIKey(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Scopes []string `json:"scopes"`
	}
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	issued, err := s.keys.Create(r.Context(), pathParam(r, "id"), req.Scopes)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, issuedKeyJSON{apiKeyJSON: apiKeyView(issued.APIKey, s.store.Now()), Key: issued.Key})
	return nil
}

// listAPIKeys answers every key of the merchant, revoked and expired ones
// included (their status and dates say so), newest first. A merchant has
// few keys: the list is not paginated.
func (s *Server) listAPIKeys(w http.ResponseWriter, r *http.Request) error {
	keys, err := s.keyRing.List(r.Context(), pathParam(r, "id"))
	if err != nil {
		return err
	}
	now := s.store.Now()
	data := make([]apiKeyJSON, len(keys))
	for i, k := range keys {
		data[i] = apiKeyView(k, now)
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": data})
	return nil
}

// revokeAPIKey ends a key at once and answers it, revoked.
func (s *Server) revokeAPIKey(w http.ResponseWriter, r *http.Request) error {
	k, err := s.keyRing.Revoke(r.Context(), pathParam(r, "id"), pathParam(r, "key_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiKeyView(k, s.store.Now()))
	return nil
}

// rollAPIKey makes a key's successor and answers it like createAPIKey. The
// body is optional: none keeps the default overlap.
func (s *Server) rollAPIKey(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		OverlapSeconds *int64 `json:"overlap_seconds"`
	}
	if len(bytes.TrimSpace(requestBody(r))) > 0 {
		if err := decodeJSON(r, &req); err != nil {
			return err
		}
	}
	issued, err := s.keyRing.Roll(r.Context(), pathParam(r, "id"), pathParam(r, "key_id"), req.OverlapSeconds)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, issuedKeyJSON{apiKeyJSON: apiKeyView(issued.APIKey, s.store.Now()), Key: issued.Key})
	return nil
}
