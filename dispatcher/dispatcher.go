// Package dispatcher turns published events into delivered webhooks.
//
// Each job has a type of its own, in a file of its own:
//
//   - publisher.go: the Publisher owns the event catalogue and every rule
//     on a published event; it stores the event and its deliveries and
//     enqueues their first attempts (HTTP ingest, producer tasks and
//     send_test_event all go through it).
//   - attempt.go: the attemptRunner makes one attempt (lease, sign, POST,
//     record) and schedules the next; decide.go is its retry policy,
//     sender.go its HTTP exchange, recorder.go and leaser.go its group
//     commits, limiter.go its per-subscription cap.
//   - sweeper.go: the sweeper re-enqueues what Redis lost.
//   - maintainer.go: the maintainer creates and drops day partitions and
//     expires idempotency keys.
//   - redeliverer.go: the Redeliverer makes manual attempts (redeliver,
//     recover).
//   - notify.go: the MailNotifier tells merchants of deliveries that failed
//     for good.
//   - tasks.go: the asynq task types, their payloads and ids, and the
//     enqueuer every service uses; worker.go: the one ServeMux where every
//     task type is registered, with the middleware every handler shares.
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
	"net"
	"net/url"
	"runtime"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/producer"
	"github.com/webhookd/webhookd/retry"
	"github.com/webhookd/webhookd/signer"
)

// Notifier is told about deliveries that failed for good.
type Notifier interface {
	// DeliveryFailed is called after a real (non-test) delivery used up its
	// attempts or its manual attempt failed.
	DeliveryFailed(ctx context.Context, d store.Delivery)
}

// Config is what the pipeline needs, for the API role (New) and the worker
// role (Run) alike. Optional fields left zero take the defaults that
// setDefaults gives them, the one place defaults are set.
type Config struct {
	// Store is the database (required).
	Store *store.Store
	// Redis is asynq's connection (required).
	Redis asynq.RedisConnOpt
	// Sealer opens the stored signing secrets (required).
	Sealer *signer.Sealer
	// DefaultAPIVersion is the version new merchants are pinned to
	// (required).
	DefaultAPIVersion string
	// EventTypes is the event catalogue producers may publish (spec 6.1
	// plus configured kinds); nil means DefaultEventTypes(). TestEventType is
	// reserved and never in it.
	EventTypes []string
	// MaxPayloadBytes bounds a published payload; 0 means no bound.
	MaxPayloadBytes int
	// VersionUsable tells whether a producer may name an api_version at
	// now; nil accepts any.
	VersionUsable func(version string, now time.Time) bool
	// Versions maps a merchant's pinned version to the version events are
	// serialised at (e.g. a sunset version to its successor); nil keeps it.
	Versions func(merchantVersion string) string
	// Schedule is the retry schedule; zero means retry.Default().
	Schedule retry.Schedule
	// Jitter draws the jitter of each retry delay, in [-1, 1]; default
	// retry.RandomJitter. Tests fix it.
	Jitter func() float64
	// DeliveryTimeout bounds one whole HTTP exchange; default 25 s.
	DeliveryTimeout time.Duration
	// AllowHTTPTargets lets deliveries go to http:// URLs (development).
	AllowHTTPTargets bool
	// AllowPrivateTargets lets deliveries dial private, loopback and
	// link-local addresses (development and tests).
	AllowPrivateTargets bool
	// EgressProxy, when set, is the HTTP CONNECT proxy (http://host:port,
	// credentials in the URL) every delivery and endpoint check goes
	// through; the address check still applies to the target, before the
	// CONNECT, which names the checked address.
	EgressProxy *url.URL
	// Concurrency is the number of attempts (and tasks) one process works
	// at once, an event's fan-out included, and the most outbound
	// connections it holds open; default 32 per CPU (attempts mostly wait
	// on the network).
	Concurrency int
	// MerchantShare is the part of Concurrency one merchant's attempts may
	// hold, however many subscriptions it has, so that no merchant starves
	// the others; in (0, 1], default 0.25.
	MerchantShare float64
	// SubscriptionConcurrency caps the attempts one subscription may have
	// running in this process, so that a receiver that hangs until the
	// timeout leaves the rest of its merchant's share to the merchant's
	// other endpoints; default half the merchant's share (at least 1).
	SubscriptionConcurrency int
	// Recorder writes attempt outcomes; default a BatchRecorder on Store
	// (group commit), which Run starts and stops. A Recorder given here is
	// the caller's to close.
	Recorder Recorder
	// Notifier hears of permanently failed real deliveries; may be nil.
	Notifier Notifier
	// Logger receives the pipeline's logs; default discards.
	Logger *slog.Logger
	// Registerer receives the pipeline's metrics; nil registers nowhere.
	Registerer prometheus.Registerer
	// Clock is the one clock of every service; default the system clock.
	Clock clock.Clock
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
	// AutoDisableAfter is how long every attempt to a subscription must
	// have failed before the auto-disable job disables it; default 120 h.
	AutoDisableAfter time.Duration
	// AutoDisableInterval is how often that job runs; default 5 min.
	AutoDisableInterval time.Duration
	// TaskRetryCap is the longest asynq waits before running again a task
	// whose handler failed for an internal reason (Postgres unreachable);
	// the waits double from a second up to it. Default 1 min.
	TaskRetryCap time.Duration
	// Version names this build in the user-agent header; default "dev".
	Version string
}

