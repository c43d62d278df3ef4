package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/producer"
	"github.com/webhookd/webhookd/store"
)

// sweepPage is how many overdue deliveries one query reads.
const sweepPage = 500

// sweeperConfig is what the sweeper needs.
type sweeperConfig struct {
	// Store is the database (required).
	Store *store.Store
	// Grace is how overdue a delivery must be, and how long ago its lease
	// must have lapsed, before it is enqueued again (required).
	Grace time.Duration
	// LeaseFor is how long a worker holds a delivery for one attempt
	// (required): an attempt overdue by more than that and the grace is no
	// live worker's.
	LeaseFor time.Duration
}

func (c sweeperConfig) validate() error {
	switch {
	case c.Store == nil:
		return errors.New("sweeper: Store is required")
	case c.Grace <= 0 || c.LeaseFor <= 0:
		return errors.New("sweeper: Grace and LeaseFor must be positive")
	}
	return nil
}

// sweeper re-enqueues what Redis lost: the attempts of pending deliveries
// that are overdue without a live task (Redis flushed or restarted, a
// worker killed, an enqueue that failed after the commit), the manual
// attempts asked for and not made, and the ingest tasks asynq archived. It
// runs as TaskSweep on every instance; everything it does is idempotent.
type sweeper struct {
	cfg       sweeperConfig
	tasks     *enqueuer
	inspector *asynq.Inspector
	metrics   *metrics
	clock     Clock
	logger    *slog.Logger
}

// handleSweep runs the sweeper as a periodic task.
func (s *sweeper) handleSweep(ctx context.Context, _ *asynq.Task) error {
	if _, err := s.sweep(ctx); err != nil {
		s.logger.ErrorContext(ctx, "sweep", "error", err)
	}
	return nil // the next period tries again; never archive the job
}

