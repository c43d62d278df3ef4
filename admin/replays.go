package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher/publish"
	"github.com/webhookd/webhookd/internal/store"
)

// Replays is what the replay routes ask of the pipeline
// (publish.Replays is one).
type Replays interface {
	// Estimate counts what a replay would select now.
	Estimate(ctx context.Context, merchantID string, req publish.ReplayRequest) (store.ReplayFilter, int, error)
	// Start records a replay, which the workers carry out.
	Start(ctx context.Context, merchantID string, req publish.ReplayRequest) (store.Replay, error)
	// Get reads one of the merchant's replays.
	Get(ctx context.Context, merchantID string, id uuid.UUID) (store.Replay, error)
}

// replayHandlers serve bulk replays: POST /v1/webhook_deliveries/replay
// (dry_run: the count alone) and GET /v1/replays/{id}.
type replayHandlers struct {
	replays Replays
}

// replayFiltersJSON is a replay's filters as asked.
type replayFiltersJSON struct {
	Since           time.Time  `json:"since"`
	Until           time.Time  `json:"until"`
	SubscriptionID  *uuid.UUID `json:"subscription_id"`
	EventType       *string    `json:"event_type"`
	Status          *string    `json:"status"`
	HTTPStatusClass *string    `json:"http_status_class"`
}

// replayJSON is the replay resource.
type replayJSON struct {
	ID          uuid.UUID         `json:"id"`
	Type        string            `json:"type"`
	Status      string            `json:"status"`
	Filters     replayFiltersJSON `json:"filters"`
	Matched     int               `json:"matched"`
	Attempted   int               `json:"attempted"`
	Succeeded   int               `json:"succeeded"`
	Failed      int               `json:"failed"`
	CreatedAt   time.Time         `json:"created_at"`
	CompletedAt *time.Time        `json:"completed_at"`
}

// replayEstimateJSON answers a dry run: what a replay would select.
type replayEstimateJSON struct {
	Type    string            `json:"type"`
	Filters replayFiltersJSON `json:"filters"`
	Matched int               `json:"matched"`
	// Capped: more than Matched match, past the bound of one replay.
	Capped bool `json:"capped"`
}

func replayOptional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func replayFilters(f store.ReplayFilter) replayFiltersJSON {
	return replayFiltersJSON{Since: f.Since.UTC(), Until: f.Until.UTC(), SubscriptionID: f.SubscriptionID,
		EventType: replayOptional(f.EventType), Status: replayOptional(string(f.Status)), HTTPStatusClass: replayOptional(f.HTTPStatusClass)}
}

func replayView(r store.Replay) replayJSON {
	status := "running"
	if r.CompletedAt != nil {
		status = "completed"
	}
	return replayJSON{ID: r.ID, Type: "webhook_replay", Status: status, Filters: replayFilters(r.Filter),
		Matched: r.Matched, Attempted: r.Attempted, Succeeded: r.Succeeded, Failed: r.Failed,
		CreatedAt: r.CreatedAt.UTC(), CompletedAt: utcPtr(r.CompletedAt)}
}

// replay starts a replay (202 with it) or, with dry_run, answers how many
// deliveries it would replay (200). The Idempotency-Key middleware makes
// a repeated request answer as the first did.
func (h replayHandlers) replay(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Since           *string `json:"since"`
		Until           *string `json:"until"`
		SubscriptionID  *string `json:"subscription_id"`
		EventType       *string `json:"event_type"`
		Status          *string `json:"status"`
		HTTPStatusClass *string `json:"http_status_class"`
		DryRun          bool    `json:"dry_run"`
	}
	if err := decodeJSON(r, &in); err != nil {
		return err
	}
	req := publish.ReplayRequest{SubscriptionID: in.SubscriptionID, EventType: in.EventType, Status: in.Status,
		HTTPStatusClass: in.HTTPStatusClass}
	for _, t := range []struct {
		name string
		in   *string
		out  *time.Time
	}{{"since", in.Since, &req.Since}, {"until", in.Until, &req.Until}} {
		if t.in == nil {
			return errMissing(t.name)
		}
		v, ok := parseTimestamp(*t.in)
		if !ok {
			return errInvalid(t.name, t.name+" must be an RFC 3339 timestamp such as 2026-05-01T00:00:00Z.")
		}
		*t.out = v
	}
	merchant := principalOf(r.Context()).Merchant.ID
	if in.DryRun {
		f, n, err := h.replays.Estimate(r.Context(), merchant, req)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, replayEstimateJSON{Type: "webhook_replay_estimate", Filters: replayFilters(f),
			Matched: min(n, publish.MaxReplayDeliveries), Capped: n > publish.MaxReplayDeliveries})
		return nil
	}
	rp, err := h.replays.Start(r.Context(), merchant, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, replayView(rp))
	return nil
}

// get answers one of the merchant's replays, with its progress.
func (h replayHandlers) get(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	rp, err := h.replays.Get(r.Context(), principalOf(r.Context()).Merchant.ID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, replayView(rp))
	return nil
}
