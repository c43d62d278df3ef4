package maintain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
)

// Bounds of one round of the replay job.
const (
	// replaysPerRound bounds the replays one round moves on; the least
	// recently moved go first, the rest in the next round.
	replaysPerRound = 50
	// replayScan bounds the deliveries one page of a replay looks at,
	// however few of them its filters select.
	replayScan = 500
	// replaysDeletedPerRound bounds the old replays one round deletes.
	replaysDeletedPerRound = 100
)

// replayerStore is what the Replayer needs of the database.
type replayerStore interface {
	// RunningReplays lists the replays not complete, the least
	// recently moved on first.
	RunningReplays(ctx context.Context, limit int) ([]store.Replay, error)
	// SettleReplay counts the attempts made for a replay's requests.
	SettleReplay(ctx context.Context, id uuid.UUID, now time.Time) (store.Replay, error)
	// OpenReplayItems counts a replay's requests not settled.
	OpenReplayItems(ctx context.Context, id uuid.UUID) (int, error)
	// NextReplayPage reads the deliveries after a replay's cursor.
	NextReplayPage(ctx context.Context, r store.Replay, room, scan int) (store.ReplayPage, error)
	// RequestReplayPage requests a page's attempts and moves the cursor.
	RequestReplayPage(ctx context.Context, r store.Replay, p store.ReplayPage, now time.Time) error
	// DeleteReplaysBefore deletes complete replays made before a time.
	DeleteReplaysBefore(ctx context.Context, before time.Time, limit int) (int, error)
}

// attemptScheduler parks manual attempts in the schedule (queue.Enqueuer
// is one).
type attemptScheduler interface {
	// Schedule parks an attempt under id; a parked id adds nothing.
	Schedule(ctx context.Context, t queue.Attempt, id string) (bool, error)
}

// ReplayerConfig is what the Replayer needs.
type ReplayerConfig struct {
	// Store keeps the replays (required).
	Store replayerStore
	// Tasks parks the replay's manual attempts (required).
	Tasks attemptScheduler
	// InFlight bounds the attempts of one replay requested and not yet
	// made: the pace of a replay is that of its receiver, never more than
	// InFlight ahead of it (required, positive).
	InFlight int
	// Runtime is the clock and the logger.
	Runtime
}

func (c ReplayerConfig) validate() error {
	switch {
	case c.Store == nil || c.Tasks == nil:
		return errors.New("replayer: Store and Tasks are required")
	case c.InFlight <= 0:
		return errors.New("replayer: InFlight must be positive")
	}
	return nil
}

// Replayer carries out bulk replays (POST /v1/webhook_deliveries/replay)
// as manual attempts, the redeliver's: same webhook-id and body, fresh
// signatures. Each round it counts the attempts made for every running
// replay, then requests the next deliveries of its window, a bounded page
// after its stored cursor, so that at most InFlight of its attempts wait
// at once. The attempts wait in the subscription's manual lane, under the
// merchant's share of the workers: a replay takes its merchant's turns,
// never another merchant's. Everything it knows is in Postgres (cursor,
// requests, counts), so a round after a restart, on any instance, resumes
// where the last committed page ended; a page is requested in one
// transaction with the cursor's move, so no delivery is requested twice.
// It runs as TaskReplay, and deletes replays older than the retention.
type Replayer struct {
	cfg    ReplayerConfig
	clock  clock.Clock
	logger *slog.Logger
}

// NewReplayer checks cfg and builds the Replayer.
func NewReplayer(cfg ReplayerConfig) (*Replayer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Replayer{cfg: cfg, clock: cfg.clock(), logger: cfg.logger()}, nil
}

// HandleReplay runs one round as a periodic task.
func (r *Replayer) HandleReplay(ctx context.Context, _ *asynq.Task) error {
	if err := r.Round(ctx); err != nil {
		r.logger.ErrorContext(ctx, "replay round", "error", err)
	}
	return nil // the next period tries again; never archive the job
}

// Round moves every running replay on by one page, and deletes old ones.
func (r *Replayer) Round(ctx context.Context) error {
	now := r.clock.Now()
	if _, err := r.cfg.Store.DeleteReplaysBefore(ctx, now.Add(-store.Retention), replaysDeletedPerRound); err != nil {
		return err
	}
	running, err := r.cfg.Store.RunningReplays(ctx, replaysPerRound)
	if err != nil {
		return err
	}
	var errs []error
	for _, rp := range running {
		if err := r.step(ctx, rp); err != nil {
			errs = append(errs, fmt.Errorf("replay %s: %w", rp.ID, err))
		}
	}
	return errors.Join(errs...)
}

// step settles one replay's attempts and requests its next page.
func (r *Replayer) step(ctx context.Context, rp store.Replay) error {
	now := r.clock.Now()
	rp, err := r.cfg.Store.SettleReplay(ctx, rp.ID, now)
	if err != nil {
		return err
	}
	if rp.CompletedAt != nil {
		r.logger.InfoContext(ctx, "replay complete", "replay_id", rp.ID, "merchant_id", rp.MerchantID,
			"matched", rp.Matched, "attempted", rp.Attempted, "succeeded", rp.Succeeded, "failed", rp.Failed)
		return nil
	}
	if rp.Paged {
		return nil // every request made; waiting for the attempts
	}
	open, err := r.cfg.Store.OpenReplayItems(ctx, rp.ID)
	if err != nil {
		return err
	}
	room := r.cfg.InFlight - open
	if room <= 0 {
		return nil
	}
	p, err := r.cfg.Store.NextReplayPage(ctx, rp, room, replayScan)
	if err != nil {
		return err
	}
	if err := r.cfg.Store.RequestReplayPage(ctx, rp, p, now); errors.Is(err, store.ErrConflict) {
		return nil // another instance took this page
	} else if err != nil {
		return err
	}
	for _, d := range p.Deliveries {
		// One id per replay and delivery: parking it again after a
		// restart adds nothing. A lost one is parked again by the
		// sweeper, from the request in Postgres.
		if _, err := r.cfg.Tasks.Schedule(ctx, queue.ManualAttempt(rp.MerchantID, d), queue.ManualTaskID(d.ID, rp.ID)); err != nil {
			r.logger.WarnContext(ctx, "park a replay's attempt; the sweeper will retry", "replay_id", rp.ID, "delivery_id", d.ID, "error", err)
		}
	}
	return nil
}
