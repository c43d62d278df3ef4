package admin

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/listener"
	"github.com/webhookd/webhookd/internal/merchants"
	"github.com/webhookd/webhookd/internal/store"
)

// apiKeyStore is what the key routes end in the database directly;
// issuing, listing, revoking and rolling go through merchants' rules.
type apiKeyStore interface {
	EndAPIKeyGrants(ctx context.Context, merchantID string, id uuid.UUID, now time.Time, reason string) (store.EndedGrants, error)
	// Now is the database's clock, which a key's status is judged by.
	Now() time.Time
}

// apiKeyHandlers serve the core API's routes of a merchant's API keys
// (/internal/v1/merchants/{id}/api_keys): issue, list, revoke and roll.
// They are separate because only they end what a key opened, portal
// sessions and listeners, and tell the processes holding those
// listeners' connections through Redis.
type apiKeyHandlers struct {
	issuer *merchants.KeyIssuer
	ring   *merchants.KeyRing
	store  apiKeyStore
	// redis carries the end of a listener to the process holding its
	// connection; nil leaves the connection to its next heartbeat.
	redis  redis.UniversalClient
	pages  pager
	logger *slog.Logger
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

// utcOrNil is *t in UTC, or nil.
func utcOrNil(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// create issues a key and answers it, with the key itself, this once.
func (h apiKeyHandlers) create(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Scopes []string `json:"scopes"`
	}
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	issued, err := h.issuer.Create(r.Context(), pathParam(r, "id"), req.Scopes)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, issuedKeyJSON{apiKeyJSON: apiKeyView(issued.APIKey, h.store.Now()), Key: issued.Key})
	return nil
}

// list answers the merchant's keys, revoked and expired ones
// included (their status and dates say so), newest first, one page at a
// time like every list: limit and cursor, has_more and next_cursor. Rolls
// add keys and none is ever deleted, so the list grows.
func (h apiKeyHandlers) list(w http.ResponseWriter, r *http.Request) error {
	// The merchant is judged before the page, as on every merchant route.
	merchantID := pathParam(r, "id")
	if err := merchants.CheckID("merchant_id", merchantID); err != nil {
		return err
	}
	p, err := h.pages.listPage(r)
	if err != nil {
		return err
	}
	keys, err := h.ring.List(r.Context(), merchantID, p)
	if err != nil {
		return err
	}
	now := h.store.Now()
	writeList(h.pages, w, r, p, keys, nil, func(k store.APIKey) store.Cursor {
		return store.Cursor{CreatedAt: k.CreatedAt, ID: k.ID.String()}
	}, func(k store.APIKey) apiKeyJSON { return apiKeyView(k, now) })
	return nil
}

// revoke ends a key at once, with what it opened, and answers it,
// revoked.
func (h apiKeyHandlers) revoke(w http.ResponseWriter, r *http.Request) error {
	k, err := h.ring.Revoke(r.Context(), pathParam(r, "id"), pathParam(r, "key_id"))
	if err != nil {
		return err
	}
	if err := h.endGrants(r.Context(), k.MerchantID, k.ID); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiKeyView(k, h.store.Now()))
	return nil
}

// endGrants ends what a key that no longer works opened, before the
// answer: its portal sessions and its listeners (store.EndAPIKeyGrants),
// and it tells the API processes holding the listeners' connections,
// whichever they are, to close them. A key still working ends nothing.
// Every process refuses the key's sessions and stops sending to its
// listeners from the revocation on, whatever this does (both are read
// from Postgres): this closes the connections within moments rather than
// at their next heartbeat.
func (h apiKeyHandlers) endGrants(ctx context.Context, merchantID string, keyID uuid.UUID) error {
	ended, err := h.store.EndAPIKeyGrants(ctx, merchantID, keyID, h.store.Now(), listener.ClosedError)
	if err != nil {
		return err
	}
	if len(ended.Listeners) > 0 && h.redis != nil {
		if err := pushListenerEnd(ctx, h.redis, ended.Listeners); err != nil {
			// The connections close at their next heartbeat instead, and
			// send nothing meanwhile.
			h.logger.WarnContext(ctx, "api key ended: tell its listeners' connections", "api_key_id", keyID,
				"listeners", len(ended.Listeners), "error", err)
		}
	}
	if ended.Sessions > 0 || len(ended.Listeners) > 0 {
		h.logger.InfoContext(ctx, "api key ended: what it opened ended too", "api_key_id", keyID,
			"portal_sessions", ended.Sessions, "listeners", len(ended.Listeners))
	}
	return nil
}

// roll makes a key's successor and answers it like create. The
// body is optional: none keeps the default overlap.
func (h apiKeyHandlers) roll(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		OverlapSeconds *int64 `json:"overlap_seconds"`
	}
	if len(bytes.TrimSpace(requestBody(r))) > 0 {
		if err := decodeJSON(r, &req); err != nil {
			return err
		}
	}
	issued, err := h.ring.Roll(r.Context(), pathParam(r, "id"), pathParam(r, "key_id"), req.OverlapSeconds)
	if err != nil {
		return err
	}
	// A roll with no overlap ends the old key now, like a revocation.
	if req.OverlapSeconds != nil && *req.OverlapSeconds == 0 {
		old, err := uuid.Parse(pathParam(r, "key_id")) // Roll has checked it
		if err != nil {
			return err
		}
		if err := h.endGrants(r.Context(), issued.MerchantID, old); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusCreated, issuedKeyJSON{apiKeyJSON: apiKeyView(issued.APIKey, h.store.Now()), Key: issued.Key})
	return nil
}
