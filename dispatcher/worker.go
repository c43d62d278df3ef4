package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/dispatcher/deliver"
	"github.com/webhookd/webhookd/dispatcher/internal/metrics"
	"github.com/webhookd/webhookd/dispatcher/maintain"
	"github.com/webhookd/webhookd/dispatcher/notify"
	"github.com/webhookd/webhookd/dispatcher/publish"
	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/producer"
)

// worker is the worker role: the services that serve the task types, the
// one ServeMux they are registered on, and the asynq server and scheduler
// that feed it. Only Run builds one, so an API process holds no HTTP client
// to receivers and no group commits.
type worker struct {
	cfg        Config
	tasks      *queue.Enqueuer
	publisher  *publish.Publisher
	attempts   *deliver.Worker
	sweeper    *maintain.Sweeper
	maintainer *maintain.Maintainer
	disabler   *maintain.AutoDisabler
	replayer   *maintain.Replayer
	// certExpiry warns of expiring mtls certificates, by e-mail and event.
	certExpiry *maintain.CertExpiry
	// closers release what newWorker started, in order.
	closers []func()
	metrics *metrics.Set
	logger  *slog.Logger
}

// newWorker builds the services of the worker role on d's configuration.
func newWorker(d *Dispatcher) (w *worker, err error) {
	cfg := d.cfg
	w = &worker{cfg: cfg, tasks: d.tasks, publisher: d.Publisher, metrics: d.metrics, logger: cfg.Logger}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	var transformer deliver.Transformer
	if cfg.Sandbox != nil {
		transformer = deliver.NewTransformations(cfg.Sandbox, cfg.Store.Subscriptions)
	}
	// The merchant hears of failures by e-mail (cfg.Notifier) and by
	// operational events (d.Emitter), from the same hooks.
	notifier := notify.Chain{d.Emitter, cfg.Notifier}
	w.attempts, err = deliver.NewWorker(deliver.WorkerConfig{Deliveries: cfg.Store.Deliveries, ManualAttempts: cfg.Store.ManualAttempts,
		Subscriptions: cfg.Store.Subscriptions, Listeners: cfg.Store.Listeners, Sealer: cfg.Sealer, Tasks: d.tasks, Redis: cfg.Redis,
		Schedule: cfg.Schedule, Jitter: cfg.Jitter, RetryCap: cfg.TaskRetryCap, DeliveryTimeout: cfg.DeliveryTimeout,
		Sender: cfg.senderConfig(), Dialer: cfg.Dialer, Scheduler: cfg.schedulerConfig(), Recorder: cfg.Recorder,
		Notifier: notifier, Version: cfg.Version, Metrics: d.metrics, Clock: cfg.Clock, Logger: cfg.Logger,
		TracerProvider: cfg.TracerProvider, Transformer: transformer})
	if err != nil {
		return nil, err
	}
	w.closers = append(w.closers, w.attempts.Close)
	rt := maintain.Runtime{Clock: cfg.Clock, Logger: cfg.Logger}
	inspector := asynq.NewInspector(cfg.Redis)
	w.closers = append(w.closers, func() { _ = inspector.Close() })
	if w.sweeper, err = maintain.NewSweeper(maintain.SweeperConfig{Deliveries: cfg.Store.Deliveries,
		ManualAttempts: cfg.Store.ManualAttempts, Listeners: cfg.Store.Listeners, Grace: cfg.SweepGrace, Tasks: d.tasks,
		Inspector: inspector, Metrics: d.metrics, Runtime: rt}); err != nil {
		return nil, err
	}
	if w.maintainer, err = maintain.NewMaintainer(maintain.MaintainerConfig{Store: cfg.Store.Maintenance, PartitionsAhead: store.PartitionsAhead,
		Runtime: rt}); err != nil {
		return nil, err
	}
	if w.disabler, err = maintain.NewAutoDisabler(maintain.AutoDisablerConfig{Store: cfg.Store.EndpointHealth, After: cfg.AutoDisableAfter,
		Notifier: notifier, Runtime: rt}); err != nil {
		return nil, err
	}
	if w.replayer, err = maintain.NewReplayer(maintain.ReplayerConfig{Store: cfg.Store.Replays, Tasks: d.tasks,
		InFlight: cfg.ReplayInFlight, Runtime: rt}); err != nil {
		return nil, err
	}
	if w.certExpiry, err = maintain.NewCertExpiry(maintain.CertExpiryConfig{Store: cfg.Store.EndpointHealth, Notifier: notifier,
		Runtime: rt}); err != nil {
		return nil, err
	}
	return w, nil
}

// close releases what newWorker started.
func (w *worker) close() {
	for _, c := range w.closers {
		c()
	}
}

