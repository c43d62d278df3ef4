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

// autoDisableBatch bounds the subscriptions one round disables; the next
// round takes the rest.
const autoDisableBatch = 500

// DisableNotifier is told about subscriptions the auto-disable job
// disabled. notify.Mailer is one.
type DisableNotifier interface {
	// SubscriptionDisabled is called once per subscription disabled.
	SubscriptionDisabled(ctx context.Context, d store.AutoDisabled, after time.Duration)
}

// autoDisablerStore is what the autoDisabler needs of the database.
type autoDisablerStore interface {
	// DisableFailingSubscriptions disables, at most limit, the
	// subscriptions whose every attempt failed since failingBefore.
	DisableFailingSubscriptions(ctx context.Context, failingBefore time.Time, limit int) ([]store.AutoDisabled, error)
}

// AutoDisablerConfig is what the autoDisabler needs.
type AutoDisablerConfig struct {
	// Store is the database (required).
	Store autoDisablerStore
	// After is how long every attempt must have failed (required).
	After time.Duration
	// Notifier hears of each subscription disabled; may be nil.
	Notifier DisableNotifier
	// Runtime is the clock and the logger.
	Runtime
}

func (c AutoDisablerConfig) validate() error {
	switch {
	case c.Store == nil:
		return errors.New("auto-disabler: Store is required")
	case c.After <= 0:
		return errors.New("auto-disabler: After must be positive")
	}
	return nil
}

// AutoDisabler disables the subscriptions whose every attempt has failed
// for cfg.After: their receivers are gone, and retrying them for ever
// wastes the workers' time. Their later events are kept as skipped
// deliveries, which recover replays once the merchant enables the
// subscription again. It runs as TaskAutoDisable.
type AutoDisabler struct {
	cfg    AutoDisablerConfig
	clock  clock.Clock
	logger *slog.Logger
}

// NewAutoDisabler checks cfg and builds the AutoDisabler.
func NewAutoDisabler(cfg AutoDisablerConfig) (*AutoDisabler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &AutoDisabler{cfg: cfg, clock: cfg.clock(), logger: cfg.logger()}, nil
}

// HandleAutoDisable runs disable as a periodic task.
func (a *AutoDisabler) HandleAutoDisable(ctx context.Context, _ *asynq.Task) error {
	if _, err := a.disable(ctx); err != nil {
		a.logger.ErrorContext(ctx, "auto-disable", "error", err)
	}
	return nil // the next period tries again; never archive the job
}

// disable does one round: it disables what has failed for cfg.After, in
// batches, e-mails each merchant, and returns the subscriptions disabled.
// Each subscription is disabled by one UPDATE that only one instance's
// round can win, so each e-mail goes out once.
func (a *AutoDisabler) disable(ctx context.Context) ([]store.AutoDisabled, error) {
	var all []store.AutoDisabled
	for {
		disabled, err := a.cfg.Store.DisableFailingSubscriptions(ctx, a.clock.Now().Add(-a.cfg.After), autoDisableBatch)
		if err != nil {
			return all, fmt.Errorf("auto-disable: %w", err)
		}
		for _, d := range disabled {
			a.logger.WarnContext(ctx, "subscription disabled: every attempt failed", "subscription_id", d.SubscriptionID,
				"merchant_id", d.MerchantID, "failing_since", d.FailingSince, "after", a.cfg.After.String())
			if n := a.cfg.Notifier; n != nil {
				n.SubscriptionDisabled(ctx, d, a.cfg.After)
			}
		}
		all = append(all, disabled...)
		if len(disabled) < autoDisableBatch {
			return all, nil
		}
	}
}
