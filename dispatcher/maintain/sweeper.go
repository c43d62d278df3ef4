package maintain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/dispatcher/internal/metrics"
	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/listener"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/producer"
)

// sweepPage is how many overdue deliveries one query reads.
const sweepPage = 500

// sweptDeliveries is what the sweeper reads of the database's deliveries.
type sweptDeliveries interface {
	// DueDeliveries reads a page of the deliveries due before dueBefore
	// and not leased at now, after a position.
	DueDeliveries(ctx context.Context, dueBefore, now time.Time, after *store.DuePosition, limit int) ([]store.Delivery, error)
	// StillDue keeps those of ds that are still due.
	StillDue(ctx context.Context, ds []store.Delivery, dueBefore, now time.Time) ([]store.Delivery, error)
}

// sweptManualAttempts is what the sweeper reads of the database's manual
// attempts.
type sweptManualAttempts interface {
	// ManualRequestsDue reads the manual attempts asked for before a time
	// and not yet made.
	ManualRequestsDue(ctx context.Context, before time.Time, limit int) ([]store.ManualRequest, error)
}

// sweptListeners is what the sweeper ends of the database's listeners.
type sweptListeners interface {
	// EndExpiredListeners ends the listeners past their expiry.
	EndExpiredListeners(ctx context.Context, now time.Time, reason string) (int, error)
}

// SweeperConfig is what the sweeper needs.
type SweeperConfig struct {
	// Deliveries, ManualAttempts and Listeners are the database's parts
	// it sweeps (required).
	Deliveries     sweptDeliveries
	ManualAttempts sweptManualAttempts
	Listeners      sweptListeners
	// Grace is how overdue a delivery must be, and how long ago its lease
	// must have lapsed, before it is enqueued again (required).
	Grace time.Duration
	// Tasks is the process's enqueuer (required).
	Tasks *queue.Enqueuer
	// Inspector reads asynq's queues (required).
	Inspector *asynq.Inspector
	// Metrics counts what the sweeper enqueues again (required).
	Metrics *metrics.Set
	// Runtime is the clock and the logger.
	Runtime
}

func (c SweeperConfig) validate() error {
	switch {
	case c.Deliveries == nil || c.ManualAttempts == nil || c.Listeners == nil:
		return errors.New("sweeper: Deliveries, ManualAttempts and Listeners are required")
	case c.Grace <= 0:
		return errors.New("sweeper: Grace must be positive")
	case c.Tasks == nil || c.Inspector == nil || c.Metrics == nil:
		return errors.New("sweeper: Tasks, Inspector and Metrics are required")
	}
	return nil
}

// Sweeper re-enqueues what Redis lost: the attempts of pending deliveries
// that are overdue without a live task (Redis flushed or restarted, a
// worker killed, an enqueue that failed after the commit), the manual
// attempts asked for and not made, and the ingest tasks asynq archived. It
// runs as TaskSweep on every instance; everything it does is idempotent.
type Sweeper struct {
	cfg       SweeperConfig
	tasks     *queue.Enqueuer
	inspector *asynq.Inspector
	metrics   *metrics.Set
	clock     clock.Clock
	logger    *slog.Logger
}

// NewSweeper checks cfg and builds the Sweeper.
func NewSweeper(cfg SweeperConfig) (*Sweeper, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Sweeper{cfg: cfg, tasks: cfg.Tasks, inspector: cfg.Inspector, metrics: cfg.Metrics, clock: cfg.clock(),
		logger: cfg.logger()}, nil
}

// HandleSweep runs the sweeper as a periodic task.
func (s *Sweeper) HandleSweep(ctx context.Context, _ *asynq.Task) error {
	if _, err := s.Sweep(ctx); err != nil {
		s.logger.ErrorContext(ctx, "sweep", "error", err)
	}
	return nil // the next period tries again; never archive the job
}

