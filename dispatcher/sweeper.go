package dispatcher

import (
	"context"
	"fmt"

	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/store"
)

// TaskSweep is the asynq task type of the periodic sweep.
const TaskSweep = "webhookd:sweep"

// sweepPage is how many overdue deliveries one query reads.
const sweepPage = 500

// handleSweep runs the sweeper as a periodic task.
func (d *Dispatcher) handleSweep(ctx context.Context, _ *asynq.Task) error {
	if _, err := d.sweep(ctx); err != nil {
		d.logger.ErrorContext(ctx, "sweep", "error", err)
	}
	return nil // the next period tries again; never archive the job
}

// sweep re-enqueues every pending delivery whose attempt was due more than
// the grace ago and that no live lease holds: its task was lost (Redis
// flushed or restarted, a worker killed, an enqueue that failed after the
// commit). Attempts whose task still exists are refused by asynq on their
// TaskID, so sweeping is idempotent and safe on every instance at once. It
// returns how many tasks it added.
func (d *Dispatcher) sweep(ctx context.Context) (int, error) {
	now := d.cfg.Now()
	var after *store.DuePosition
	requeued := 0
	for {
		due, err := d.store.DueDeliveries(ctx, now.Add(-d.cfg.SweepGrace), now, after, sweepPage)
		if err != nil {
			return requeued, err
		}
		for _, del := range due {
			added, err := d.enqueue(ctx, del, del.AttemptCount+1, store.TriggerScheduled, now)
			if err != nil {
				return requeued, fmt.Errorf("sweep delivery %s: %w", del.ID, err)
			}
			if added {
				requeued++
				d.metrics.sweeperRequeued.Inc()
				d.logger.InfoContext(ctx, "sweeper re-enqueued an overdue delivery", "event_id", del.EventID,
					"delivery_id", del.ID, "attempt", del.AttemptCount+1)
			}
		}
		if len(due) < sweepPage {
			return requeued, nil
		}
		last := due[len(due)-1]
		after = &store.DuePosition{NextAttemptAt: *last.NextAttemptAt, ID: last.ID}
	}
}
