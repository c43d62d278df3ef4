package deliver

import (
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/webhookd/webhookd/dispatcher/internal/metrics"
	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/destination/listen"
	"github.com/webhookd/webhookd/internal/destination/poll"
	"github.com/webhookd/webhookd/internal/destination/webhook"
	"github.com/webhookd/webhookd/internal/tracing"
	"github.com/webhookd/webhookd/retry"
	"github.com/webhookd/webhookd/signer"
)

// workerDeliveries is what NewWorker hands the parts of a Worker it
// builds of the database's deliveries, each of which takes only its own
// part: the runner's leases and their ends, the leaser's and the batch
// recorder's group commits.
type workerDeliveries interface {
	runnerDeliveries
	leaserStore
	batchRecorderStore
}

// WorkerConfig is what the attempting side of a worker process needs.
type WorkerConfig struct {
	// Deliveries leases, records and ends the deliveries (required).
	Deliveries workerDeliveries
	// ManualAttempts leases the deliveries of manual attempts (required).
	ManualAttempts manualAttemptLeaser
	// Subscriptions reads the signing secrets (required).
	Subscriptions secretCacheStore
	// Listeners tells whether a listener an attempt is relayed to is
	// still open, and ends it (required).
	Listeners listenerStore
	// Sealer opens the stored signing secrets (required).
	Sealer *signer.Sealer
	// Tasks is the process's enqueuer, whose schedule the attempts are
	// taken from and parked in (required).
	Tasks *queue.Enqueuer
	// Redis is asynq's connection, on which the listener relay opens its
	// own client (required).
	Redis asynq.RedisConnOpt
	// Schedule, Jitter and RetryCap are the retry policy (Runner).
	Schedule retry.Schedule
	Jitter   func() float64
	RetryCap time.Duration
	// DeliveryTimeout bounds one HTTP exchange.
	DeliveryTimeout time.Duration
	// Sender is how deliveries are sent; Dialer, when set, dials in place
	// of the sender's own (tests confine it to loopback).
	Sender SenderConfig
	Dialer *net.Dialer
	// Scheduler is the pool's shares and caps.
	Scheduler SchedulerConfig
	// Recorder writes attempt outcomes; nil means a BatchRecorder on Deliveries,
	// which Close stops.
	Recorder Recorder
	// Notifier hears of deliveries that failed for good; may be nil.
	Notifier Notifier
	// Version names this build to relayed listeners.
	Version string
	Metrics *metrics.Set
	Clock   clock.Clock
	Logger  *slog.Logger
	// TracerProvider traces attempts and their exchanges; nil traces
	// nothing.
	TracerProvider trace.TracerProvider
	// Transformer runs subscriptions' transformations (internal/transform);
	// nil fails every attempt of a subscription with one turned on, as
	// an internal error, until a worker that has one takes it.
	Transformer Transformer
}

// Worker is the attempting side of a worker process: the scheduler that
// takes attempts from the schedule and the runner that makes them, with
// the sender, leases, records and relay they share. Only worker processes
// build one, so that an API process holds no HTTP client to receivers and
// no group commits.
type Worker struct {
	// Runner makes attempts; its handlers serve an older build's attempt
	// tasks.
	Runner *Runner
	// Scheduler fills the pool from the schedule; Run it.
	Scheduler *Scheduler
	// closers release what NewWorker started, in order.
	closers []func()
}

// NewWorker builds the Worker of cfg. Close releases it.
func NewWorker(cfg WorkerConfig) (w *Worker, err error) {
	if cfg.Subscriptions == nil {
		return nil, errors.New("deliver: Subscriptions is required")
	}
	w = &Worker{}
	defer func() {
		if err != nil {
			w.Close()
		}
	}()
	leaseFor := LeaseFor(cfg.DeliveryTimeout)
	snd, err := NewSender(cfg.Sender, cfg.Clock, cfg.Dialer)
	if err != nil {
		return nil, err
	}
	w.closers = append(w.closers, snd.Close)
	snd.tracer = tracing.Tracer(cfg.TracerProvider)
	recorder := cfg.Recorder
	if recorder == nil {
		batch := NewBatchRecorder(cfg.Deliveries, cfg.Clock, cfg.Scheduler.Concurrency)
		w.closers = append(w.closers, batch.Close)
		recorder = batch
	}
	leases := newLeaser(cfg.Deliveries, cfg.Clock, leaseFor)
	w.closers = append(w.closers, leases.close)
	runnerCfg := RunnerConfig{Deliveries: cfg.Deliveries, ManualAttempts: cfg.ManualAttempts, Schedule: cfg.Schedule, Jitter: cfg.Jitter,
		LeaseFor: leaseFor, DeliveryTimeout: cfg.DeliveryTimeout, Notifier: cfg.Notifier, RetryCap: cfg.RetryCap}
	if err := runnerCfg.validate(); err != nil {
		return nil, err
	}
	relayRedis, ok := cfg.Redis.MakeRedisClient().(redis.UniversalClient)
	if !ok {
		return nil, errors.New("deliver: Redis options make no go-redis client")
	}
	w.closers = append(w.closers, func() { _ = relayRedis.Close() })
	rel, err := newRelay(relayConfig{Redis: relayRedis, Store: cfg.Listeners, Timeout: cfg.DeliveryTimeout, Version: cfg.Version}, cfg.Clock)
	if err != nil {
		return nil, err
	}
	dests, err := newDestinations(cfg.Sender, cfg.Dialer, cfg.Sealer, cfg.Clock,
		webhook.New(httpKind{snd}), listen.New(rel), poll.New())
	if err != nil {
		return nil, err
	}
	w.closers = append(w.closers, dests.closeAll)
	w.Runner = &Runner{cfg: runnerCfg, leaser: leases, recorder: recorder, destinations: dests,
		secrets: NewSecretCache(cfg.Subscriptions, cfg.Sealer), tasks: cfg.Tasks, metrics: cfg.Metrics, clock: cfg.Clock, logger: cfg.Logger,
		tracer: snd.tracer, transforms: transforming{transformer: cfg.Transformer, clock: cfg.Clock, turns: &merchantTurns{}}}
	w.Scheduler, err = NewScheduler(cfg.Scheduler, SchedulerDeps{Lanes: cfg.Tasks.Lanes, Redis: cfg.Tasks.Redis,
		Attempt: w.Runner.runUnit, Metrics: cfg.Metrics, Clock: cfg.Clock, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// Close releases what NewWorker started.
func (w *Worker) Close() {
	for _, c := range w.closers {
		c()
	}
}