// DefaultEventTypes is the event vocabulary of spec 6.1, a fresh slice
// each call.
func DefaultEventTypes() []string { return catalogue.Names() }

// setDefaults fills every optional field left zero. It is the one place
// the pipeline's defaults are written.
func (c *Config) setDefaults() {
	if c.EventTypes == nil {
		c.EventTypes = DefaultEventTypes()
	}
	if len(c.Schedule.Delays) == 0 {
		c.Schedule = retry.Default()
	}
	if c.Jitter == nil {
		c.Jitter = retry.RandomJitter
	}
	if c.DeliveryTimeout <= 0 {
		c.DeliveryTimeout = 25 * time.Second
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 32 * runtime.GOMAXPROCS(0)
	}
	if c.MerchantShare == 0 {
		c.MerchantShare = 0.25
	}
	if c.SubscriptionConcurrency <= 0 {
		c.SubscriptionConcurrency = max(1, c.merchantConcurrency()/2)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = clock.System{}
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
	if c.AutoDisableAfter <= 0 {
		c.AutoDisableAfter = 120 * time.Hour
	}
	if c.AutoDisableInterval <= 0 {
		c.AutoDisableInterval = 5 * time.Minute
	}
	if c.TaskRetryCap <= 0 {
		c.TaskRetryCap = time.Minute
	}
	if c.Version == "" {
		c.Version = "dev"
	}
}

// validate checks the required fields; it changes nothing.
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
	case c.MerchantShare <= 0 || c.MerchantShare > 1:
		return fmt.Errorf("dispatcher: MerchantShare must be in (0, 1], not %v", c.MerchantShare)
	}
	return nil
}

// merchantConcurrency is how many attempts one merchant may have running
// in this process (at least 1).
func (c *Config) merchantConcurrency() int {
	return max(1, int(c.MerchantShare*float64(c.Concurrency)))
}

// circuitAfter is how many attempts to one subscription in a row must
// time out before it is held to one attempt at a time (until one ends
// without timing out), so that a hanging endpoint holds one slot, not its
// whole cap.
const circuitAfter = 3

// schedulerConfig is the scheduler part of c: a merchant's share and a
// subscription's cap as they were, and an eighth of the pool never lent
// beyond a share, for other merchants' new work.
func (c *Config) schedulerConfig() SchedulerConfig {
	return SchedulerConfig{Concurrency: c.Concurrency, Share: c.merchantConcurrency(), SubscriptionCap: c.SubscriptionConcurrency,
		CircuitAfter: circuitAfter, Reserve: min(max(1, c.Concurrency/8), c.Concurrency-1), AttemptTimeout: c.leaseFor(),
		Held: c.SweepGrace}
}

// leaseFor is how long a worker holds a delivery for one attempt: the
// delivery timeout and a margin to load secrets before and to record the
// attempt after the HTTP exchange. The margin is also how long a crashed
// worker delays the delivery.
func (c *Config) leaseFor() time.Duration {
	return c.DeliveryTimeout + min(max(c.DeliveryTimeout/2, time.Second), 10*time.Second)
}

// senderConfig is the delivery part of c.
func (c *Config) senderConfig() SenderConfig {
	return SenderConfig{Timeout: c.DeliveryTimeout, AllowHTTP: c.AllowHTTPTargets, AllowPrivate: c.AllowPrivateTargets,
		MaxConns: c.Concurrency, MaxConnsPerHost: c.Concurrency, Version: c.Version, EgressProxy: c.EgressProxy}
}