// mux is the one ServeMux: every task type the workers serve, registered
// in one place, each behind the same middleware.
func (w *worker) mux() *asynq.ServeMux {
	mux := asynq.NewServeMux()
	mux.Use(w.policy)
	mux.HandleFunc(producer.TaskIngest, w.publisher.HandleIngest)
	// Attempts run from the schedule (deliver.Scheduler), not from asynq; an
	// older build's attempt tasks are moved into it.
	mux.HandleFunc(queue.TaskAttempt, w.attempts.Runner.HandleLegacyAttempt)
	mux.HandleFunc(queue.TaskFirstAttempts, w.attempts.Runner.HandleLegacyFirstAttempts)
	mux.HandleFunc(queue.TaskSweep, w.sweeper.HandleSweep)
	mux.HandleFunc(queue.TaskMaintenance, w.maintainer.HandleMaintenance)
	mux.HandleFunc(queue.TaskAutoDisable, w.disabler.HandleAutoDisable)
	mux.HandleFunc(queue.TaskReplay, w.replayer.HandleReplay)
	if w.certExpiry != nil {
		mux.HandleFunc(queue.TaskCertExpiry, w.certExpiry.HandleCertExpiry)
	}
	return mux
}

// policy is the middleware every handler shares: the one give-up rule,
// the task metrics and the log line of a failing task, with its ids.
//
// The give-up rule: a task whose handler failed for an internal reason
// (Postgres unreachable) is retried by asynq with backoff; on its last
// retry it is enqueued afresh (same type and payload, a new id, after the
// longest backoff) instead of being archived. An archived task would hold
// its id, and an id held by a task that will not run swallows the re-enqueue
// that should replace it: the sweeper's for an attempt, the producer's
// re-publish for an event.
func (w *worker) policy(next asynq.Handler) asynq.Handler {
	return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		err := next.ProcessTask(ctx, t)
		var nd deliver.NotDue
		switch {
		case err == nil:
			w.metrics.Tasks.WithLabelValues(t.Type(), metrics.ResultDone).Inc()
			return nil
		case errors.As(err, &nd):
			w.metrics.Tasks.WithLabelValues(t.Type(), metrics.ResultDeferred).Inc()
			w.metrics.Deferred.WithLabelValues(string(nd.Why)).Inc()
			return err
		case errors.Is(err, asynq.RevokeTask), errors.Is(err, asynq.SkipRetry):
			w.metrics.Tasks.WithLabelValues(t.Type(), metrics.ResultRefused).Inc()
			return err
		}
		id, _ := asynq.GetTaskID(ctx)
		retried, _ := asynq.GetRetryCount(ctx)
		maxRetry, _ := asynq.GetMaxRetry(ctx)
		log := w.logger.With("task", t.Type(), "task_id", id, "retry", retried, "max_retry", maxRetry)
		if retried < maxRetry {
			w.metrics.Tasks.WithLabelValues(t.Type(), metrics.ResultRetried).Inc()
			log.WarnContext(ctx, "task failed; asynq retries it", "error", err)
			return err
		}
		queueName, _ := asynq.GetQueueName(ctx)
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), queue.EnqueueTimeout)
		fresh, rerr := w.tasks.Again(ectx, t, queueName, id, maxRetry, w.cfg.TaskRetryCap)
		cancel()
		if rerr != nil {
			w.metrics.Tasks.WithLabelValues(t.Type(), metrics.ResultRetried).Inc()
			log.ErrorContext(ctx, "task used up its retries and cannot be enqueued afresh; asynq archives it and the sweeper runs it again",
				"error", err, "enqueue_error", rerr)
			return err
		}
		w.metrics.Tasks.WithLabelValues(t.Type(), metrics.ResultRenewed).Inc()
		log.WarnContext(ctx, "task used up its retries; enqueued afresh", "error", err, "fresh_task_id", fresh)
		return nil
	})
}

// retryDelay is asynq's backoff for handler errors: a deferred task comes
// back when it is due; internal errors back off exponentially from a
// second up to TaskRetryCap.
func (w *worker) retryDelay(n int, err error, _ *asynq.Task) time.Duration {
	var nd deliver.NotDue
	if errors.As(err, &nd) {
		return nd.After
	}
	return min(time.Second<<min(n, 6), w.cfg.TaskRetryCap)
}

// isFailure tells asynq which errors count against a task's retries: a
// deferred task did not fail.
func isFailure(err error) bool {
	var nd deliver.NotDue
	return !errors.As(err, &nd)
}

// Run works the queues (asynq Server) and enqueues the periodic jobs
// (asynq Scheduler) until ctx is done, then drains: attempts in flight get
// to finish and be recorded.
func (d *Dispatcher) Run(ctx context.Context) error {
	w, err := newWorker(d)
	if err != nil {
		return err
	}
	defer w.close()
	return w.run(ctx)
}

