package dispatcher

import (
	"context"
	"fmt"

	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/store"
)

// TaskMaintenance is the asynq task type of the periodic partition and
// retention job.
const TaskMaintenance = "webhookd:maintenance"

// handleMaintenance runs maintain as a periodic task.
func (d *Dispatcher) handleMaintenance(ctx context.Context, _ *asynq.Task) error {
	if err := d.maintain(ctx); err != nil {
		d.logger.ErrorContext(ctx, "maintenance", "error", err)
	}
	return nil // the next period tries again; never archive the job
}

// maintain creates the day partitions ahead, drops those past the 30-day
// retention and expires old idempotency keys. Every step is idempotent, and
// an advisory lock keeps two instances from doing it at the same time.
func (d *Dispatcher) maintain(ctx context.Context) error {
	ran, err := d.store.WithAdvisoryLock(ctx, store.LockMaintenance, func(ctx context.Context) error {
		now := d.cfg.Now()
		created, err := d.store.EnsurePartitions(ctx, now, store.PartitionsAhead)
		if err != nil {
			return err
		}
		dropped, err := d.store.DropExpiredPartitions(ctx, now)
		if err != nil {
			return err
		}
		expired, err := d.store.ExpireIdempotencyKeys(ctx, now)
		if err != nil {
			return err
		}
		if len(created)+len(dropped) > 0 || expired > 0 {
			d.logger.InfoContext(ctx, "maintenance", "partitions_created", created, "partitions_dropped", dropped,
				"idempotency_keys_expired", expired)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("maintenance: %w", err)
	}
	if !ran {
		d.logger.DebugContext(ctx, "maintenance running on another instance")
	}
	return nil
}
