package publish

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
)

// MaxReplayWindow bounds a replay's window (until - since): a longer
// outage is replayed in several windows, one after the other.
const MaxReplayWindow = 7 * 24 * time.Hour

// MaxReplayDeliveries bounds the deliveries one replay may match, so that
// the count shown before confirming stays a bounded read and one request
// cannot queue an unbounded amount of work; past it the merchant narrows
// the window or adds a filter.
const MaxReplayDeliveries = 100_000

// Rules of a replay's fields, as invalid.Error reports them.
const (
	RuleReplayWindow  = "replay_window"
	RuleReplayStatus  = "replay_status"
	RuleReplayClass   = "replay_http_status_class"
	RuleReplayTooMany = "replay_too_many"
	RuleReplaySub     = "replay_subscription"
)

// ReplayRequest is a replay as a merchant asks for it: the window parsed,
// every other field as sent (nil when absent), checked by
// Replays.Filter against its allow-list.
type ReplayRequest struct {
	Since, Until    time.Time
	SubscriptionID  *string
	EventType       *string
	Status          *string
	HTTPStatusClass *string
}

// replayStatuses and replayClasses are the allow-lists of the two
// enumerated filters.
var (
	replayStatuses = map[string]store.DeliveryStatus{
		"failed": store.DeliveryFailed, "skipped": store.DeliverySkipped, "succeeded": store.DeliverySucceeded,
	}
	replayClasses = map[string]string{
		store.HTTPClass4xx: store.HTTPClass4xx, store.HTTPClass5xx: store.HTTPClass5xx, store.HTTPClassNone: store.HTTPClassNone,
	}
)

// ParseReplayRequest checks every field of req against its allow-list
// and the window's rules at now, and returns the filter; a broken rule
// is an *invalid.Error naming the field. It reads nothing: whether the
// subscription is the merchant's is Replays' to check.
func ParseReplayRequest(req ReplayRequest, types catalogue.Catalogue, now time.Time) (store.ReplayFilter, error) {
	f := store.ReplayFilter{Since: req.Since.UTC(), Until: req.Until.UTC()}
	switch {
	case !f.Since.Before(f.Until):
		return f, invalid.Value("until", RuleReplayWindow, "until must be after since.")
	case f.Until.After(now):
		return f, invalid.Value("until", RuleReplayWindow, "until must not be in the future.")
	case f.Since.Before(now.Add(-store.Retention)):
		return f, invalid.Value("since", RuleReplayWindow,
			"since must be within the last "+strconv.Itoa(int(store.Retention/(24*time.Hour)))+" days: older deliveries are gone.")
	case f.Until.Sub(f.Since) > MaxReplayWindow:
		return f, invalid.Value("until", RuleReplayWindow, "The window may span at most 7 days; replay a longer one in several windows.")
	}
	if req.SubscriptionID != nil {
		id, bad := invalid.UUID("subscription_id", RuleReplaySub, *req.SubscriptionID)
		if bad != nil {
			return f, bad
		}
		f.SubscriptionID = &id
	}
	if req.EventType != nil {
		if bad := types.CheckFilter("event_type", *req.EventType); bad != nil {
			return f, bad
		}
		f.EventType = *req.EventType
	}
	if req.Status != nil {
		s, ok := replayStatuses[*req.Status]
		if !ok {
			return f, invalid.Value("status", RuleReplayStatus, "status must be one of failed, skipped, succeeded.")
		}
		f.Status = s
	}
	if req.HTTPStatusClass != nil {
		c, ok := replayClasses[*req.HTTPStatusClass]
		if !ok {
			return f, invalid.Value("http_status_class", RuleReplayClass,
				"http_status_class must be one of 4xx, 5xx, none (no HTTP answer: a network error or a timeout).")
		}
		f.HTTPStatusClass = c
	}
	return f, nil
}

