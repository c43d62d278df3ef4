package dispatcher

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/producer"
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
	d.registerQueues(ctx)
	now := d.cfg.Now()
	var after *store.DuePosition
	requeued := 0
	for {
		due, err := d.store.DueDeliveries(ctx, now.Add(-d.cfg.SweepGrace), now, after, sweepPage)
		if err != nil {
			return requeued, err
		}
		// First attempts go back as their event's first-attempts task, so
		// that one still queued (a backlog, not a loss) refuses them by its
		// id, as an attempt's own task does.
		first := map[uuid.UUID][]store.Delivery{}
		for _, del := range due {
			if del.AttemptCount == 0 {
				first[del.EventID] = append(first[del.EventID], del)
				continue
			}
			added, err := d.enqueue(ctx, del, del.AttemptCount+1, store.TriggerScheduled, now)
			if err == nil && !added && d.clearArchived(ctx, attemptTaskID(del.ID, del.AttemptCount+1)) {
				added, err = d.enqueue(ctx, del, del.AttemptCount+1, store.TriggerScheduled, now)
			}
			if err != nil {
				return requeued, fmt.Errorf("sweep delivery %s: %w", del.ID, err)
			}
			if added {
				requeued += d.requeued(ctx, del)
			}
		}
		for eventID, dels := range first {
			added, err := d.enqueueFirstAttempts(ctx, eventID, dels, now)
			if err == nil && !added && d.clearArchived(ctx, firstAttemptsTaskIDOf(eventID, dels)) {
				added, err = d.enqueueFirstAttempts(ctx, eventID, dels, now)
			}
			if err != nil {
				return requeued, fmt.Errorf("sweep first attempts of event %s: %w", eventID, err)
			}
			if added {
				for _, del := range dels {
					requeued += d.requeued(ctx, del)
				}
			}
		}
		if len(due) < sweepPage {
			return requeued, nil
		}
		last := due[len(due)-1]
		after = &store.DuePosition{NextAttemptAt: *last.NextAttemptAt, ID: last.ID}
	}
}

// clearArchived deletes the task of that id if asynq archived it. An
// archived task keeps its id taken, and would refuse the sweeper's
// re-enqueue of an overdue delivery for as long as asynq retains it: that
// happens when a task's workers kept dying until asynq gave up on it.
func (d *Dispatcher) clearArchived(ctx context.Context, taskID string) bool {
	info, err := d.inspector.GetTaskInfo(queueDeliveries, taskID)
	if err != nil || info.State != asynq.TaskStateArchived {
		return false
	}
	if err := d.inspector.DeleteTask(queueDeliveries, taskID); err != nil {
		d.logger.WarnContext(ctx, "delete archived task", "task_id", taskID, "error", err)
		return false
	}
	d.logger.WarnContext(ctx, "sweeper deleted an archived task to enqueue its attempt again", "task_id", taskID)
	return true
}

// requeued counts and logs one delivery the sweeper enqueued again.
func (d *Dispatcher) requeued(ctx context.Context, del store.Delivery) int {
	d.metrics.sweeperRequeued.Inc()
	d.logger.InfoContext(ctx, "sweeper re-enqueued an overdue delivery", "event_id", del.EventID,
		"delivery_id", del.ID, "attempt", del.AttemptCount+1)
	return 1
}

// registerQueues lists the queues in asynq's registry again. asynq adds a
// queue there once per client lifetime, so after Redis lost its data the
// queues would stay out of the registry, and out of the queue metrics and
// their alerts, until a restart.
func (d *Dispatcher) registerQueues(ctx context.Context) {
	if err := d.redis.SAdd(ctx, asynqQueuesKey, queueDeliveries, producer.Queue, queueMaintenance).Err(); err != nil {
		d.logger.WarnContext(ctx, "register queues with asynq", "error", err)
	}
}

// asynqQueuesKey is asynq's set of known queues (asynq's base.AllQueues).
const asynqQueuesKey = "asynq:queues"
