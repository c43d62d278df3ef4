package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/producer"
)

// Task results, the values of webhookd_tasks_total's result label.
const (
	taskDone     = "done"
	taskDeferred = "deferred"
	taskRetried  = "retried"
	taskRefused  = "refused"
	taskRenewed  = "renewed"
)

// worker is the worker role: the services that serve the task types, the
// one ServeMux they are registered on, and the asynq server and scheduler
// that feed it. Only Run builds one, so an API process holds no HTTP client
// to receivers and no group commits.
type worker struct {
	cfg        Config
	tasks      *Enqueuer
	publisher  *Publisher
	runner     *Runner
	scheduler  *Scheduler
	sweeper    *Sweeper
	maintainer *Maintainer
	disabler   *AutoDisabler
	// closers release what newWorker started, in order.
	closers []func()
	metrics *metrics
	logger  *slog.Logger
}

// newWorker builds the services of the worker role on d's configuration.
func newWorker(d *Dispatcher) (*worker, error) {
	cfg := d.cfg
	w := &worker{cfg: cfg, tasks: d.tasks, publisher: d.publisher, metrics: d.metrics, logger: cfg.Logger}
	snd, err := NewSender(cfg.senderConfig(), cfg.Clock, d.dialer)
	if err != nil {
		return nil, err
	}
	w.closers = append(w.closers, snd.Close)
	recorder := cfg.Recorder
	if recorder == nil {
		batch := NewBatchRecorder(cfg.Store)
		w.closers = append(w.closers, batch.Close)
		recorder = batch
	}
	leases := newLeaser(cfg.Store, cfg.Clock, cfg.leaseFor())
	w.closers = append(w.closers, leases.close)
	runnerCfg := RunnerConfig{Store: cfg.Store, Schedule: cfg.Schedule, Jitter: cfg.Jitter,
		LeaseFor: cfg.leaseFor(), DeliveryTimeout: cfg.DeliveryTimeout, Notifier: cfg.Notifier, RetryCap: cfg.TaskRetryCap}
	if err := runnerCfg.validate(); err != nil {
		return nil, err
	}
	relayRedis, ok := cfg.Redis.MakeRedisClient().(redis.UniversalClient)
	if !ok {
		return nil, errors.New("dispatcher: Redis options make no go-redis client")
	}
	w.closers = append(w.closers, func() { _ = relayRedis.Close() })
	rel, err := newRelay(relayConfig{Redis: relayRedis, Store: cfg.Store, Timeout: cfg.DeliveryTimeout, Version: cfg.Version}, cfg.Clock)
	if err != nil {
		return nil, err
	}
	w.runner = &Runner{cfg: runnerCfg, leaser: leases, recorder: recorder, sender: snd, relay: rel,
		secrets: NewSecretCache(cfg.Store, cfg.Sealer), tasks: d.tasks, metrics: d.metrics, clock: cfg.Clock, logger: cfg.Logger}
	w.scheduler, err = NewScheduler(cfg.schedulerConfig(), d.tasks.Lanes, d.tasks.Redis, w.runner.runTaken, d.metrics, cfg.Clock, cfg.Logger)
	if err != nil {
		return nil, err
	}

	sweepCfg := SweeperConfig{Store: cfg.Store, Grace: cfg.SweepGrace}
	if err := sweepCfg.validate(); err != nil {
		return nil, err
	}
	inspector := asynq.NewInspector(cfg.Redis)
	w.closers = append(w.closers, func() { _ = inspector.Close() })
	w.sweeper = &Sweeper{cfg: sweepCfg, tasks: d.tasks, inspector: inspector, metrics: d.metrics, clock: cfg.Clock, logger: cfg.Logger}

	maintCfg := MaintainerConfig{Store: cfg.Store, PartitionsAhead: store.PartitionsAhead}
	if err := maintCfg.validate(); err != nil {
		return nil, err
	}
	w.maintainer = &Maintainer{cfg: maintCfg, clock: cfg.Clock, logger: cfg.Logger}

	disableCfg := AutoDisablerConfig{Store: cfg.Store, After: cfg.AutoDisableAfter, Notifier: cfg.Notifier}
	if err := disableCfg.validate(); err != nil {
		return nil, err
	}
	w.disabler = &AutoDisabler{cfg: disableCfg, clock: cfg.Clock, logger: cfg.Logger}
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
	// Attempts run from the schedule (scheduler.go), not from asynq; an
	// older build's attempt tasks are moved into it.
	mux.HandleFunc(TaskAttempt, w.runner.HandleLegacyAttempt)
	mux.HandleFunc(TaskFirstAttempts, w.runner.HandleLegacyFirstAttempts)
	mux.HandleFunc(TaskSweep, w.sweeper.HandleSweep)
	mux.HandleFunc(TaskMaintenance, w.maintainer.HandleMaintenance)
	mux.HandleFunc(TaskAutoDisable, w.disabler.HandleAutoDisable)
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
		var nd NotDue
		switch {
		case err == nil:
			w.metrics.tasks.WithLabelValues(t.Type(), taskDone).Inc()
			return nil
		case errors.As(err, &nd):
			w.metrics.tasks.WithLabelValues(t.Type(), taskDeferred).Inc()
			w.metrics.deferred.WithLabelValues(string(nd.why)).Inc()
			return err
		case errors.Is(err, asynq.RevokeTask), errors.Is(err, asynq.SkipRetry):
			w.metrics.tasks.WithLabelValues(t.Type(), taskRefused).Inc()
			return err
		}
		id, _ := asynq.GetTaskID(ctx)
		retried, _ := asynq.GetRetryCount(ctx)
		maxRetry, _ := asynq.GetMaxRetry(ctx)
		log := w.logger.With("task", t.Type(), "task_id", id, "retry", retried, "max_retry", maxRetry)
		if retried < maxRetry {
			w.metrics.tasks.WithLabelValues(t.Type(), taskRetried).Inc()
			log.WarnContext(ctx, "task failed; asynq retries it", "error", err)
			return err
		}
		queue, _ := asynq.GetQueueName(ctx)
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), EnqueueTimeout)
		fresh, rerr := w.tasks.Again(ectx, t, queue, id, maxRetry, w.cfg.TaskRetryCap)
		cancel()
		if rerr != nil {
			w.metrics.tasks.WithLabelValues(t.Type(), taskRetried).Inc()
			log.ErrorContext(ctx, "task used up its retries and cannot be enqueued afresh; asynq archives it and the sweeper runs it again",
				"error", err, "enqueue_error", rerr)
			return err
		}
		w.metrics.tasks.WithLabelValues(t.Type(), taskRenewed).Inc()
		log.WarnContext(ctx, "task used up its retries; enqueued afresh", "error", err, "fresh_task_id", fresh)
		return nil
	})
}

