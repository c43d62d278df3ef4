package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
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
}

func (c sweeperConfig) validate() error {
	switch {
	case c.Store == nil:
		return errors.New("sweeper: Store is required")
	case c.Grace <= 0:
		return errors.New("sweeper: Grace must be positive")
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
// lease if any lapsed, more than the grace ago, and that no task would
// attempt. A task that waits its turn in a backlog, or runs in a live
// worker, is no loss (sweepPage); enqueueing is idempotent besides, asynq
// refusing a task id that exists, so sweeping is safe on every instance at
// once. It returns how many tasks it added.
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
		n, err := s.sweepPage(ctx, due, now)
		requeued += n
		if err != nil {
			return requeued, err
		}
		if len(due) < sweepPage {
			n, err := s.sweepManual(ctx, now)
			return requeued + n, err
		}
		last := due[len(due)-1]
		after = &store.DuePosition{NextAttemptAt: *last.NextAttemptAt, ID: last.ID}
	}
}

// sweepPage re-enqueues the attempts of one page of overdue deliveries
// that no task would make, and returns how many it enqueued. An overdue
// delivery is most often a backlog: its attempt's task, or for a first
// attempt its event's first-attempts task, waits in Redis (pending,
// scheduled, deferred over its merchant's share) or runs in a live worker
// (waiting for a slot before it leases). One pipelined read of the page's
// task ids tells those apart (holds); what is left has its task archived,
// held by a dead worker, or gone, and is read again in Postgres before it
// is enqueued, since an attempt that ended since the page was read took its
// task with it.
func (s *sweeper) sweepPage(ctx context.Context, due []store.Delivery, now time.Time) (int, error) {
	holds, err := s.holds(ctx, pageTaskIDs(due))
	if err != nil {
		return 0, err
	}
	orphans := slices.DeleteFunc(slices.Clone(due), func(del store.Delivery) bool {
		return holds[attemptTaskID(del.ID, del.AttemptCount+1)] == liveTask ||
			(del.AttemptCount == 0 && (holds[firstAttemptsTaskID(del.EventID)] == liveTask || holds[groupTaskID(del.ID)] == liveTask))
	})
	if orphans, err = s.cfg.Store.StillDue(ctx, orphans, now.Add(-s.cfg.Grace), now.Add(-s.cfg.Grace)); err != nil {
		return 0, err
	}
	// First attempts go back as their event's first-attempts task.
	first := map[uuid.UUID][]store.Delivery{}
	var added []store.Delivery
	for _, del := range orphans {
		if del.AttemptCount == 0 {
			first[del.EventID] = append(first[del.EventID], del)
			continue
		}
		ok, err := s.requeue(ctx, del)
		if err != nil {
			return s.requeued(ctx, added), fmt.Errorf("sweep delivery %s: %w", del.ID, err)
		}
		if ok {
			added = append(added, del)
		}
	}
	for eventID, dels := range first {
		ok, err := s.requeueFirstAttempts(ctx, eventID, dels, holds)
		added = append(added, ok...)
		if err != nil {
			return s.requeued(ctx, added), fmt.Errorf("sweep first attempts of event %s: %w", eventID, err)
		}
	}
	return s.requeued(ctx, added), nil
}

