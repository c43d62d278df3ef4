// Package dispatcher turns published events into delivered webhooks. It
// holds the asynq handlers of the pipeline, one per task type: ingest
// (producer.TaskIngest → stored event and its deliveries), attempt (one HTTP
// exchange with a receiver, recorded in Postgres), sweep (re-enqueue what
// Redis lost) and maintenance (partitions and retention).
//
// Postgres is the source of truth and Redis only carries the work: an event
// and its deliveries are stored in one transaction before any task is
// enqueued, an attempt is recorded before its task is acknowledged, and the
// sweeper re-enqueues every overdue delivery, so that a flushed Redis or a
// lost task delays a delivery but never loses it.
package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"runtime"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/producer"
	"github.com/webhookd/webhookd/retry"
	"github.com/webhookd/webhookd/signer"
	"github.com/webhookd/webhookd/store"
)

// Queue names. Attempts weigh most so that a burst of ingestion cannot
// starve deliveries; maintenance is tiny and rare.
const (
	queueDeliveries  = "deliveries"
	queueMaintenance = "maintenance"
)

// Notifier is told about deliveries that failed for good.
type Notifier interface {
	// DeliveryFailed is called after a real (non-test) delivery used up its
	// attempts or its manual attempt failed.
	DeliveryFailed(ctx context.Context, d store.Delivery)
}

// Config is what a Dispatcher needs. Zero values of optional fields take
// the defaults named on each.
type Config struct {
	// Store is the database (required).
	Store *store.Store
	// Redis is asynq's connection (required).
	Redis asynq.RedisConnOpt
	// Schedule is the retry schedule; zero means retry.Default().
	Schedule retry.Schedule
	// DeliveryTimeout bounds one whole HTTP exchange; default 25 s.
	DeliveryTimeout time.Duration
	// AllowHTTPTargets lets deliveries go to http:// URLs (development).
	AllowHTTPTargets bool
	// AllowPrivateTargets lets deliveries dial private, loopback and
	// link-local addresses (development and tests).
	AllowPrivateTargets bool
	// Concurrency is the number of tasks one process works at once;
	// default 32 per CPU (attempts mostly wait on the network).
	Concurrency int
	// SubscriptionConcurrency caps the attempts one subscription may have
	// running in this process, so that a receiver that hangs until the
	// timeout holds at most that many workers; default Concurrency/4
	// (at least 1).
	SubscriptionConcurrency int
	// Sealer opens the stored signing secrets (required).
	Sealer *signer.Sealer
	// Versions maps a merchant's pinned version to the version events are
	// serialised at (e.g. a sunset version to its successor); nil keeps it.
	Versions func(merchantVersion string) string
	// Notifier hears of permanently failed real deliveries; may be nil.
	Notifier Notifier
	// Logger receives the pipeline's logs; default discards.
	Logger *slog.Logger
	// Registerer receives the pipeline's metrics; nil registers nowhere.
	Registerer prometheus.Registerer
	// Now is the clock; default time.Now.
	Now func() time.Time
	// SweepInterval is how often the sweeper runs; default 30 s.
	SweepInterval time.Duration
	// SweepGrace is how overdue a delivery must be, and how long ago its
	// lease must have lapsed, before the sweeper enqueues it again: it
	// leaves alone tasks asynq is about to run and workers still recording
	// an outcome after a database outage; default 10 s, at most
	// SweepInterval.
	SweepGrace time.Duration
	// MaintenanceInterval is how often partitions and retention are kept;
	// default 1 h.
	MaintenanceInterval time.Duration
	// DefaultAPIVersion is the version new merchants are pinned to
	// (required).
	DefaultAPIVersion string
	// Version names this build in the user-agent header; default "dev".
	Version string
}