// SweepOnce runs one sweep of d's sweeper, as Run's periodic task does,
// and returns how many attempts it parked again. It is a hook for tests
// (the sweeper's in dispatcher/maintain, poll's): they count what one
// sweep does without waiting for the period, and without a running worker
// that would take the attempts they arranged. It builds the worker role's
// services for that sweep and releases them after; production sweeps are
// Run's.
func SweepOnce(ctx context.Context, d *Dispatcher) (int, error) {
	w, err := newWorker(d)
	if err != nil {
		return 0, err
	}
	defer w.close()
	return w.sweeper.Sweep(ctx)
}

// ingestRetryCheck is how often the ingest server moves its retried tasks
// back into the queue: half the shortest wait before a retry (a second,
// or TaskRetryCap when shorter; retryDelay), between 20 ms and 500 ms.
// The only delayed tasks of the ingest queue are its retries, after a
// failure to write (Postgres unreachable): a retry comes at most half its
// wait late. Each check is one Redis script per delayed set, in every
// idle process: at 100 ms, a sixth of an idle process's scripts and of
// its CPU (BENCHMARKS.md).
func (w *worker) ingestRetryCheck() time.Duration {
	shortest := min(time.Second, w.cfg.TaskRetryCap)
	return min(max(shortest/2, 20*time.Millisecond), ingestRetryCheckCeiling)
}

// ingestRetryCheckCeiling bounds ingestRetryCheck.
const ingestRetryCheckCeiling = 500 * time.Millisecond

// run is Run on a built worker.
func (w *worker) run(ctx context.Context) error {
	cfg := w.cfg
	logger := asynqLogger{w.logger}
	// The core API's ingest tasks have a server of their own, polled
	// often: an event waits at most a poll for its publish. The periodic
	// jobs and an older build's attempt tasks share one polled a few times
	// per shortest job interval: an idle poll is one Redis script per
	// queue, and at 20 ms for every queue the polls were most of an idle
	// process's CPU and Redis's (BENCHMARKS.md, November 27, sixth session).
	srv := asynq.NewServer(cfg.Redis, w.serverConfig(logger, map[string]int{producer.Queue: 1}, cfg.Concurrency,
		20*time.Millisecond, w.ingestRetryCheck()))
	housekeepingCheck := w.housekeepingCheck()
	housekeeping := asynq.NewServer(cfg.Redis, w.serverConfig(logger,
		map[string]int{queue.QueueMaintenance: 1, queue.QueueDeliveries: 1}, housekeepingConcurrency, housekeepingCheck, housekeepingCheck))
	sched := asynq.NewScheduler(cfg.Redis, &asynq.SchedulerOpts{Logger: logger, LogLevel: asynq.WarnLevel})
	if err := w.registerPeriodic(sched); err != nil {
		return err
	}
	if err := srv.Start(w.mux()); err != nil {
		return fmt.Errorf("start asynq server: %w", err)
	}
	if err := housekeeping.Start(w.mux()); err != nil {
		srv.Shutdown()
		return fmt.Errorf("start asynq housekeeping server: %w", err)
	}
	if err := sched.Start(); err != nil {
		housekeeping.Shutdown()
		srv.Shutdown()
		return fmt.Errorf("start asynq scheduler: %w", err)
	}
	w.logger.Info("dispatcher started", "concurrency", cfg.Concurrency, "merchant_concurrency", cfg.merchantConcurrency(),
		"subscription_concurrency", cfg.SubscriptionConcurrency, "delivery_timeout", cfg.DeliveryTimeout.String(),
		"retry_schedule", cfg.Schedule.String(), "housekeeping_poll", housekeepingCheck.String())

	// Attempts parked under another layout of the schedule (a build
	// before its shards, another shard count) move into this one's shards
	// before the sweep, which would otherwise take them for lost.
	if moved, err := w.tasks.Lanes.Migrate(ctx); err != nil && ctx.Err() == nil {
		w.logger.Error("move the schedule's attempts into its shards; the sweeper parks what is left", "moved", moved, "error", err)
	} else if moved > 0 {
		w.logger.Info("moved the schedule's attempts into its shards", "moved", moved, "shards", w.tasks.Lanes.Shards())
	}
	// The periodic jobs first run after one interval; run both now so that
	// a restart picks up what a crash or a Redis flush left behind.
	if _, err := w.sweeper.Sweep(ctx); err != nil && ctx.Err() == nil {
		w.logger.Error("initial sweep", "error", err)
	}
	if err := w.maintainer.Maintain(ctx); err != nil && ctx.Err() == nil {
		w.logger.Error("initial maintenance", "error", err)
	}

	attempts := make(chan struct{})
	go func() {
		defer close(attempts)
		w.attempts.Scheduler.Run(ctx)
	}()
	// This process's publishes (an ingest task here, an API request when
	// the process has both roles) start their first attempts in its pool
	// where it has room for them, without the trip through Redis.
	stopLocal := w.publisher.StartLocally(w.attempts.Scheduler, w.cfg.leaseFor())
	<-ctx.Done()
	stopLocal()
	<-attempts // every attempt in flight ended and recorded
	sched.Shutdown()
	housekeeping.Shutdown()
	srv.Shutdown()
	w.logger.Info("dispatcher stopped")
	return nil
}

