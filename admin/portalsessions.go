package admin

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/merchants"
	"github.com/webhookd/webhookd/internal/sessions"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/internal/transform"
)

// portalSessionRevoker ends portal sessions.
type portalSessionRevoker interface {
	RevokePortalSession(ctx context.Context, merchantID string, id uuid.UUID) error
	RevokeMerchantPortalSessions(ctx context.Context, merchantID string) (int64, error)
}

// portalSessionHandlers serve the portal's sessions on both listeners: a
// merchant's API key mints one and the portal reads and ends its own
// (/v1/portal_sessions), the core API mints one for a merchant and ends
// them all (/internal/v1/merchants/{id}/portal_sessions). They are one
// group because both mint the same session the same way; separate from
// the rest because only they issue and revoke sessions.
type portalSessionHandlers struct {
	issuer *sessions.Issuer
	store  portalSessionRevoker
	// limits holds the budget of the sessions each API key mints
	// (limits.portalSession), spent once a mint's body passed its rules.
	limits rateLimiter
	// environment is shown to the portal; publicURL is the public
	// listener's external base URL, which a session's link starts with.
	environment, publicURL string
	// destinations are the destination types a subscription may use
	// (WEBHOOKD_DESTINATIONS): the portal's endpoint form offers these.
	destinations []string
	// kinds describe the registry's kinds, for the portal's form.
	kinds *destination.Registry
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
	// Destinations are the destination types this server lets a
	// subscription use ("webhook" is an HTTP endpoint).
	Destinations []string `json:"destinations"`
	// DestinationKinds describe each allowed type of the registry (its
	// fields, labels, which are secret): the portal draws its form from
	// them, so that a new kind needs no portal code.
	DestinationKinds []destination.Metadata `json:"destination_kinds"`
	// TransformationTemplates are the transformations the portal's
	// editor offers to start from (internal/transform).
	TransformationTemplates []transform.Template `json:"transformation_templates"`
}

// createForKey mints a session with the caller's API key, which
// the session is tied to: it ends when the key is revoked or expires, and
// holds at most what the key's scopes grant.
func (h portalSessionHandlers) createForKey(w http.ResponseWriter, r *http.Request) error {
	p := principalOf(r.Context())
	return h.mint(w, r, p.Merchant.ID, p.Key.ID, p.Key.Scopes)
}

// createForMerchant mints a session for the merchant in the path, on the
// core API's token: tied to no key.
func (h portalSessionHandlers) createForMerchant(w http.ResponseWriter, r *http.Request) error {
	return h.mint(w, r, pathParam(r, "id"), uuid.Nil, nil)
}

// mint issues a session for merchantID from the body (which
// may be empty: every field has a default) and answers 201 with its link.
// keyID is the API key minting it (uuid.Nil for the core API's token),
// keyScopes its scopes. Capabilities beyond the key are 403
// insufficient_scope naming capabilities and the scopes they need, as the
// key itself is answered on a route its scopes do not cover: the request
// is well formed, and would pass from a key holding more.
func (h portalSessionHandlers) mint(w http.ResponseWriter, r *http.Request, merchantID string, keyID uuid.UUID, keyScopes []string) error {
	var in portalSessionRequest
	if len(requestBody(r)) > 0 {
		if err := decodeJSON(r, &in); err != nil {
			return err
		}
	}
	req := sessions.Request{Capabilities: in.Capabilities, TTLSeconds: in.TTLSeconds, APIKeyID: keyID, KeyScopes: keyScopes}
	if in.Branding != nil {
		req.Branding = merchants.Branding{AccentColor: in.Branding.AccentColor, LogoURL: in.Branding.LogoURL}
	}
	prepared, err := h.issuer.Prepare(merchantID, req)
	var beyond *sessions.BeyondKeyError
	if errors.As(err, &beyond) {
		e := errInsufficientScope(beyond.Scopes...).withParam(beyond.Param)
		e.Message = beyond.Error()
		return e
	}
	if err != nil {
		return err
	}
	// A key mints so many sessions a minute, each spending the key's
	// request budget: without this bound, minting would multiply it. The
	// core API's mints are the operator's own, and not limited here.
	if keyID != uuid.Nil {
		if err := h.limits.spend(w, r, h.limits.portalSession); err != nil {
			return err
		}
	}
	token, sess, err := h.issuer.Mint(r.Context(), prepared)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, portalSessionJSON{URL: h.portalURL(token), Token: token,
		ExpiresAt: sess.ExpiresAt.UTC(), Capabilities: sess.Capabilities})
	return nil
}

// portalURL is the link that opens the portal on a session. The token
// travels in the fragment, which browsers never send to a server nor put
// in a Referer.
func (h portalSessionHandlers) portalURL(token string) string {
	return strings.TrimRight(h.publicURL, "/") + "/portal/#token=" + token
}

// current describes the caller: its session, or for an API
// key what its scopes grant, with no expiry.
func (h portalSessionHandlers) current(w http.ResponseWriter, r *http.Request) error {
	p := principalOf(r.Context())
	out := currentSessionJSON{MerchantID: p.Merchant.ID, Capabilities: p.Capabilities,
		Branding:    brandingJSON{AccentColor: p.Merchant.PortalAccentColor, LogoURL: p.Merchant.PortalLogoURL},
		Environment: publicEnvironment(h.environment), Destinations: h.destinations, DestinationKinds: h.destinationKinds(),
		TransformationTemplates: transform.Templates()}
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

// end ends the calling session (sign out). A caller with an
// API key has no session to end: nothing changes, and the answer is the
// same 204, so that a sign-out is idempotent whatever the credential.
func (h portalSessionHandlers) end(w http.ResponseWriter, r *http.Request) error {
	if p := principalOf(r.Context()); p.Session != nil {
		if err := h.store.RevokePortalSession(r.Context(), p.Merchant.ID, p.Session.ID); err != nil {
			return err
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// endForMerchant ends every live session of a merchant, for
// instance when a member of its staff leaves. Ending none is no error.
func (h portalSessionHandlers) endForMerchant(w http.ResponseWriter, r *http.Request) error {
	id := pathParam(r, "id")
	if err := merchants.CheckID("merchant_id", id); err != nil {
		return err
	}
	if _, err := h.store.RevokeMerchantPortalSessions(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// destinationKinds are the metadata of the allowed types that are kinds
// of the registry, in its order; never null.
func (h portalSessionHandlers) destinationKinds() []destination.Metadata {
	out := []destination.Metadata{}
	if h.kinds == nil {
		return out
	}
	for _, md := range h.kinds.Metadata() {
		if slices.Contains(h.destinations, md.Type) {
			out = append(out, md)
		}
	}
	return out
}

// allowedDestinations are the destination types the registry accepts:
// the configured ones, or every type when none are configured (the
// registry's rule for nil).
func allowedDestinations(configured []string, kinds *destination.Registry) []string {
	if configured == nil {
		return subscriptions.DestinationTypes(kinds)
	}
	return slices.Clone(configured)
}