func (c *Config) validate() error {
	switch {
	case c.Store == nil:
		return errors.New("dispatcher: Store is required")
	case c.Redis == nil:
		return errors.New("dispatcher: Redis is required")
	case c.Sealer == nil:
		return errors.New("dispatcher: Sealer is required")
	case c.DefaultAPIVersion == "":
		return errors.New("dispatcher: DefaultAPIVersion is required")
	}
	if len(c.Schedule.Delays) == 0 {
		c.Schedule = retry.Default()
	}
	if c.DeliveryTimeout <= 0 {
		c.DeliveryTimeout = 25 * time.Second
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 32 * runtime.GOMAXPROCS(0)
	}
	if c.SubscriptionConcurrency <= 0 {
		c.SubscriptionConcurrency = max(1, c.Concurrency/4)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = 30 * time.Second
	}
	if c.SweepGrace <= 0 {
		c.SweepGrace = 10 * time.Second
	}
	c.SweepGrace = min(c.SweepGrace, c.SweepInterval)
	if c.MaintenanceInterval <= 0 {
		c.MaintenanceInterval = time.Hour
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	return nil
}

// Dispatcher publishes events and runs the workers that deliver them.
type Dispatcher struct {
	cfg      Config
	store    *store.Store
	client   *asynq.Client
	http     *http.Client
	recorder *batchRecorder
	leaser   *batcher[store.LeaseRequest, store.LeasedDelivery]
	secrets  *secretCache
	redis    redis.UniversalClient
	// inspector finds tasks that asynq archived (see clearArchived).
	inspector *asynq.Inspector
	limiter   *subscriptionLimiter
	metrics   *metrics
	logger    *slog.Logger
}

// New checks cfg, fills its defaults, registers the metrics and connects
// the asynq client. Close releases it.
func New(cfg Config) (*Dispatcher, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	d := &Dispatcher{
		cfg:      cfg,
		store:    cfg.Store,
		client:   asynq.NewClient(cfg.Redis),
		http:     newHTTPClient(cfg),
		recorder: newBatchRecorder(cfg.Store),
		secrets:  newSecretCache(cfg.Store, cfg.Sealer),
		limiter:  newSubscriptionLimiter(cfg.SubscriptionConcurrency),
		metrics:  m,
		logger:   cfg.Logger,
	}
	d.leaser = d.newLeaser()
	rc, ok := cfg.Redis.MakeRedisClient().(redis.UniversalClient)
	if !ok {
		return nil, errors.New("dispatcher: Redis options make no go-redis client")
	}
	d.redis = rc
	d.inspector = asynq.NewInspector(cfg.Redis)
	return d, nil
}

// Close closes the asynq client.
func (d *Dispatcher) Close() error {
	d.leaser.close()
	d.redis.Close()
	d.inspector.Close()
	d.recorder.close()
	d.http.CloseIdleConnections()
	return d.client.Close()
}

// leaseMargin is how long a delivery's lease outlives the delivery timeout:
// time to load secrets before and to record the attempt after the HTTP
// exchange. It is also how long a crashed worker delays the delivery.
func (d *Dispatcher) leaseMargin() time.Duration {
	return min(max(d.cfg.DeliveryTimeout/2, time.Second), 10*time.Second)
}

// Run works the queues (asynq Server) and enqueues the periodic jobs
// (asynq Scheduler) until ctx is done, then drains: attempts in flight get
// to finish and be recorded.
func (d *Dispatcher) Run(ctx context.Context) error {
	minDelay := d.cfg.Schedule.Delays[0]
	for _, dl := range d.cfg.Schedule.Delays {
		minDelay = min(minDelay, dl)
	}
	logger := asynqLogger{d.logger}
	srv := asynq.NewServer(d.cfg.Redis, asynq.Config{
		Concurrency: d.cfg.Concurrency,
		Queues: map[string]int{
			queueDeliveries:  6,
			producer.Queue:   3,
			queueMaintenance: 1,
		},
		// Longer than the delivery timeout, so that a shutdown lets every
		// attempt in flight finish and be recorded.
		ShutdownTimeout: d.cfg.DeliveryTimeout + d.leaseMargin() + time.Second,
		// Idle polling: webhooks should leave promptly. One poll per
		// interval per process is cheap for Redis.
		TaskCheckInterval: 20 * time.Millisecond,
		// Scheduled attempts and throttled tasks move to their queue this
		// often; short schedules (tests, development) need it finer.
		DelayedTaskCheckInterval: min(time.Second, max(minDelay/2, 20*time.Millisecond)),
		RetryDelayFunc:           d.retryDelay,
		IsFailure:                func(err error) bool { return !errors.Is(err, errThrottled) },
		Logger:                   logger,
		LogLevel:                 asynq.WarnLevel,
	})
	mux := asynq.NewServeMux()
	mux.Handle(producer.TaskIngest, asynq.HandlerFunc(d.handleIngest))
	mux.Handle(TaskAttempt, asynq.HandlerFunc(d.handleAttempt))
	mux.Handle(TaskFirstAttempts, asynq.HandlerFunc(d.handleFirstAttempts))
	mux.Handle(TaskSweep, asynq.HandlerFunc(d.handleSweep))
	mux.Handle(TaskMaintenance, asynq.HandlerFunc(d.handleMaintenance))

	sched := asynq.NewScheduler(d.cfg.Redis, &asynq.SchedulerOpts{Logger: logger, LogLevel: asynq.WarnLevel})
	if err := d.registerPeriodic(sched); err != nil {
		return err
	}
	if err := srv.Start(mux); err != nil {
		return fmt.Errorf("start asynq server: %w", err)
	}
	if err := sched.Start(); err != nil {
		srv.Shutdown()
		return fmt.Errorf("start asynq scheduler: %w", err)
	}
	d.logger.Info("dispatcher started", "concurrency", d.cfg.Concurrency,
		"subscription_concurrency", d.cfg.SubscriptionConcurrency, "delivery_timeout", d.cfg.DeliveryTimeout.String(),
		"retry_schedule", d.cfg.Schedule.String())

	// The periodic jobs first run after one interval; run both now so that
	// a restart picks up what a crash or a Redis flush left behind.
	if _, err := d.sweep(ctx); err != nil && ctx.Err() == nil {
		d.logger.Error("initial sweep", "error", err)
	}
	if err := d.maintain(ctx); err != nil && ctx.Err() == nil {
		d.logger.Error("initial maintenance", "error", err)
	}

	<-ctx.Done()
	sched.Shutdown()
	srv.Shutdown()
	d.logger.Info("dispatcher stopped")
	return nil
}

// registerPeriodic enqueues the sweeper and maintenance jobs on their
// intervals. Every instance does so (the Scheduler has no leader): a fixed
// TaskID drops duplicates while one is queued, and the jobs themselves are
// idempotent.
func (d *Dispatcher) registerPeriodic(sched *asynq.Scheduler) error {
	jobs := []struct {
		task  string
		every time.Duration
	}{
		{TaskSweep, d.cfg.SweepInterval},
		{TaskMaintenance, d.cfg.MaintenanceInterval},
	}
	for _, j := range jobs {
		// asynq keeps a timeout in whole seconds: a sub-second one would be
		// stored as none, which its processor reports as an internal error.
		_, err := sched.Register("@every "+j.every.String(), asynq.NewTask(j.task, nil),
			asynq.Queue(queueMaintenance), asynq.TaskID(j.task), asynq.MaxRetry(0), asynq.Timeout(max(j.every, time.Second)))
		if err != nil {
			return fmt.Errorf("schedule %s: %w", j.task, err)
		}
	}
	return nil
}

// errThrottled reports a task put back because its subscription already
// holds its share of the workers. It is not a failure: asynq keeps the
// task's retry count.
var errThrottled = errors.New("subscription at its concurrency cap")

// throttled is errThrottled with the time to wait before trying again.
type throttled struct{ after time.Duration }

func (t throttled) Error() string        { return errThrottled.Error() }
func (t throttled) Is(target error) bool { return target == errThrottled }

// throttleFor puts an attempt of a subscription at its cap back for about
// as long as the subscription has been at its cap: a fast receiver that a
// burst filled frees slots within moments, while one that hangs until the
// timeout frees none for a long while, and its waiting attempts must not
// come back every second to queue ahead of other merchants' webhooks.
func (d *Dispatcher) throttleFor(sub uuid.UUID) error {
	wait := min(max(d.limiter.fullFor(sub), 100*time.Millisecond), d.cfg.DeliveryTimeout)
	// Spread the returns, so that a hanging receiver's backlog does not
	// come back in one burst.
	return throttled{after: time.Duration(float64(wait) * (0.5 + rand.Float64()))}
}

// maxTaskRetry bounds asynq's own retries of a task whose handler failed
// for an internal reason (Postgres unreachable). The last retry gives up
// without an error so that the task is deleted, never archived: an archived
// task would hold its TaskID and block the sweeper's re-enqueue.
const maxTaskRetry = 8

// retryDelay is asynq's backoff for handler errors: throttled attempts come
// back soon; internal errors back off exponentially up to a minute.
func (d *Dispatcher) retryDelay(n int, err error, _ *asynq.Task) time.Duration {
	var th throttled
	if errors.As(err, &th) {
		return th.after
	}
	if errors.Is(err, errThrottled) {
		return min(time.Second, max(d.cfg.DeliveryTimeout/4, 50*time.Millisecond))
	}
	return min(time.Second<<min(n, 6), time.Minute)
}

// lastTry tells whether a failing handler must give up quietly now.
func lastTry(ctx context.Context) bool {
	n, ok1 := asynq.GetRetryCount(ctx)
	m, ok2 := asynq.GetMaxRetry(ctx)
	return ok1 && ok2 && n >= m
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