// housekeepingConcurrency is how many periodic jobs and older builds'
// attempt tasks one process runs at once: each job kind runs one at a
// time (periodicOptions), and an attempt task only moves into the
// schedule.
const housekeepingConcurrency = 8

// housekeepingCheck is how often the housekeeping server polls its queues
// when idle: a quarter of the shortest periodic interval, so that a job
// starts within about that of its time, between 20 ms and 1 s.
func (w *worker) housekeepingCheck() time.Duration {
	shortest := min(w.cfg.SweepInterval, w.cfg.MaintenanceInterval, w.cfg.AutoDisableInterval, w.cfg.ReplayInterval)
	return min(max(shortest/4, 20*time.Millisecond), time.Second)
}

// serverConfig is the configuration of an asynq server of the worker
// polling queues (by weight) every check when idle, moving their
// scheduled and retried tasks in every delayed, running concurrency tasks
// at once.
func (w *worker) serverConfig(logger asynqLogger, queues map[string]int, concurrency int, check, delayed time.Duration) asynq.Config {
	return asynq.Config{
		Concurrency: concurrency,
		Queues:      queues,
		// Longer than an attempt's lease, so that a shutdown lets what a
		// task started (the first attempts a publish started) finish.
		ShutdownTimeout:          w.cfg.leaseFor() + time.Second,
		TaskCheckInterval:        check,
		DelayedTaskCheckInterval: delayed,
		RetryDelayFunc:           w.retryDelay,
		IsFailure:                isFailure,
		Logger:                   logger,
		LogLevel:                 asynq.WarnLevel,
	}
}

// registerPeriodic enqueues the sweeper and maintenance jobs on their
// intervals. Every instance does so (the Scheduler has no leader):
// periodicOptions drops duplicates, and the jobs themselves are
// idempotent.
func (w *worker) registerPeriodic(sched *asynq.Scheduler) error {
	jobs := []struct {
		task  string
		every time.Duration
	}{
		{queue.TaskSweep, w.cfg.SweepInterval},
		{queue.TaskMaintenance, w.cfg.MaintenanceInterval},
		{queue.TaskAutoDisable, w.cfg.AutoDisableInterval},
		{queue.TaskReplay, w.cfg.ReplayInterval},
	}
	if w.certExpiry != nil {
		jobs = append(jobs, struct {
			task  string
			every time.Duration
		}{queue.TaskCertExpiry, maintain.CertExpiryInterval})
	}
	for _, j := range jobs {
		_, err := sched.Register("@every "+j.every.String(), asynq.NewTask(j.task, nil), periodicOptions(j.every)...)
		if err != nil {
			return fmt.Errorf("schedule %s: %w", j.task, err)
		}
	}
	return nil
}

// periodicOptions are the asynq options of a periodic job run every
// interval: one of a kind queued or running at a time, for at most an
// interval.
//
// Duplicates are dropped by asynq's unique lock, which lapses after the
// interval, and not by a fixed task id: a process killed while it ran a
// job leaves that task active under its id, then asynq's recoverer
// archives it (no retries) and keeps it for days, and a fixed id refuses
// every later enqueue of the job in the meantime, silently. A worker
// killed during a sweep stopped the sweeper of every instance that way,
// and with it the recovery of the attempt the crash cut off. asynq keeps
// a timeout and a uniqueness in whole seconds: a sub-second one would be
// stored as none.
func periodicOptions(interval time.Duration) []asynq.Option {
	every := max(interval, time.Second)
	return []asynq.Option{asynq.Queue(queue.QueueMaintenance), asynq.Unique(every), asynq.MaxRetry(0), asynq.Timeout(every)}
}

// asynqLogger routes asynq's logs into slog.
type asynqLogger struct{ l *slog.Logger }

func (a asynqLogger) Debug(args ...any) { a.l.Debug(fmt.Sprint(args...), "component", "asynq") }
func (a asynqLogger) Info(args ...any)  { a.l.Info(fmt.Sprint(args...), "component", "asynq") }
func (a asynqLogger) Warn(args ...any)  { a.l.Warn(fmt.Sprint(args...), "component", "asynq") }
func (a asynqLogger) Error(args ...any) { a.l.Error(fmt.Sprint(args...), "component", "asynq") }
func (a asynqLogger) Fatal(args ...any) {
	a.l.Error(fmt.Sprint(args...), "component", "asynq", "fatal", true)
}