// retryDelay is asynq's backoff for handler errors: a deferred task comes
// back when it is due; internal errors back off exponentially from a
// second up to TaskRetryCap.
func (w *worker) retryDelay(n int, err error, _ *asynq.Task) time.Duration {
	var nd NotDue
	if errors.As(err, &nd) {
		return nd.after
	}
	return min(time.Second<<min(n, 6), w.cfg.TaskRetryCap)
}

// isFailure tells asynq which errors count against a task's retries: a
// deferred task did not fail.
func isFailure(err error) bool {
	var nd NotDue
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

// delayedTaskCheck is the longest that a scheduled or deferred task waits
// past its time to move to its queue: one Redis script per queue per
// interval per process.
const delayedTaskCheck = 100 * time.Millisecond

// run is Run on a built worker.
func (w *worker) run(ctx context.Context) error {
	cfg := w.cfg
	minDelay := cfg.Schedule.Delays[0]
	for _, dl := range cfg.Schedule.Delays {
		minDelay = min(minDelay, dl)
	}
	logger := asynqLogger{w.logger}
	srv := asynq.NewServer(cfg.Redis, asynq.Config{
		Concurrency: cfg.Concurrency,
		Queues: map[string]int{
			QueueDeliveries:  6,
			producer.Queue:   3,
			QueueMaintenance: 1,
		},
		// Longer than an attempt's lease, so that a shutdown lets every
		// attempt in flight finish and be recorded.
		ShutdownTimeout: cfg.leaseFor() + time.Second,
		// Idle polling: webhooks should leave promptly. One poll per
		// interval per process is cheap for Redis.
		TaskCheckInterval: 20 * time.Millisecond,
		// Scheduled attempts and deferred tasks move to their queue this
		// often; short schedules (tests, development) need it finer.
		// At most delayedTaskCheck: an attempt put back for an endpoint's
		// rate limit comes back near its turn.
		DelayedTaskCheckInterval: min(delayedTaskCheck, max(minDelay/2, 20*time.Millisecond)),
		RetryDelayFunc:           w.retryDelay,
		IsFailure:                isFailure,
		Logger:                   logger,
		LogLevel:                 asynq.WarnLevel,
	})
	sched := asynq.NewScheduler(cfg.Redis, &asynq.SchedulerOpts{Logger: logger, LogLevel: asynq.WarnLevel})
	if err := w.registerPeriodic(sched); err != nil {
		return err
	}
	if err := srv.Start(w.mux()); err != nil {
		return fmt.Errorf("start asynq server: %w", err)
	}
	if err := sched.Start(); err != nil {
		srv.Shutdown()
		return fmt.Errorf("start asynq scheduler: %w", err)
	}
	w.logger.Info("dispatcher started", "concurrency", cfg.Concurrency, "merchant_concurrency", cfg.merchantConcurrency(),
		"subscription_concurrency", cfg.SubscriptionConcurrency, "delivery_timeout", cfg.DeliveryTimeout.String(),
		"retry_schedule", cfg.Schedule.String())

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
		w.scheduler.Run(ctx)
	}()
	<-ctx.Done()
	<-attempts // every attempt in flight ended and recorded
	sched.Shutdown()
	srv.Shutdown()
	w.logger.Info("dispatcher stopped")
	return nil
}

// registerPeriodic enqueues the sweeper and maintenance jobs on their
// intervals. Every instance does so (the Scheduler has no leader): a fixed
// TaskID drops duplicates while one is queued, and the jobs themselves are
// idempotent.
func (w *worker) registerPeriodic(sched *asynq.Scheduler) error {
	jobs := []struct {
		task  string
		every time.Duration
	}{
		{TaskSweep, w.cfg.SweepInterval},
		{TaskMaintenance, w.cfg.MaintenanceInterval},
		{TaskAutoDisable, w.cfg.AutoDisableInterval},
	}
	for _, j := range jobs {
		// asynq keeps a timeout in whole seconds: a sub-second one would be
		// stored as none, which its processor reports as an internal error.
		_, err := sched.Register("@every "+j.every.String(), asynq.NewTask(j.task, nil),
			asynq.Queue(QueueMaintenance), asynq.TaskID(j.task), asynq.MaxRetry(0), asynq.Timeout(max(j.every, time.Second)))
		if err != nil {
			return fmt.Errorf("schedule %s: %w", j.task, err)
		}
	}
	return nil
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
