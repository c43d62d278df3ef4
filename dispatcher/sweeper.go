package dispatcher

import (
	"context"
	"fmt"
	"strconv"
	"time"

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

// sweep re-enqueues every pending delivery whose attempt was due, and whose
// lease if any lapsed, more than the grace ago: its task was lost (Redis
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
		due, err := d.store.DueDeliveries(ctx, now.Add(-d.cfg.SweepGrace), now.Add(-d.cfg.SweepGrace), after, sweepPage)
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
			added, err := d.requeue(ctx, del, now)
			if err != nil {
				return requeued, fmt.Errorf("sweep delivery %s: %w", del.ID, err)
			}
			if added {
				requeued += d.requeued(ctx, del)
			}
		}
		for eventID, dels := range first {
			added, err := d.requeueFirstAttempts(ctx, eventID, dels, now)
			if err != nil {
				return requeued, fmt.Errorf("sweep first attempts of event %s: %w", eventID, err)
			}
			for _, del := range added {
				requeued += d.requeued(ctx, del)
			}
		}
		if len(due) < sweepPage {
			n, err := d.sweepManual(ctx, now)
			return requeued + n, err
		}
		last := due[len(due)-1]
		after = &store.DuePosition{NextAttemptAt: *last.NextAttemptAt, ID: last.ID}
	}
}

// sweepManual enqueues again the manual attempts (redeliver, recover)
// asked for more than the grace ago and not yet made: their tasks may have
// been lost with Redis. A task that still waits makes the attempt first;
// the other then finds no request left and does nothing.
func (d *Dispatcher) sweepManual(ctx context.Context, now time.Time) (int, error) {
	reqs, err := d.store.ManualRequestsDue(ctx, now.Add(-d.cfg.SweepGrace), sweepPage)
	if err != nil {
		return 0, err
	}
	requeued := 0
	for _, r := range reqs {
		added, err := d.enqueueManual(ctx, r.MerchantID, r.Delivery, sweptManualTaskID(r))
		if err != nil {
			return requeued, fmt.Errorf("sweep manual attempt of delivery %s: %w", r.ID, err)
		}
		if added {
			requeued += d.requeued(ctx, r.Delivery)
		}
	}
	return requeued, nil
}

// maxTaskGenerations bounds the successors requeue gives one attempt's
// task id: each is used only when the one before is held by a dead worker.
const maxTaskGenerations = 8

// requeue enqueues the next attempt of an overdue delivery, due now, and
// reports whether a task was added. The delivery is overdue and no live
// lease holds it, so a task of the attempt's id can only be:
//   - waiting (a backlog, not a loss): it refuses the new one;
//   - archived (its workers kept dying until asynq gave up): it is deleted,
//     since it would otherwise keep the id taken for as long as asynq
//     retains it;
//   - active: once the attempt is overdue by more than a lease and the
//     grace (heldByDeadWorker), its worker died (asynq hands such a task
//     back only after its own 30 s lease and one-minute recoverer), so the
//     attempt goes out under the id's successor. The dead worker's task,
//     when asynq recovers it, finds the attempt taken and does nothing.
func (d *Dispatcher) requeue(ctx context.Context, del store.Delivery, now time.Time) (bool, error) {
	number := del.AttemptCount + 1
	task := attemptTask{DeliveryID: del.ID, CreatedAt: del.CreatedAt, SubscriptionID: del.SubscriptionID,
		Number: number, Trigger: store.TriggerScheduled}
	base := attemptTaskID(del.ID, number)
	for gen := 1; gen <= maxTaskGenerations; gen++ {
		id := base
		if gen > 1 {
			id += "~" + strconv.Itoa(gen)
		}
		added, err := d.enqueueTask(ctx, task, id, now)
		if err != nil || added {
			return added, err
		}
		switch d.unblock(ctx, id) {
		case asynq.TaskStateArchived:
			return d.enqueueTask(ctx, task, id, now)
		case asynq.TaskStateActive:
			if !d.heldByDeadWorker(del, now) {
				return false, nil
			}
			continue
		default:
			return false, nil
		}
	}
	d.logger.WarnContext(ctx, "every task id of an overdue attempt is held by a dead worker; asynq's recovery will run it",
		"delivery_id", del.ID, "attempt", number)
	return false, nil
}

// heldByDeadWorker tells whether an active task of del's attempt can only
// belong to a dead worker: a live one leases the delivery as soon as it
// takes the task, and holds the lease (DeliveryTimeout+leaseMargin) while
// it works, so an attempt overdue by more than that and the grace is no
// live worker's. Younger, the task may be a live worker's that has not
// leased yet (an overloaded machine), which must not get a twin.
func (d *Dispatcher) heldByDeadWorker(del store.Delivery, now time.Time) bool {
	overdue := d.cfg.DeliveryTimeout + d.leaseMargin() + d.cfg.SweepGrace
	return del.NextAttemptAt != nil && del.NextAttemptAt.Before(now.Add(-overdue))
}

// requeueFirstAttempts is requeue for the first attempts of one event's
// deliveries: they go back as one first-attempts task, unless a dead
// worker holds that task's id; then each goes back on its own. It returns
// the deliveries whose attempt was enqueued.
func (d *Dispatcher) requeueFirstAttempts(ctx context.Context, eventID uuid.UUID, dels []store.Delivery, now time.Time) ([]store.Delivery, error) {
	if len(dels) > 1 {
		added, err := d.enqueueFirstAttempts(ctx, eventID, dels, now)
		if err == nil && !added && d.unblock(ctx, firstAttemptsTaskID(eventID)) == asynq.TaskStateArchived {
			added, err = d.enqueueFirstAttempts(ctx, eventID, dels, now)
		}
		if err != nil {
			return nil, err
		}
		if added {
			return dels, nil
		}
		if d.taskState(ctx, firstAttemptsTaskID(eventID)) != asynq.TaskStateActive || !d.heldByDeadWorker(dels[0], now) {
			return nil, nil
		}
	}
	var out []store.Delivery
	for _, del := range dels {
		added, err := d.requeue(ctx, del, now)
		if err != nil {
			return out, err
		}
		if added {
			out = append(out, del)
		}
	}
	return out, nil
}

// unblock looks at the task holding taskID and deletes it if asynq
// archived it. It returns the task's state (0 when there is none or it
// cannot be read).
func (d *Dispatcher) unblock(ctx context.Context, taskID string) asynq.TaskState {
	state := d.taskState(ctx, taskID)
	if state != asynq.TaskStateArchived {
		return state
	}
	if err := d.inspector.DeleteTask(queueDeliveries, taskID); err != nil {
		d.logger.WarnContext(ctx, "delete archived task", "task_id", taskID, "error", err)
		return 0
	}
	d.logger.WarnContext(ctx, "sweeper deleted an archived task to enqueue its attempt again", "task_id", taskID)
	return asynq.TaskStateArchived
}

// taskState is the state of the task holding taskID, 0 when there is none
// or it cannot be read.
func (d *Dispatcher) taskState(_ context.Context, taskID string) asynq.TaskState {
	info, err := d.inspector.GetTaskInfo(queueDeliveries, taskID)
	if err != nil {
		return 0
	}
	return info.State
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