// Dispatcher is the pipeline as the processes see it: the API role
// publishes and redelivers through it (New builds only the Publisher, with
// its group commit of publishes, and the Redeliverer; the endpoint check's HTTP client is
// built at the first check), and the worker role calls Run, which builds
// the workers.
type Dispatcher struct {
	cfg       Config
	tasks     *Enqueuer
	metrics   *metrics
	publisher *Publisher
	redeliver *Redeliverer
	// checker is built at the first endpoint check, so that a process
	// that never checks holds no HTTP client for it.
	checker func() (*Checker, error)
	// dialer, when set, is the dialer of every delivery in place of
	// newDialer's (tests confine it to loopback).
	dialer *net.Dialer
}

// New checks cfg, fills its defaults, registers the metrics and connects
// the asynq client. Close releases it.
func New(cfg Config) (*Dispatcher, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	tasks, err := NewEnqueuer(cfg.Redis, cfg.leaseFor(), cfg.Clock)
	if err != nil {
		return nil, err
	}
	pub, err := NewPublisher(PublisherConfig{
		Store: cfg.Store, EventTypes: cfg.EventTypes, MaxPayloadBytes: cfg.MaxPayloadBytes,
		VersionUsable: cfg.VersionUsable, Versions: cfg.Versions, DefaultAPIVersion: cfg.DefaultAPIVersion,
	}, tasks, m, cfg.Clock, cfg.Logger)
	if err != nil {
		return nil, err
	}
	red, err := NewRedeliverer(RedelivererConfig{Store: cfg.Store}, tasks, cfg.Clock, cfg.Logger)
	if err != nil {
		return nil, err
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(NewScheduleCollector(tasks.Lanes, cfg.Clock)); err != nil {
			return nil, fmt.Errorf("register the schedule's metrics: %w", err)
		}
	}
	d := &Dispatcher{cfg: cfg, tasks: tasks, metrics: m, publisher: pub, redeliver: red}
	d.checker = sync.OnceValues(func() (*Checker, error) {
		snd, err := NewSender(cfg.senderConfig(), cfg.Clock, d.dialer)
		if err != nil {
			return nil, err
		}
		return newChecker(cfg, pub, snd), nil
	})
	return d, nil
}

// CheckEndpoint is Checker.Check.
func (d *Dispatcher) CheckEndpoint(ctx context.Context, merchantID string, subscriptionID uuid.UUID) (CheckReport, error) {
	c, err := d.checker()
	if err != nil {
		return CheckReport{}, err
	}
	return c.Check(ctx, merchantID, subscriptionID)
}

// Check is Publisher.Check.
func (d *Dispatcher) Check(e producer.Event) error { return d.publisher.Check(e) }

// Publish is Publisher.Publish.
func (d *Dispatcher) Publish(ctx context.Context, e producer.Event) (store.Event, bool, error) {
	return d.publisher.Publish(ctx, e)
}

// PublishAll is Publisher.PublishAll.
func (d *Dispatcher) PublishAll(ctx context.Context, es []producer.Event) ([]store.Event, []bool, []error) {
	return d.publisher.PublishAll(ctx, es)
}

// SendTestEvent is Publisher.SendTestEvent.
func (d *Dispatcher) SendTestEvent(ctx context.Context, merchantID string, subscriptionID uuid.UUID) (store.Delivery, error) {
	return d.publisher.SendTestEvent(ctx, merchantID, subscriptionID)
}

// Redeliver is Redeliverer.Redeliver.
func (d *Dispatcher) Redeliver(ctx context.Context, merchantID string, deliveryID uuid.UUID) (store.Delivery, error) {
	return d.redeliver.Redeliver(ctx, merchantID, deliveryID)
}

// Recover is Redeliverer.Recover.
func (d *Dispatcher) Recover(ctx context.Context, merchantID string, subscriptionID uuid.UUID, since time.Time) (int, error) {
	return d.redeliver.Recover(ctx, merchantID, subscriptionID, since)
}

// Close writes the publishes waiting for their group, then closes the
// asynq client their first attempts are enqueued with.
func (d *Dispatcher) Close() error {
	d.publisher.Close()
	return d.tasks.Close()
}