// pageTaskIDs are the ids of the tasks that would make the next attempts of
// dels: each attempt's own, and for first attempts the first-attempts
// tasks of their event and of their commit group too.
func pageTaskIDs(dels []store.Delivery) []string {
	ids := make([]string, 0, len(dels)+1)
	seen := map[string]bool{}
	for _, del := range dels {
		ids = append(ids, attemptTaskID(del.ID, del.AttemptCount+1))
		if del.AttemptCount > 0 {
			continue
		}
		for _, id := range []string{firstAttemptsTaskID(del.EventID), groupTaskID(del.ID)} {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	return ids
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
// reports whether a task was added. A task of the attempt's id can only
// be:
//   - waiting, or run by a live worker (a backlog, not a loss): it refuses
//     the new one;
//   - archived (its workers kept dying until asynq gave up): it is deleted,
//     since it would otherwise keep the id taken for as long as asynq
//     retains it;
//   - active in a dead worker (its lease no longer renewed): asynq hands
//     such a task back only after its own 30 s lease and one-minute
//     recoverer, so the attempt goes out under the id's successor. The dead
//     worker's task, when asynq recovers it, finds the attempt taken and
//     does nothing.
func (s *sweeper) requeue(ctx context.Context, del store.Delivery) (bool, error) {
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
		hold, err := s.unblock(ctx, id)
		switch {
		case err != nil:
			return false, err
		case hold == archivedTask:
			return s.tasks.attempt(ctx, task, id)
		case hold == deadTask:
			continue
		default:
			return false, nil // waiting, or it ended meanwhile: the next sweep sees
		}
	}
	s.logger.WarnContext(ctx, "every task id of an overdue attempt is held by a dead worker; asynq's recovery will run it",
		"delivery_id", del.ID, "attempt", number)
	return false, nil
}

// requeueFirstAttempts is requeue for the first attempts of one event's
// deliveries, none of which a live task holds (holds, as sweepPage read
// them): they go back as one first-attempts task, except those whose own
// task is archived or a dead worker's, and all of them when a dead worker
// holds the event's first-attempts task: those go back each on its own. It
// returns the deliveries whose attempt was enqueued.
func (s *sweeper) requeueFirstAttempts(ctx context.Context, eventID uuid.UUID, dels []store.Delivery, holds map[string]taskHold) ([]store.Delivery, error) {
	eventTask := firstAttemptsTaskID(eventID)
	var together, alone []store.Delivery
	for _, del := range dels {
		if holds[attemptTaskID(del.ID, 1)] != noTask || holds[eventTask] == deadTask || holds[groupTaskID(del.ID)] == deadTask {
			alone = append(alone, del)
		} else {
			together = append(together, del)
		}
	}
	var out []store.Delivery
	if len(together) > 0 {
		if holds[eventTask] == archivedTask {
			if _, err := s.unblock(ctx, eventTask); err != nil {
				return nil, err
			}
		}
		// Refused only if a task took the id since holds was read: the
		// next sweep sees what it does.
		added, err := s.tasks.firstAttempts(ctx, eventID, together, time.Time{})
		if err != nil {
			return nil, err
		}
		if added {
			out = together
		}
	}
	for _, del := range alone {
		added, err := s.requeue(ctx, del)
		if err != nil {
			return out, err
		}
		if added {
			out = append(out, del)
		}
	}
	return out, nil
}

// taskHold is what the task holding an id on the deliveries queue does for
// the attempts it carries.
type taskHold int

const (
	// noTask: no task holds the id; its attempts are lost.
	noTask taskHold = iota
	// liveTask waits its turn (pending, scheduled, deferred in asynq's retry
	// set) or runs in a live worker: a backlog, not a loss.
	liveTask
	// archivedTask will not run (asynq archived it when its workers kept
	// dying) and keeps its id taken.
	archivedTask
	// deadTask is active in a worker that died: it keeps its id taken until
	// asynq recovers it.
	deadTask
)

// holds reads what holds each task id on the deliveries queue: one
// pipelined read of the tasks' states, and one more of the leases of those
// active. A page of the sweep costs these two round trips, whatever its
// size.
func (s *sweeper) holds(ctx context.Context, ids []string) (map[string]taskHold, error) {
	out := make(map[string]taskHold, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	pipe := s.tasks.redis.Pipeline()
	states := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		states[i] = pipe.HGet(ctx, asynqTaskKey(queueDeliveries, id), "state")
	}
	_, _ = pipe.Exec(ctx) // each command's error is read below
	var active []string
	for i, id := range ids {
		state, err := states[i].Result()
		switch {
		case errors.Is(err, redis.Nil), state == "completed":
			out[id] = noTask
		case err != nil:
			return nil, fmt.Errorf("read the states of %d tasks: %w", len(ids), err)
		case state == "archived":
			out[id] = archivedTask
		case state == "active":
			active = append(active, id)
		default: // pending, scheduled, retry, aggregating
			out[id] = liveTask
		}
	}
	if len(active) == 0 {
		return out, nil
	}
	dead, err := s.deadWorkers(ctx, active)
	if err != nil {
		return nil, err
	}
	for i, id := range active {
		out[id] = liveTask
		if dead[i] {
			out[id] = deadTask
		}
	}
	return out, nil
}

// asynqLeaseDuration is how far ahead asynq sets the lease of a task a
// worker takes, and asynqLeaseRenewal how often the worker's heartbeat
// renews it while the task runs (asynq's rdb.LeaseDuration and heartbeater
// interval).
const (
	asynqLeaseDuration = 30 * time.Second
	asynqLeaseRenewal  = 5 * time.Second
)

// deadLeaseAge is how long a task's asynq lease goes without renewal
// before its worker is taken for dead: one renewal missed, the second asynq
// rounds a lease down to, and a margin for a busy worker and for clocks.
// A live worker's task that waits for a slot before it leases its delivery
// (a backlog) keeps its lease renewed; a killed worker's is found after
// this, not after asynq's 30 s lease and one-minute recoverer.
const deadLeaseAge = asynqLeaseRenewal + 3*time.Second

// deadWorkers tells, for each active task id, whether its worker is dead:
// its asynq lease was last renewed more than deadLeaseAge ago, or it has
// none. The leases are asynq's wall-clock times, so they are read against
// Redis's clock (asynq's workers and Redis keep real time; the pipeline's
// Clock may be shifted).
func (s *sweeper) deadWorkers(ctx context.Context, ids []string) ([]bool, error) {
	pipe := s.tasks.redis.Pipeline()
	redisNow := pipe.Time(ctx)
	leases := make([]*redis.FloatCmd, len(ids))
	for i, id := range ids {
		leases[i] = pipe.ZScore(ctx, asynqLeaseKey(queueDeliveries), id)
	}
	_, _ = pipe.Exec(ctx) // each command's error is read below
	now, err := redisNow.Result()
	if err != nil {
		return nil, fmt.Errorf("read Redis's time: %w", err)
	}
	renewedBy := now.Add(asynqLeaseDuration - deadLeaseAge).Unix()
	dead := make([]bool, len(ids))
	for i := range ids {
		expires, err := leases[i].Result()
		switch {
		case errors.Is(err, redis.Nil):
			dead[i] = true
		case err != nil:
			return nil, fmt.Errorf("read the leases of %d active tasks: %w", len(ids), err)
		default:
			dead[i] = int64(expires) < renewedBy
		}
	}
	return dead, nil
}

// asynqTaskKey is the Redis hash asynq keeps a task in (asynq's
// base.TaskKey).
func asynqTaskKey(queue, taskID string) string { return "asynq:{" + queue + "}:t:" + taskID }

// asynqLeaseKey is the sorted set of the leases of a queue's active tasks,
// each scored by its expiry in Unix seconds (asynq's base.LeaseKey).
func asynqLeaseKey(queue string) string { return "asynq:{" + queue + "}:lease" }

// unblock reads what holds taskID and deletes the task if asynq archived
// it (archivedTask then means the id is free).
func (s *sweeper) unblock(ctx context.Context, taskID string) (taskHold, error) {
	holds, err := s.holds(ctx, []string{taskID})
	if err != nil || holds[taskID] != archivedTask {
		return holds[taskID], err
	}
	if err := s.inspector.DeleteTask(queueDeliveries, taskID); err != nil {
		s.logger.WarnContext(ctx, "delete archived task", "task_id", taskID, "error", err)
		return noTask, nil
	}
	s.logger.WarnContext(ctx, "sweeper deleted an archived task to enqueue its attempt again", "task_id", taskID)
	return archivedTask, nil
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