// sweep re-enqueues every pending delivery whose attempt was due, and whose
// lease if any lapsed, more than the grace ago. Attempts whose task still
// exists are refused by asynq on their TaskID, so sweeping is idempotent
// and safe on every instance at once. It returns how many tasks it added.
func (s *sweeper) sweep(ctx context.Context) (int, error) {
	s.registerQueues(ctx)
	s.reviveIngest(ctx)
	now := s.clock.Now()
	s.endListeners(ctx, now)
	var after *store.DuePosition
	requeued := 0
	for {
		due, err := s.cfg.Store.DueDeliveries(ctx, now.Add(-s.cfg.Grace), now.Add(-s.cfg.Grace), after, sweepPage)
		if err != nil {
			return requeued, err
		}
		// First attempts go back as their event's first-attempts task, so
		// that one still queued (a backlog, not a loss) refuses them by its
		// id, as an attempt's own task does.
		first := map[uuid.UUID][]store.Delivery{}
		var added []store.Delivery
		for _, del := range due {
			if del.AttemptCount == 0 {
				first[del.EventID] = append(first[del.EventID], del)
				continue
			}
			ok, err := s.requeue(ctx, del, now)
			if err != nil {
				return requeued, fmt.Errorf("sweep delivery %s: %w", del.ID, err)
			}
			if ok {
				added = append(added, del)
			}
		}
		for eventID, dels := range first {
			lost, handedOver, err := s.splitByOwnTask(ctx, dels)
			if err != nil {
				return requeued, fmt.Errorf("sweep first attempts of event %s: %w", eventID, err)
			}
			for _, del := range handedOver {
				// Its own task waits its turn, unless a dead worker holds it.
				if !s.heldByDeadWorker(del, now) {
					continue
				}
				ok, err := s.requeue(ctx, del, now)
				if err != nil {
					return requeued, fmt.Errorf("sweep delivery %s: %w", del.ID, err)
				}
				if ok {
					added = append(added, del)
				}
			}
			if len(lost) == 0 {
				continue
			}
			ok, err := s.requeueFirstAttempts(ctx, eventID, lost, now)
			if err != nil {
				return requeued, fmt.Errorf("sweep first attempts of event %s: %w", eventID, err)
			}
			added = append(added, ok...)
		}
		requeued += s.requeued(ctx, added)
		if len(due) < sweepPage {
			n, err := s.sweepManual(ctx, now)
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
func (s *sweeper) sweepManual(ctx context.Context, now time.Time) (int, error) {
	reqs, err := s.cfg.Store.ManualRequestsDue(ctx, now.Add(-s.cfg.Grace), sweepPage)
	if err != nil {
		return 0, err
	}
	var added []store.Delivery
	for _, r := range reqs {
		ok, err := s.tasks.attempt(ctx, manualAttempt(r.MerchantID, r.Delivery), sweptManualTaskID(r))
		if err != nil {
			return s.requeued(ctx, added), fmt.Errorf("sweep manual attempt of delivery %s: %w", r.ID, err)
		}
		if ok {
			added = append(added, r.Delivery)
		}
	}
	return s.requeued(ctx, added), nil
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
func (s *sweeper) requeue(ctx context.Context, del store.Delivery, now time.Time) (bool, error) {
	number := del.AttemptCount + 1
	task := scheduledAttempt(del, number, time.Time{})
	base := attemptTaskID(del.ID, number)
	for gen := 1; gen <= maxTaskGenerations; gen++ {
		id := base
		if gen > 1 {
			id += "~" + strconv.Itoa(gen)
		}
		added, err := s.tasks.attempt(ctx, task, id)
		if err != nil || added {
			return added, err
		}
		switch s.unblock(ctx, id) {
		case asynq.TaskStateArchived:
			return s.tasks.attempt(ctx, task, id)
		case asynq.TaskStateActive:
			if !s.heldByDeadWorker(del, now) {
				return false, nil
			}
			continue
		default:
			return false, nil
		}
	}
	s.logger.WarnContext(ctx, "every task id of an overdue attempt is held by a dead worker; asynq's recovery will run it",
		"delivery_id", del.ID, "attempt", number)
	return false, nil
}

// heldByDeadWorker tells whether an active task of del's attempt can only
// belong to a dead worker: a live one leases the delivery as soon as it
// takes the task, and holds the lease (DeliveryTimeout+leaseMargin) while
// it works, so an attempt overdue by more than that and the grace is no
// live worker's. Younger, the task may be a live worker's that has not
// leased yet (an overloaded machine), which must not get a twin.
func (s *sweeper) heldByDeadWorker(del store.Delivery, now time.Time) bool {
	overdue := s.cfg.LeaseFor + s.cfg.Grace
	return del.NextAttemptAt != nil && del.NextAttemptAt.Before(now.Add(-overdue))
}

// requeueFirstAttempts is requeue for the first attempts of one event's
// deliveries: they go back as one first-attempts task, unless a dead
// worker holds that task's id; then each goes back on its own. It returns
// the deliveries whose attempt was enqueued.
func (s *sweeper) requeueFirstAttempts(ctx context.Context, eventID uuid.UUID, dels []store.Delivery, now time.Time) ([]store.Delivery, error) {
	if len(dels) > 1 {
		added, err := s.tasks.firstAttempts(ctx, eventID, dels, time.Time{})
		if err == nil && !added && s.unblock(ctx, firstAttemptsTaskID(eventID)) == asynq.TaskStateArchived {
			added, err = s.tasks.firstAttempts(ctx, eventID, dels, time.Time{})
		}
		if err != nil {
			return nil, err
		}
		if added {
			return dels, nil
		}
		if s.taskState(ctx, firstAttemptsTaskID(eventID)) != asynq.TaskStateActive || !s.heldByDeadWorker(dels[0], now) {
			return nil, nil
		}
	}
	var out []store.Delivery
	for _, del := range dels {
		added, err := s.requeue(ctx, del, now)
		if err != nil {
			return out, err
		}
		if added {
			out = append(out, del)
		}
	}
	return out, nil
}

// splitByOwnTask tells the first attempts that have a task of their own in
// Redis (handedOver) from the others (lost). A first-attempts task hands
// an attempt over its merchant's share to such a task and ends, and that
// task, waiting its turn, is a backlog, not a loss: re-enqueueing the whole
// event as a first-attempts task (its id is free once it ended) would make
// the attempts twice. One pipelined EXISTS for them all.
func (s *sweeper) splitByOwnTask(ctx context.Context, dels []store.Delivery) (lost, handedOver []store.Delivery, err error) {
	pipe := s.tasks.redis.Pipeline()
	exists := make([]*redis.IntCmd, len(dels))
	for i, del := range dels {
		exists[i] = pipe.Exists(ctx, asynqTaskKey(queueDeliveries, attemptTaskID(del.ID, 1)))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, nil, fmt.Errorf("look for the attempts' own tasks: %w", err)
	}
	for i, del := range dels {
		if exists[i].Val() == 0 {
			lost = append(lost, del)
		} else {
			handedOver = append(handedOver, del)
		}
	}
	return lost, handedOver, nil
}

// asynqTaskKey is the Redis hash asynq keeps a task in (asynq's
// base.TaskKey).
func asynqTaskKey(queue, taskID string) string { return "asynq:{" + queue + "}:t:" + taskID }

// unblock looks at the task holding taskID and deletes it if asynq
// archived it. It returns the task's state (0 when there is none or it
// cannot be read).
func (s *sweeper) unblock(ctx context.Context, taskID string) asynq.TaskState {
	state := s.taskState(ctx, taskID)
	if state != asynq.TaskStateArchived {
		return state
	}
	if err := s.inspector.DeleteTask(queueDeliveries, taskID); err != nil {
		s.logger.WarnContext(ctx, "delete archived task", "task_id", taskID, "error", err)
		return 0
	}
	s.logger.WarnContext(ctx, "sweeper deleted an archived task to enqueue its attempt again", "task_id", taskID)
	return asynq.TaskStateArchived
}

// taskState is the state of the task holding taskID, 0 when there is none
// or it cannot be read.
func (s *sweeper) taskState(_ context.Context, taskID string) asynq.TaskState {
	info, err := s.inspector.GetTaskInfo(queueDeliveries, taskID)
	if err != nil {
		return 0
	}
	return info.State
}

// requeued counts and logs the deliveries the sweeper enqueued again, and
// says how many they are.
func (s *sweeper) requeued(ctx context.Context, dels []store.Delivery) int {
	for _, del := range dels {
		s.metrics.sweeperRequeued.Inc()
		s.logger.InfoContext(ctx, "sweeper re-enqueued an overdue delivery", "event_id", del.EventID,
			"delivery_id", del.ID, "attempt", del.AttemptCount+1)
	}
	return len(dels)
}

// registerQueues lists the queues in asynq's registry again. asynq adds a
// queue there once per client lifetime, so after Redis lost its data the
// queues would stay out of the registry, and out of the queue metrics and
// their alerts, until a restart.
func (s *sweeper) registerQueues(ctx context.Context) {
	if err := s.tasks.redis.SAdd(ctx, asynqQueuesKey, queueDeliveries, producer.Queue, queueMaintenance).Err(); err != nil {
		s.logger.WarnContext(ctx, "register queues with asynq", "error", err)
	}
}

// asynqQueuesKey is asynq's set of known queues (asynq's base.AllQueues).
const asynqQueuesKey = "asynq:queues"

// reviveIngest runs again the ingest tasks asynq archived. The worker's
// give-up policy never lets a handler's failures archive a task, but asynq
// archives on its own a task whose workers kept dying; an ingest task is
// the only copy of its event, and its archived id would swallow the
// producer's re-publish.
func (s *sweeper) reviveIngest(ctx context.Context) {
	n, err := s.inspector.RunAllArchivedTasks(producer.Queue)
	if err != nil && !errors.Is(err, asynq.ErrQueueNotFound) {
		s.logger.WarnContext(ctx, "run archived ingest tasks again", "error", err)
		return
	}
	if n > 0 {
		s.logger.WarnContext(ctx, "sweeper ran archived ingest tasks again", "tasks", n)
	}
}

// endListeners ends the listeners whose connection is gone for longer than
// the grace, including those whose API process died with them, so that no
// delivery waits on them. A failure is only logged: the next sweep tries
// again.
func (s *sweeper) endListeners(ctx context.Context, now time.Time) {
	n, err := s.cfg.Store.EndExpiredListeners(ctx, now, errListenerClosed)
	if err != nil {
		s.logger.WarnContext(ctx, "end expired listeners", "error", err)
	}
	if n > 0 {
		s.logger.InfoContext(ctx, "expired listeners ended", "listeners", n)
	}
}
