package admin

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/mail"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/webhookd/webhookd/store"
)

// healthz answers that the process is alive: it checks nothing else.
func healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 only when Postgres and Redis both answer.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{"postgres": "ok", "redis": "ok"}
	status := http.StatusOK
	if err := s.store.Ping(ctx); err != nil {
		checks["postgres"], status = "unavailable", http.StatusServiceUnavailable
	}
	if s.cfg.Redis == nil || s.cfg.Redis.Ping(ctx).Err() != nil {
		checks["redis"], status = "unavailable", http.StatusServiceUnavailable
	}
	writeJSON(w, status, checks)
}

// checkMerchantID refuses a merchant id that is empty, longer than 255
// bytes, or not UTF-8 (a Postgres text column cannot hold it).
func checkMerchantID(param, id string) error {
	if id == "" || len(id) > 255 || !utf8.ValidString(id) {
		return errInvalid(param, "merchant_id must be 1 to 255 bytes of UTF-8.")
	}
	return nil
}

// NewAPIKey makes a key string: the environment prefix and 32 random bytes.
func NewAPIKey(environment string) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate api key: %w", err)
	}
	return environmentPrefix(environment) + base64.RawURLEncoding.EncodeToString(b), nil
}

// ValidateScopes checks a requested scope list against the catalogue.
func ValidateScopes(scopes []string) error {
	if len(scopes) == 0 {
		return errMissing("scopes")
	}
	for _, sc := range scopes {
		if !slices.Contains(Scopes, sc) {
			return errInvalid("scopes", fmt.Sprintf("Unknown scope %q; known scopes: %v.", sc, Scopes))
		}
	}
	return nil
}

// IssueAPIKey validates the scopes, makes a key, stores its hash and returns
// the key: the only time it is ever seen. Both the internal route and
// `webhookd keys create` use it.
func IssueAPIKey(ctx context.Context, st *store.Store, environment, defaultVersion, merchantID string, scopes []string) (string, error) {
	if err := ValidateScopes(scopes); err != nil {
		return "", err
	}
	if err := checkMerchantID("merchant_id", merchantID); err != nil {
		return "", err
	}
	key, err := NewAPIKey(environment)
	if err != nil {
		return "", err
	}
	if _, err := st.CreateAPIKey(ctx, merchantID, defaultVersion, environment, key, scopes); err != nil {
		return "", err
	}
	return key, nil
}

func (s *Server) createAPIKey(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Scopes []string `json:"scopes"`
	}
	if err := decodeJSON(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	key, err := IssueAPIKey(r.Context(), s.store, s.cfg.Environment, s.cfg.Versions.Latest(), chi.URLParam(r, "id"), req.Scopes)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"key": key})
}

// merchantJSON is the internal view of a merchant's settings.
type merchantJSON struct {
	ID                string    `json:"id"`
	NotificationEmail *string   `json:"notification_email"`
	APIVersion        string    `json:"api_version"`
	CreatedAt         time.Time `json:"created_at"`
	UpdatedAt         time.Time `json:"updated_at"`
}

func (s *Server) putMerchant(w http.ResponseWriter, r *http.Request) {
	var req struct {
		NotificationEmail *string `json:"notification_email"`
		APIVersion        *string `json:"api_version"`
	}
	if err := decodeJSON(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := checkMerchantID("merchant_id", chi.URLParam(r, "id")); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.NotificationEmail != nil && *req.NotificationEmail != "" {
		if a, err := mail.ParseAddress(*req.NotificationEmail); err != nil || a.Name != "" {
			s.writeError(w, r, errInvalid("notification_email", "notification_email must be a plain e-mail address."))
			return
		}
	}
	if req.APIVersion != nil && !s.cfg.Versions.Usable(*req.APIVersion, s.cfg.Now()) {
		s.writeError(w, r, errInvalid("api_version", "Unknown or sunset api_version "+quote(*req.APIVersion)+"."))
		return
	}
	m, err := s.store.UpdateMerchant(r.Context(), chi.URLParam(r, "id"), s.cfg.Versions.Latest(),
		store.MerchantSettings{NotificationEmail: req.NotificationEmail, APIVersion: req.APIVersion})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, merchantJSON{ID: m.ID, NotificationEmail: m.NotificationEmail, APIVersion: m.APIVersion,
		CreatedAt: m.CreatedAt.UTC(), UpdatedAt: m.UpdatedAt.UTC()})
}
