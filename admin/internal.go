package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/webhookd/webhookd/internal/merchants"
	"github.com/webhookd/webhookd/internal/store"
)

// pinger is a backing service that says whether it answers.
type pinger interface {
	Ping(ctx context.Context) error
}

// internalHandlers serve the internal listener's own routes: the probes
// (readiness asks Postgres and Redis) and a merchant's settings (PUT
// /internal/v1/merchants/{id}). Publishing (ingestHandlers), API keys and
// portal sessions are groups of their own, mounted on the same listener.
type internalHandlers struct {
	postgres pinger
	// redis is nil on a server without Redis, which is then never ready.
	redis    redis.UniversalClient
	settings *merchants.SettingsUpdater
	// changed is told of a merchant's settings changed (its pinned
	// api_version is what publishes read); nil on a server without the
	// delivery pipeline.
	changed changeAnnouncer
}

// healthz answers that the process is alive: it checks nothing else.
func healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 only when Postgres and Redis both answer.
func (h internalHandlers) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{"postgres": "ok", "redis": "ok"}
	status := http.StatusOK
	if err := h.postgres.Ping(ctx); err != nil {
		checks["postgres"], status = "unavailable", http.StatusServiceUnavailable
	}
	if h.redis == nil || h.redis.Ping(ctx).Err() != nil {
		checks["redis"], status = "unavailable", http.StatusServiceUnavailable
	}
	writeJSON(w, status, checks)
}

// merchantJSON is the internal view of a merchant's settings.
type merchantJSON struct {
	ID                string    `json:"id"`
	NotificationEmail *string   `json:"notification_email"`
	APIVersion        string    `json:"api_version"`
	PortalAccentColor *string   `json:"portal_accent_color"`
	PortalLogoURL     *string   `json:"portal_logo_url"`
	RetentionDays     int       `json:"retention_days"`
	CreatedAt         time.Time `json:"created_at"`
	UpdatedAt         time.Time `json:"updated_at"`
}

// putMerchant changes a merchant's settings, making the merchant when new.
func (h internalHandlers) putMerchant(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		NotificationEmail *string `json:"notification_email"`
		APIVersion        *string `json:"api_version"`
		PortalAccentColor *string `json:"portal_accent_color"`
		PortalLogoURL     *string `json:"portal_logo_url"`
		// RetentionDays is decoded as JSON text and judged by the
		// settings' rule, so that 2.5, "7" or 1e1 are refused by name.
		RetentionDays json.RawMessage `json:"retention_days"`
	}
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	set := store.MerchantSettings{NotificationEmail: req.NotificationEmail, APIVersion: req.APIVersion,
		PortalAccentColor: req.PortalAccentColor, PortalLogoURL: req.PortalLogoURL}
	if req.RetentionDays != nil {
		days, err := merchants.ParseRetentionDays(req.RetentionDays)
		if err != nil {
			return err
		}
		set.RetentionDays = &days
	}
	actor, err := internalActor(r)
	if err != nil {
		return err
	}
	set.Actor = actor
	m, err := h.settings.Update(r.Context(), pathParam(r, "id"), set)
	if err != nil {
		return err
	}
	if h.changed != nil {
		// The publishes of every process read the pinned api_version
		// afresh.
		h.changed.SubscriptionsChanged(r.Context(), m.ID)
	}
	writeJSON(w, http.StatusOK, merchantJSON{ID: m.ID, NotificationEmail: m.NotificationEmail, APIVersion: m.APIVersion,
		PortalAccentColor: m.PortalAccentColor, PortalLogoURL: m.PortalLogoURL, RetentionDays: m.RetentionDays,
		CreatedAt: m.CreatedAt.UTC(), UpdatedAt: m.UpdatedAt.UTC()})
	return nil
}
