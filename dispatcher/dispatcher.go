// Package dispatcher turns published events into delivered webhooks. It
// assembles the pipeline from one Config; each role is a package of its
// own, each job a type in a file of its own:
//
//   - queue: the contract between the roles. The asynq task types, their
//     payloads and ids, the Enqueuer every role uses, and the schedule
//     (lanes.go) where every attempt waits, by merchant and subscription,
//     until it is due and its turn comes.
//   - publish: the API side. The Publisher applies every rule of a
//     published event, stores it and its deliveries (group commit, with
//     the subscriptions' filters judged) and parks their first attempts,
//     or, in a process that also works, starts them in its own pool where
//     a take would give them a slot at once (deliver.Scheduler.Start);
//     the Redeliverer asks for manual attempts; the Checker tests an
//     endpoint's signature verification.
//   - deliver: the worker side. The Scheduler fills the pool from the
//     schedule, each merchant to its share; the Runner makes one attempt
//     (lease, sign, send, record) and parks the next; the Sender is its
//     HTTP exchange behind the address check; the Dropper ends a deleted
//     subscription's waiting work.
//   - maintain: the periodic jobs. The Sweeper, the Maintainer
//     (partitions, retention) and the AutoDisabler.
//   - notify: the e-mails merchants act on.
//
// This package holds what spans them: Config, the one place defaults are
// set; New, which builds the API side's pieces (Dispatcher's fields, used
// directly); and Run, the worker role, whose one asynq ServeMux
// (worker.go) registers every task type behind the same middleware.
//
// Postgres is the source of truth and Redis only carries the work: an
// event and its deliveries are stored in one transaction before any
// attempt is parked or started, an attempt is recorded before it is taken
// off the schedule, and the sweeper parks again every overdue delivery, so
// that a flushed Redis or a lost attempt delays a delivery but never loses
// it.
package dispatcher

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"runtime"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/webhookd/webhookd/dispatcher/deliver"
	"github.com/webhookd/webhookd/dispatcher/internal/metrics"
	"github.com/webhookd/webhookd/dispatcher/notify"
	"github.com/webhookd/webhookd/dispatcher/poll"
	"github.com/webhookd/webhookd/dispatcher/publish"
	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/retry"
	"github.com/webhookd/webhookd/signer"
)

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
	// MasterKey seals the OAuth2 endpoints' tokens shared in Redis and
	// signs poll iterators; nil: deliveries to such endpoints fail for an
	// internal reason, and there is no Poller.
	MasterKey []byte
	// DefaultAPIVersion is the version new merchants are pinned to
	// (required).
	DefaultAPIVersion string
	// EventTypes is the event catalogue producers may publish (spec 6.1
	// plus configured kinds); nil means DefaultEventTypes(). TestEventType is
	// reserved and never in it.
	EventTypes []string
	// MaxPayloadBytes bounds a published payload; 0 means no bound.
	MaxPayloadBytes int
	// Payloads judges a published payload against its type's schema
	// (payloadschema.Validator); nil judges none.
	Payloads publish.PayloadChecker
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
	// PublishLinger is how long a publish may wait for others to share its
	// statement and commit (publish.PublisherConfig.Linger); 0 never waits.
	PublishLinger time.Duration
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
	// Sandbox runs subscriptions' transformations (one per process, the
	// API's too); nil: a worker makes no attempt of a subscription with
	// one turned on (each is an internal error, tried again later).
	Sandbox deliver.Sandbox
	// Kinds are the destination kinds this build delivers to
	// (internal/destination/kinds); nil: a subscription's destination of
	// any kind fails as not delivered.
	Kinds *destination.Registry
	// TracerProvider traces publishes and attempts (docs/tracing.md); nil
	// traces nothing.
	TracerProvider trace.TracerProvider
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
	Recorder deliver.Recorder
	// Notifier hears of permanently failed real deliveries; may be nil.
	Notifier deliver.Notifier
	// Logger receives the pipeline's logs; default discards.
	Logger *slog.Logger
	// Registerer receives the pipeline's metrics; nil registers nowhere.
	Registerer prometheus.Registerer
	// Clock is the one clock of every service; default the system clock.
	Clock clock.Clock
	// SweepInterval is how often the sweeper runs; default 30 s.
	SweepInterval time.Duration
	// ScheduleShards is how many shards the schedule of attempts is
	// spread over in Redis (queue.NewLanes); 0 means
	// queue.DefaultScheduleShards. Every process must have the same.
	ScheduleShards int
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
	// ReplayInterval is how often the replay job moves bulk replays on;
	// default 1 s.
	ReplayInterval time.Duration
	// ReplayInFlight bounds the attempts of one replay requested and not
	// yet made; default 20.
	ReplayInFlight int
	// TaskRetryCap is the longest asynq waits before running again a task
	// whose handler failed for an internal reason (Postgres unreachable);
	// the waits double from a second up to it. Default 1 min.
	TaskRetryCap time.Duration
	// Version names this build in the user-agent header; default "dev".
	Version string
	// Dialer, when set, dials every delivery and endpoint check in place
	// of the address-checking dialer built from the fields above (tests
	// confine it to loopback: deliver.NewDialer, then their own check).
	Dialer *net.Dialer
	// WrapFilterMatcher, when set, wraps the judge of subscription filters
	// (publish.PublisherConfig.WrapMatcher: tests make filters slow).
	WrapFilterMatcher func(publish.Matcher) publish.Matcher
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
	if c.ReplayInterval <= 0 {
		c.ReplayInterval = time.Second
	}
	if c.ReplayInFlight <= 0 {
		c.ReplayInFlight = 20
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
func (c *Config) schedulerConfig() deliver.SchedulerConfig {
	return deliver.SchedulerConfig{Concurrency: c.Concurrency, Share: c.merchantConcurrency(), SubscriptionCap: c.SubscriptionConcurrency,
		CircuitAfter: circuitAfter, Reserve: min(max(1, c.Concurrency/8), c.Concurrency-1), AttemptTimeout: c.leaseFor(),
		Held: c.SweepGrace, HandoverWindow: deliver.HandoverWindow(c.DeliveryTimeout), ChangesChannel: publish.SubscriptionsChangedChannel}
}

// leaseFor is how long a worker holds a delivery for one attempt
// (deliver.LeaseFor).
func (c *Config) leaseFor() time.Duration { return deliver.LeaseFor(c.DeliveryTimeout) }

// senderConfig is the delivery part of c.
func (c *Config) senderConfig() deliver.SenderConfig {
	return deliver.SenderConfig{Timeout: c.DeliveryTimeout, AllowHTTP: c.AllowHTTPTargets, AllowPrivate: c.AllowPrivateTargets,
		MaxConns: c.Concurrency, MaxConnsPerHost: c.Concurrency, Version: c.Version, EgressProxy: c.EgressProxy,
		OAuth: deliver.OAuthConfig{Redis: c.Redis, MasterKey: c.MasterKey}, Kinds: c.Kinds}
}

// NewDialer is the address-checking dialer New and Run build from c (its
// defaults filled) when c.Dialer is nil. A test that sets Config.Dialer
// starts from it (a resolver of its own, confined to loopback) so that
// the check it exercises is the one the engine would use.
func (c Config) NewDialer() *net.Dialer {
	c.setDefaults()
	return deliver.NewDialer(c.senderConfig())
}

// Dispatcher is the pipeline assembled from one Config: the pieces the
// API role calls, each used directly (New builds only these: the endpoint
// check's HTTP client is built at the first check), and Run, the worker
// role, which builds the workers.
type Dispatcher struct {
	// Publisher stores published events and their deliveries and parks
	// their first attempts.
	Publisher *publish.Publisher
	// Redeliverer makes manual attempts (redeliver, recover).
	Redeliverer *publish.Redeliverer
	// Checker tests whether an endpoint verifies signatures.
	Checker *publish.Checker
	// Replays checks and records bulk replays; the worker role's
	// replay job carries them out.
	Replays *publish.Replays
	// Dropper ends the waiting work of deleted or disabled subscriptions.
	Dropper *deliver.Dropper
	// Poller reads poll subscriptions; nil when Config has no MasterKey
	// (it signs their iterators).
	Poller *poll.Poller
	// Wakes is the process's one shared Redis pub/sub connection: the
	// Poller's long polls wait on it, and so do the listen connections
	// of the API server it is given to (admin.Config.Wakes).
	Wakes *queue.WakeHub
	// Emitter publishes the operational events of the merchants'
	// subscriptions (webhook_endpoint.disabled…): the worker's hooks tell
	// it, and so do the API's changes of a subscription's status.
	Emitter *notify.Emitter

	cfg     Config
	tasks   *queue.Enqueuer
	metrics *metrics.Set
}

// New checks cfg, fills its defaults, registers the metrics and connects
// the asynq client. Close releases it.
func New(cfg Config) (*Dispatcher, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m, err := metrics.New(cfg.Registerer, publish.RefusalRules())
	if err != nil {
		return nil, err
	}
	tasks, err := queue.NewEnqueuer(cfg.Redis, cfg.leaseFor(), cfg.ScheduleShards, cfg.Clock)
	if err != nil {
		return nil, err
	}
	// One pub/sub connection for the process's long polls, listen
	// connections and the Publisher's hearing of changes to subscriptions,
	// whatever their number.
	wakes := queue.NewWakeHub(tasks.Redis, cfg.Logger)
	pub, err := publish.NewPublisher(publish.PublisherConfig{
		Events: cfg.Store.Events, Merchants: cfg.Store.Merchants, Subscriptions: cfg.Store.Subscriptions,
		EventTypes: cfg.EventTypes, MaxPayloadBytes: cfg.MaxPayloadBytes,
		VersionUsable: cfg.VersionUsable, Versions: cfg.Versions, DefaultAPIVersion: cfg.DefaultAPIVersion,
		WrapMatcher: cfg.WrapFilterMatcher, TracerProvider: cfg.TracerProvider, Payloads: cfg.Payloads, Changes: wakes,
		Linger: cfg.PublishLinger,
	}, tasks, m, cfg.Clock, cfg.Logger)
	if err != nil {
		return nil, err
	}
	red, err := publish.NewRedeliverer(publish.RedelivererConfig{Views: cfg.Store.Views, Subscriptions: cfg.Store.Subscriptions,
		Listeners: cfg.Store.Listeners, ManualAttempts: cfg.Store.ManualAttempts}, tasks, cfg.Clock, cfg.Logger)
	if err != nil {
		return nil, err
	}
	replays, err := publish.NewReplays(publish.ReplaysConfig{Store: cfg.Store.Replays, Subscriptions: cfg.Store.Subscriptions,
		EventTypes: catalogue.New(cfg.EventTypes), Clock: cfg.Clock})
	if err != nil {
		return nil, err
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(queue.NewScheduleCollector(tasks.Lanes, cfg.Clock)); err != nil {
			return nil, fmt.Errorf("register the schedule's metrics: %w", err)
		}
	}
	var poller *poll.Poller
	if len(cfg.MasterKey) > 0 {
		if poller, err = poll.NewPoller(poll.PollerConfig{Subscriptions: cfg.Store.Subscriptions, Polls: cfg.Store.Polls,
			Secrets: deliver.NewSecretCache(cfg.Store.Subscriptions, cfg.Sealer), Redis: tasks.Redis, MasterKey: cfg.MasterKey,
			Clock: cfg.Clock, Logger: cfg.Logger, Registerer: cfg.Registerer, Wakes: wakes}); err != nil {
			return nil, err
		}
	}
	emitter, err := notify.NewEmitter(notify.EmitterConfig{Publisher: publish.NewOperational(pub), Claims: cfg.Store.EndpointHealth, Clock: cfg.Clock,
		Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	return &Dispatcher{
		Emitter:     emitter,
		Wakes:       wakes,
		Poller:      poller,
		Publisher:   pub,
		Redeliverer: red,
		Replays:     replays,
		Checker: publish.NewChecker(publish.CheckerConfig{Subscriptions: cfg.Store.Subscriptions, Events: cfg.Store.Events,
			Deliveries: cfg.Store.Deliveries, Sealer: cfg.Sealer, Publisher: pub, Sender: cfg.senderConfig(), Dialer: cfg.Dialer,
			LeaseFor: cfg.leaseFor(), Clock: cfg.Clock}),
		Dropper: deliver.NewDropper(tasks.Lanes, cfg.Store.Deliveries, cfg.Clock, cfg.Logger),
		cfg:     cfg, tasks: tasks, metrics: m,
	}, nil
}

// Close writes the publishes waiting for their group, then closes the
// asynq client their first attempts are enqueued with, and the long
// polls' shared pub/sub connection.
func (d *Dispatcher) Close() error {
	d.Publisher.Close()
	var pollErr error
	if d.Poller != nil {
		pollErr = d.Poller.Close()
	}
	return errors.Join(d.tasks.Close(), pollErr, d.Wakes.Close())
}