// replayStore is what Replays needs of the database.
type replayStore interface {
	// CountReplayable counts what a filter selects, up to limit+1.
	CountReplayable(ctx context.Context, merchantID string, f store.ReplayFilter, limit int) (int, error)
	// CreateReplay records a replay; ErrReplayRunning when one runs.
	CreateReplay(ctx context.Context, merchantID string, f store.ReplayFilter, matched int, now time.Time) (store.Replay, error)
	// GetReplay reads one of the merchant's replays.
	GetReplay(ctx context.Context, merchantID string, id uuid.UUID) (store.Replay, error)
}

// ReplaysConfig is what Replays needs; Store and Subscriptions are
// required.
type ReplaysConfig struct {
	// Store keeps the replays.
	Store replayStore
	// Subscriptions reads the subscription a replay names.
	Subscriptions subscriptionReader
	// EventTypes are the types the event_type filter may name.
	EventTypes catalogue.Catalogue
	// Clock is the one clock; default the system's.
	Clock clock.Clock
}

// Replays is the API side of bulk replays (POST
// /v1/webhook_deliveries/replay): it checks a request, counts what it
// selects, and records the replay, which the replay job
// (maintain.Replayer) then carries out as manual attempts in the manual
// lane. Nothing here enqueues an attempt.
type Replays struct {
	cfg ReplaysConfig
}

// NewReplays checks cfg and builds Replays.
func NewReplays(cfg ReplaysConfig) (*Replays, error) {
	if cfg.Store == nil || cfg.Subscriptions == nil {
		return nil, errors.New("replays: Store and Subscriptions are required")
	}
	cfg.Clock = clock.Or(cfg.Clock)
	return &Replays{cfg: cfg}, nil
}

// filter parses req and checks that the subscription it names, if any,
// is the merchant's.
func (r *Replays) filter(ctx context.Context, merchantID string, req ReplayRequest) (store.ReplayFilter, error) {
	f, err := ParseReplayRequest(req, r.cfg.EventTypes, r.cfg.Clock.Now())
	if err != nil {
		return f, err
	}
	if f.SubscriptionID != nil {
		_, err := r.cfg.Subscriptions.GetSubscription(ctx, merchantID, *f.SubscriptionID)
		if errors.Is(err, store.ErrNotFound) {
			return f, invalid.Value("subscription_id", RuleReplaySub, "No such webhook subscription.")
		}
		if err != nil {
			return f, err
		}
	}
	return f, nil
}

// Estimate is how many deliveries req would replay now (at most
// MaxReplayDeliveries+1), for the merchant to confirm.
func (r *Replays) Estimate(ctx context.Context, merchantID string, req ReplayRequest) (store.ReplayFilter, int, error) {
	f, err := r.filter(ctx, merchantID, req)
	if err != nil {
		return f, 0, err
	}
	n, err := r.cfg.Store.CountReplayable(ctx, merchantID, f, MaxReplayDeliveries)
	return f, n, err
}

// Start records a replay of what req selects and returns it; the replay
// job makes its attempts. store.ErrReplayRunning: one of the merchant's
// replays is still running.
func (r *Replays) Start(ctx context.Context, merchantID string, req ReplayRequest) (store.Replay, error) {
	f, n, err := r.Estimate(ctx, merchantID, req)
	if err != nil {
		return store.Replay{}, err
	}
	if n > MaxReplayDeliveries {
		return store.Replay{}, invalid.Value("until", RuleReplayTooMany, fmt.Sprintf(
			"The window matches more than %d deliveries; narrow it or add a filter.", MaxReplayDeliveries))
	}
	return r.cfg.Store.CreateReplay(ctx, merchantID, f, n, r.cfg.Clock.Now())
}

// Get reads one of the merchant's replays.
func (r *Replays) Get(ctx context.Context, merchantID string, id uuid.UUID) (store.Replay, error) {
	return r.cfg.Store.GetReplay(ctx, merchantID, id)
}
