package maintain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
)

// maintainerStore is what the maintainer needs of the database.
type maintainerStore interface {
	// WithAdvisoryLock runs fn holding the lock key, unless another
	// process holds it (ran false).
	WithAdvisoryLock(ctx context.Context, key int64, fn func(ctx context.Context) error) (ran bool, err error)
	// EnsurePartitions creates the day partitions up to days ahead.
	EnsurePartitions(ctx context.Context, now time.Time, days int) ([]string, error)
	// DropExpiredPartitions drops the partitions past retention.
	DropExpiredPartitions(ctx context.Context, now time.Time) ([]string, error)
	// ExpireIdempotencyKeys deletes the expired idempotency keys.
	ExpireIdempotencyKeys(ctx context.Context, now time.Time) (int64, error)
	// ExpireMerchantRetention deletes, within budget, the rows of merchants
	// with a retention shorter than the engine's.
	ExpireMerchantRetention(ctx context.Context, now time.Time, budget store.RetentionBudget) (store.RetentionExpiry, error)
}

// DefaultRetentionBudget bounds a round's deletions for merchants with a
// short retention: statements of 1,000 rows (each a short transaction),
// at most 200 of them per round; a backlog larger than that (a merchant
// that just shortened its retention) is worked off over the next rounds.
var DefaultRetentionBudget = store.RetentionBudget{Batch: 1000, Statements: 200}

// MaintainerConfig is what the maintainer needs.
type MaintainerConfig struct {
	// Store is the database (required).
	Store maintainerStore
	// PartitionsAhead is how many day partitions are kept ready beyond
	// today (required).
	PartitionsAhead int
	// RetentionBudget bounds each round's deletions for merchants with a
	// short retention; zero: DefaultRetentionBudget.
	RetentionBudget store.RetentionBudget
	// Runtime is the clock and the logger.
	Runtime
}

func (c MaintainerConfig) validate() error {
	switch {
	case c.Store == nil:
		return errors.New("maintainer: Store is required")
	case c.PartitionsAhead < 1:
		return errors.New("maintainer: PartitionsAhead must be at least 1")
	case c.RetentionBudget != (store.RetentionBudget{}) && (c.RetentionBudget.Batch < 1 || c.RetentionBudget.Statements < 1):
		return errors.New("maintainer: RetentionBudget needs a Batch and Statements of at least 1")
	}
	return nil
}

// Maintainer keeps the tables' shape over time: it creates the day
// partitions ahead, drops those past the 30-day retention, expires old
// idempotency keys and deletes, in bounded batches, the rows of merchants
// whose own retention is shorter. It runs as TaskMaintenance.
type Maintainer struct {
	cfg    MaintainerConfig
	clock  clock.Clock
	logger *slog.Logger
}

// NewMaintainer checks cfg and builds the Maintainer.
func NewMaintainer(cfg MaintainerConfig) (*Maintainer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.RetentionBudget == (store.RetentionBudget{}) {
		cfg.RetentionBudget = DefaultRetentionBudget
	}
	return &Maintainer{cfg: cfg, clock: cfg.clock(), logger: cfg.logger()}, nil
}

// HandleMaintenance runs maintain as a periodic task.
func (m *Maintainer) HandleMaintenance(ctx context.Context, _ *asynq.Task) error {
	if err := m.Maintain(ctx); err != nil {
		m.logger.ErrorContext(ctx, "maintenance", "error", err)
	}
	return nil // the next period tries again; never archive the job
}

// Maintain does one round. Every step is idempotent, and an advisory lock
// keeps two instances from doing it at the same time.
func (m *Maintainer) Maintain(ctx context.Context) error {
	ran, err := m.cfg.Store.WithAdvisoryLock(ctx, store.LockMaintenance, func(ctx context.Context) error {
		now := m.clock.Now()
		created, err := m.cfg.Store.EnsurePartitions(ctx, now, m.cfg.PartitionsAhead)
		if err != nil {
			return err
		}
		dropped, err := m.cfg.Store.DropExpiredPartitions(ctx, now)
		if err != nil {
			return err
		}
		expired, err := m.cfg.Store.ExpireIdempotencyKeys(ctx, now)
		if err != nil {
			return err
		}
		if len(created)+len(dropped) > 0 || expired > 0 {
			m.logger.InfoContext(ctx, "maintenance", "partitions_created", created, "partitions_dropped", dropped,
				"idempotency_keys_expired", expired)
		}
		short, err := m.cfg.Store.ExpireMerchantRetention(ctx, now, m.cfg.RetentionBudget)
		if err != nil {
			return err
		}
		if short.Deliveries+short.Events+short.Stats > 0 || short.Exhausted {
			m.logger.InfoContext(ctx, "maintenance: merchant retention", "merchants", short.Merchants,
				"deliveries", short.Deliveries, "attempts", short.Attempts, "events", short.Events,
				"attempt_stats", short.Stats, "more_left", short.Exhausted)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("maintenance: %w", err)
	}
	if !ran {
		m.logger.DebugContext(ctx, "maintenance running on another instance")
	}
	return nil
}