// Sweep re-enqueues every pending delivery whose attempt was due, and whose
// lease if any lapsed, more than the grace ago, and that no task would
// attempt. A task that waits its turn in a backlog, or runs in a live
// worker, is no loss (sweepPage); enqueueing is idempotent besides, asynq
// refusing a task id that exists, so sweeping is safe on every instance at
// once. It returns how many tasks it added.
func (s *Sweeper) Sweep(ctx context.Context) (int, error) {
	s.registerQueues(ctx)
	s.reviveIngest(ctx)
	now := s.clock.Now()
	s.endListeners(ctx, now)
	var after *store.DuePosition
	requeued := 0
	for {
		due, err := s.cfg.Deliveries.DueDeliveries(ctx, now.Add(-s.cfg.Grace), now.Add(-s.cfg.Grace), after, sweepPage)
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

// sweepPage parks again the attempts of one page of overdue deliveries
// that the schedule lost, and returns how many it parked. An overdue
// delivery is most often a backlog: its attempt waits in the schedule (a
// merchant over its share, a rate limit's turn) or runs in a live worker
// (which holds its lease, or took it within the grace and is about to).
// One pipelined read of the page tells a held attempt from a lost one (Redis flushed, a worker killed between taking
// the attempt and leasing its delivery, a push that failed after the
// commit); a lost one is read again in Postgres before it is parked, since
// an attempt made since the page was read is no loss.
func (s *Sweeper) sweepPage(ctx context.Context, due []store.Delivery, now time.Time) (int, error) {
	items := make([]queue.LaneItem, len(due))
	for i, del := range due {
		items[i] = queue.LaneItem{ID: queue.AttemptTaskID(del.ID, del.AttemptCount+1), Task: queue.ScheduledAttempt(del, del.AttemptCount+1, time.Time{})}
	}
	parked, err := s.tasks.Lanes.Held(ctx, items, now.Add(-s.cfg.Grace))
	if err != nil {
		return 0, err
	}
	var lost []store.Delivery
	for i, del := range due {
		if !parked[i] {
			lost = append(lost, del)
		}
	}
	if lost, err = s.cfg.Deliveries.StillDue(ctx, lost, now.Add(-s.cfg.Grace), now.Add(-s.cfg.Grace)); err != nil {
		return 0, err
	}
	var added []store.Delivery
	for _, del := range lost {
		ok, err := s.tasks.Schedule(ctx, queue.ScheduledAttempt(del, del.AttemptCount+1, time.Time{}), queue.AttemptTaskID(del.ID, del.AttemptCount+1))
		if err != nil {
			return s.requeued(ctx, added), fmt.Errorf("sweep delivery %s: %w", del.ID, err)
		}
		if ok {
			added = append(added, del)
		}
	}
	return s.requeued(ctx, added), nil
}

// sweepManual enqueues again the manual attempts (redeliver, recover)
// asked for more than the grace ago and not yet made: their tasks may have
// been lost with Redis. A task that still waits makes the attempt first;
// the other then finds no request left and does nothing.
func (s *Sweeper) sweepManual(ctx context.Context, now time.Time) (int, error) {
	reqs, err := s.cfg.ManualAttempts.ManualRequestsDue(ctx, now.Add(-s.cfg.Grace), sweepPage)
	if err != nil {
		return 0, err
	}
	var added []store.Delivery
	for _, r := range reqs {
		ok, err := s.tasks.Schedule(ctx, queue.ManualAttempt(r.MerchantID, r.Delivery), queue.SweptManualTaskID(r))
		if err != nil {
			return s.requeued(ctx, added), fmt.Errorf("sweep manual attempt of delivery %s: %w", r.ID, err)
		}
		if ok {
			added = append(added, r.Delivery)
		}
	}
	return s.requeued(ctx, added), nil
}

// requeued counts and logs the deliveries the sweeper enqueued again, and
// says how many they are.
func (s *Sweeper) requeued(ctx context.Context, dels []store.Delivery) int {
	for _, del := range dels {
		s.metrics.SweeperRequeued.Inc()
		s.logger.InfoContext(ctx, "sweeper re-enqueued an overdue delivery", "event_id", del.EventID,
			"delivery_id", del.ID, "attempt", del.AttemptCount+1)
	}
	return len(dels)
}

// registerQueues lists the queues in asynq's registry again. asynq adds a
// queue there once per client lifetime, so after Redis lost its data the
// queues would stay out of the registry, and out of the queue metrics and
// their alerts, until a restart.
func (s *Sweeper) registerQueues(ctx context.Context) {
	if err := s.tasks.Redis.SAdd(ctx, asynqQueuesKey, queue.QueueDeliveries, producer.Queue, queue.QueueMaintenance).Err(); err != nil {
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
func (s *Sweeper) reviveIngest(ctx context.Context) {
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
func (s *Sweeper) endListeners(ctx context.Context, now time.Time) {
	n, err := s.cfg.Listeners.EndExpiredListeners(ctx, now, listener.ClosedError)
	if err != nil {
		s.logger.WarnContext(ctx, "end expired listeners", "error", err)
	}
	if n > 0 {
		s.logger.InfoContext(ctx, "expired listeners ended", "listeners", n)
	}
}
