package admin

import (
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/merchants"
	"github.com/webhookd/webhookd/internal/sessions"
)

// portalSessionRoutes are the /v1/portal_sessions routes. Minting needs
// an API key with webhooks:write: a session cannot mint sessions.
func (s *Server) portalSessionRoutes(r chi.Router) {
	r.With(s.requireScope(ScopeWrite)).Post("/portal_sessions", s.handle(s.createPortalSessionV1))
	r.With(s.requireCapability(sessions.View)).Get("/portal_sessions/current", s.handle(s.currentPortalSession))
	r.With(s.requireCapability(sessions.View)).Delete("/portal_sessions/current", s.handle(s.endPortalSession))
}

// internalPortalSessionRoutes are the core API's: mint a session for a
// merchant, and end all of a merchant's sessions.
func (s *Server) internalPortalSessionRoutes(r chi.Router) {
	r.Post("/merchants/{id}/portal_sessions", s.handle(s.createPortalSessionInternal))
	r.Delete("/merchants/{id}/portal_sessions", s.handle(s.endMerchantPortalSessions))
}

// portalSessionRequest is the body of both mint routes; every field is
// optional.
type portalSessionRequest struct {
	Capabilities []string      `json:"capabilities"`
	TTLSeconds   *int64        `json:"ttl_seconds"`
	Branding     *brandingJSON `json:"branding"`
}

// brandingJSON is a portal's branding, in a request or an answer.
type brandingJSON struct {
	AccentColor *string `json:"accent_color"`
	LogoURL     *string `json:"logo_url"`
}

// portalSessionJSON is the answer of a mint: the token is shown once.
type portalSessionJSON struct {
	URL          string    `json:"url"`
	Token        string    `json:"token"`
	ExpiresAt    time.Time `json:"expires_at"`
	Capabilities []string  `json:"capabilities"`
}

// currentSessionJSON is what the portal reads about its caller.
type currentSessionJSON struct {
	MerchantID   string       `json:"merchant_id"`
	Capabilities []string     `json:"capabilities"`
	ExpiresAt    *time.Time   `json:"expires_at"`
	Branding     brandingJSON `json:"branding"`
	Environment  string       `json:"environment"`
}

// createPortalSessionV1 mints a session with the caller's API key, which
// the session is tied to: it ends when the key is revoked or expires.
func (s *Server) createPortalSessionV1(w http.ResponseWriter, r *http.Request) error {
	p := principalOf(r.Context())
	return s.mintPortalSession(w, r, p.Merchant.ID, p.Key.ID)
}

func (s *Server) createPortalSessionInternal(w http.ResponseWriter, r *http.Request) error {
	return s.mintPortalSession(w, r, pathParam(r, "id"), uuid.Nil)
}

// mintPortalSession issues a session for merchantID from the body (which
// may be empty: every field has a default) and answers 201 with its link.
// keyID is the API key minting it (uuid.Nil for the core API's token).
func (s *Server) mintPortalSession(w http.ResponseWriter, r *http.Request, merchantID string, keyID uuid.UUID) error {
	var in portalSessionRequest
	if len(requestBody(r)) > 0 {
		if err := decodeJSON(r, &in); err != nil {
			return err
		}
	}
	req := sessions.Request{Capabilities: in.Capabilities, TTLSeconds: in.TTLSeconds, APIKeyID: keyID}
	if in.Branding != nil {
		req.Branding = merchants.Branding{AccentColor: in.Branding.AccentColor, LogoURL: in.Branding.LogoURL}
	}
	token, sess, err := s.portalSessions.Issue(r.Context(), merchantID, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, portalSessionJSON{URL: s.portalURL(token), Token: token,
		ExpiresAt: sess.ExpiresAt.UTC(), Capabilities: sess.Capabilities})
	return nil
}

// portalURL is the link that opens the portal on a session. The token
// travels in the fragment, which browsers never send to a server nor put
// in a Referer.
func (s *Server) portalURL(token string) string {
	return strings.TrimRight(s.cfg.PublicURL, "/") + "/portal/#token=" + token
}

// currentPortalSession describes the caller: its session, or for an API
// key what its scopes grant, with no expiry.
func (s *Server) currentPortalSession(w http.ResponseWriter, r *http.Request) error {
	p := principalOf(r.Context())
	out := currentSessionJSON{MerchantID: p.Merchant.ID, Capabilities: p.Capabilities,
		Branding:    brandingJSON{AccentColor: p.Merchant.PortalAccentColor, LogoURL: p.Merchant.PortalLogoURL},
		Environment: publicEnvironment(s.cfg.Environment)}
	if p.Session != nil {
		out.ExpiresAt = utcPtr(&p.Session.ExpiresAt)
		// The session's own branding wins, field by field.
		if p.Session.AccentColor != nil {
			out.Branding.AccentColor = p.Session.AccentColor
		}
		if p.Session.LogoURL != nil {
			out.Branding.LogoURL = p.Session.LogoURL
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// publicEnvironment is the environment as the portal shows it.
func publicEnvironment(env string) string {
	if env == "production" {
		return "live"
	}
	return "sandbox"
}

// endPortalSession ends the calling session (sign out). A caller with an
// API key has no session to end: nothing changes, and the answer is the
// same 204, so that a sign-out is idempotent whatever the credential.
func (s *Server) endPortalSession(w http.ResponseWriter, r *http.Request) error {
	if p := principalOf(r.Context()); p.Session != nil {
		if err := s.store.RevokePortalSession(r.Context(), p.Merchant.ID, p.Session.ID); err != nil {
			return err
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// endMerchantPortalSessions ends every live session of a merchant, for
// instance when a member of its staff leaves. Ending none is no error.
func (s *Server) endMerchantPortalSessions(w http.ResponseWriter, r *http.Request) error {
	id := pathParam(r, "id")
	if err := merchants.CheckID("merchant_id", id); err != nil {
		return err
	}
	if _, err := s.store.RevokeMerchantPortalSessions(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
