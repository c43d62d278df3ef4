// Package admin holds webhookd's HTTP surfaces: the public Banking /v1 API,
// the legacy webhook-subscription routes, and the internal listener for the
// core API and SREs. Cross-cutting rules (correlation id, HTTPS, body limit,
// api-version, authentication, scopes, idempotency, error format) are
// middleware on route groups, so that no route can forget one.
package admin

import (
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/webhookd/webhookd/dispatcher/publish"
	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/merchants"
	"github.com/webhookd/webhookd/internal/sessions"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/internal/tracing"
)

// Config is everything the HTTP surfaces need. cmd/webhookd fills every
// field from the environment; New gives Clock, Logger, CursorTTL and
// Versions a default when left zero (tests leave them so). The rules of a
// published event, its payload limit included, are the Publisher's.
type Config struct {
	// Store is the database.
	Store *store.Store
	// ReadStore, when set, is a streaming replica of Store that the
	// public API's list and get routes read (WEBHOOKD_DATABASE_READ_URL);
	// everything else, authentication and idempotency included, stays on
	// Store. Nil reads Store.
	ReadStore *store.Store
	// Redis backs the rate limiter; readiness checks it too. Listen
	// connections wait for their deliveries on one pub/sub connection of
	// it, made when the first waits (Server.Close closes it).
	Redis redis.UniversalClient
	// Publisher stores events and schedules their deliveries.
	Publisher Publisher
	// Logger receives one line per request and every internal error.
	Logger *slog.Logger
	// Registerer receives the HTTP metrics.
	Registerer prometheus.Registerer
	// Gatherer serves GET /metrics on the internal listener.
	Gatherer prometheus.Gatherer

	// Environment is "sandbox" or "production"; keys of the other one are 401.
	Environment string
	// Versions is the API version catalogue.
	Versions Versions
	// MasterKey (32 bytes) encrypts signing secrets and signs cursors.
	MasterKey []byte
	// IngestToken guards the internal routes; empty refuses them all.
	IngestToken string
	// RequireHTTPS refuses plain-HTTP requests that no trusted proxy vouches
	// for; it is set when the listener is not loopback and has no TLS.
	RequireHTTPS bool
	// TrustedProxies may set X-Forwarded-Proto.
	TrustedProxies []netip.Prefix
	// MaxBodyBytes bounds every request body (413 above it).
	MaxBodyBytes int64
	// EventTypes is the event catalogue (spec 6.1 plus configured kinds),
	// the Publisher's: subscriptions and the event_type filter name its
	// types.
	EventTypes []string
	// AllowHTTPTargets and AllowPrivateTargets lift the URL rules for
	// development and tests.
	AllowHTTPTargets, AllowPrivateTargets bool
	// Destinations are the destination types subscriptions may use
	// (WEBHOOKD_DESTINATIONS); nil allows every one.
	Destinations []string
	// Kinds are the destination kinds this build delivers to, with their
	// fields and rules (internal/destination/kinds); nil knows only the
	// HTTP endpoint and poll.
	Kinds *destination.Registry
	// Transformations compiles transformations when they are saved and
	// runs them for the simulate route (internal/transform); nil refuses
	// every transformation.
	Transformations Transformations
	// TestEventRate limits send_test_event per merchant.
	TestEventRate redis_rate.Limit
	// APIRate limits every authenticated request of the public API (/v1
	// and the legacy routes) per API key; zero is no limit.
	APIRate redis_rate.Limit
	// PortalSessionRate limits the portal sessions each API key mints
	// (POST /v1/portal_sessions; the core API's mints are not limited);
	// zero means 10 a minute (defaultPortalSessionRate).
	PortalSessionRate redis_rate.Limit
	// MaxSubscriptions is how many subscriptions a merchant may hold (every
	// one not deleted, legacy-made ones included); zero means 100
	// (subscriptions.DefaultMaxSubscriptions).
	MaxSubscriptions int
	// PublicURL is the public listener's external base URL; a portal
	// session's link is PublicURL + "/portal/#token=…".
	PublicURL string
	// Replays checks, records and reads bulk replays (dispatcher's
	// Replays); nil builds one on Store.
	Replays Replays
	// Checker runs endpoint checks (POST …/check; publish.Checker is
	// one); nil on a server that sends no checks itself.
	Checker EndpointChecker
	// Announcer publishes webhook_endpoint.disabled and .enabled when a
	// merchant sets a subscription's status (dispatcher's Emitter); nil
	// announces nothing.
	Announcer StatusAnnouncer
	// Poller reads poll subscriptions; nil answers their poll route 404.
	Poller Poller
	// Wakes is the process's shared Redis pub/sub connection
	// (dispatcher.Dispatcher.Wakes), on which listen connections wait
	// for their deliveries beside the Poller's long polls; the caller
	// closes it. Nil: New makes one of its own on Redis, closed by Close.
	Wakes *queue.WakeHub
	// CursorTTL is how long a pagination cursor stays valid.
	CursorTTL time.Duration
	// KeyUsage notes when each API key authenticates a request and writes
	// it in batches (cmd/webhookd runs it); nil records no last use.
	KeyUsage *merchants.KeyUsage
	// Clock is the engine's clock; nil is the system clock (clock.Or).
	Clock clock.Clock
	// SourceAddresses are the addresses deliveries leave from, as the
	// operator declares them; GET /v1/webhook_source_addresses lists them.
	SourceAddresses []netip.Prefix
	// MaxLongPollsPerMerchant is how many long polls (poll reads with a
	// wait) one merchant holds open at once, across the API processes
	// sharing Redis (this process's when Redis cannot be asked); one more
	// is 429. Zero means DefaultMaxLongPollsPerMerchant.
	MaxLongPollsPerMerchant int
	// MaxListenersPerMerchant is how many listen connections one merchant
	// holds open at once, counted as MaxLongPollsPerMerchant; one more is
	// 429. Zero means DefaultMaxListenersPerMerchant.
	MaxListenersPerMerchant int
	// ListenerGrace is how long a listener (`webhookd listen`) outlives its
	// connection, for the command to reconnect; zero means 30 s.
	ListenerGrace time.Duration
	// Portal, when set, serves the merchant portal's web pages at /portal/
	// on the public listener; the pages call /v1 like any client.
	Portal http.Handler
	// TracerProvider traces API requests (tracing.go); nil traces none.
	TracerProvider trace.TracerProvider
}

// defaultCursorTTL is how long a pagination cursor stays valid when
// Config.CursorTTL is zero.
const defaultCursorTTL = 24 * time.Hour

// Server serves the HTTP surfaces. It holds one handler group per
// resource family, each with only the dependencies it uses, and the
// middleware they share; Public and Internal (routes.go) are the route
// tables that put them together.
type Server struct {
	// The shared middleware and writers.
	respond responder
	rules   requestRules
	metrics *httpMetrics
	auth    authenticator
	idem    idempotency
	limits  rateLimiter
	tracing requestTracing

	// The public listener's groups: the merchant API and the legacy
	// routes.
	documents      documentHandlers
	subscriptions  subscriptionHandlers
	endpoints      endpointHandlers
	transforms     transformationHandlers
	events         eventHandlers
	scheduled      scheduledHandlers
	deliveries     deliveryHandlers
	replays        replayHandlers
	portalSessions portalSessionHandlers
	listen         listenHandlers
	legacy         legacyHandlers
	polls          pollHandlers
	// portal serves the portal's pages at /portal/; nil serves none.
	portal http.Handler
	// wakes is the listen connections' shared pub/sub connection;
	// ownsWakes: made by New, closed by Close.
	wakes     *queue.WakeHub
	ownsWakes bool

	// The internal listener's groups (portalSessions serves there too).
	internal internalHandlers
	ingest   ingestHandlers
	erasure  erasureHandlers
	apiKeys  apiKeyHandlers
	gatherer prometheus.Gatherer
}

// New builds a Server and registers its metrics.
func New(cfg Config) (*Server, error) {
	clk := clock.Or(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ListenerGrace == 0 {
		cfg.ListenerGrace = 30 * time.Second
	}
	if cfg.CursorTTL == 0 {
		cfg.CursorTTL = defaultCursorTTL
	}
	if len(cfg.Versions) == 0 {
		cfg.Versions = DefaultVersions()
	}
	metrics, err := newHTTPMetrics(cfg.Registerer, clk, cfg.Logger)
	if err != nil {
		return nil, err
	}
	limiterErrors, err := newLimiterErrors(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	// reads is where the list and get routes read: the replica when there
	// is one. They may lag Store (replication delay), which is why only
	// routes that read what a client asks for, and nothing that decides
	// a write, use it.
	st := cfg.Store
	if st == nil {
		// A Config without a Store (the tests that list the routes)
		// still builds every handler, over parts that are not there.
		st = &store.Store{}
	}
	reads := cfg.ReadStore
	if reads == nil {
		reads = st
	}
	checker := cfg.Checker
	var limiter *redis_rate.Limiter
	if cfg.Redis != nil {
		limiter = redis_rate.NewLimiter(cfg.Redis)
	}
	registry := subscriptions.NewRegistry(st.Subscriptions, st.Listeners, cfg.MasterKey, subscriptions.Rules{
		EventTypes: cfg.EventTypes, AllowHTTPTargets: cfg.AllowHTTPTargets, AllowPrivateTargets: cfg.AllowPrivateTargets,
		MaxSubscriptions: cfg.MaxSubscriptions, Destinations: cfg.Destinations, Kinds: cfg.Kinds,
		Clock: clk, Transformations: transformationCompiler(cfg.Transformations),
	})
	respond := responder{logger: cfg.Logger}
	limits := rateLimiter{respond: respond, limiter: limiter, errors: limiterErrors,
		api: apiRateLimit(cfg.APIRate), testEvent: testEventRateLimit(cfg.TestEventRate),
		portalSession: portalSessionRateLimit(cfg.PortalSessionRate)}
	pages := pager{masterKey: cfg.MasterKey, cursorTTL: cfg.CursorTTL, clock: clk}
	wakes, ownsWakes := cfg.Wakes, cfg.Wakes == nil
	if ownsWakes {
		wakes = queue.NewWakeHub(cfg.Redis, cfg.Logger)
	}
	asyncAPIDocument, err := buildAsyncAPI(cfg)
	if err != nil {
		return nil, err
	}
	replays := cfg.Replays
	if replays == nil {
		if replays, err = publish.NewReplays(publish.ReplaysConfig{Store: st.Replays, Subscriptions: st.Subscriptions,
			EventTypes: catalogue.New(cfg.EventTypes), Clock: clk}); err != nil {
			return nil, err
		}
	}
	changed, _ := cfg.Publisher.(changeAnnouncer)
	changes := subscriptionChanges{registry: registry, store: st.Subscriptions, work: cfg.Publisher, logger: cfg.Logger, clock: clk,
		announcer: cfg.Announcer, changed: changed}
	return &Server{
		respond: respond,
		rules: requestRules{respond: respond, requireTLS: cfg.RequireHTTPS, trustedProxies: cfg.TrustedProxies,
			maxBodyBytes: cfg.MaxBodyBytes, versions: cfg.Versions, clock: clk, ingestToken: cfg.IngestToken},
		metrics: metrics,
		tracing: requestTracing{tracer: tracing.Tracer(cfg.TracerProvider)},
		auth: authenticator{respond: respond, keys: st.APIKeys, sessions: st.PortalSessions, environment: cfg.Environment, keyUsage: cfg.KeyUsage,
			versions: cfg.Versions, clock: clk},
		idem:   idempotency{respond: respond, store: st.IdempotencyKeys, masterKey: cfg.MasterKey},
		limits: limits,

		documents:     documentHandlers{versions: cfg.Versions, sourceAddresses: cfg.SourceAddresses, asyncAPIDocument: asyncAPIDocument},
		subscriptions: subscriptionHandlers{changes: changes, reads: reads.Subscriptions, polls: reads.Polls, pages: pages},
		endpoints: endpointHandlers{secrets: subscriptions.NewSecretRevealer(st.Subscriptions, cfg.MasterKey, clk.Now),
			subscriptions: reads.Subscriptions, attempts: reads.EndpointHealth, statistics: reads.Views,
			checker: checker, clock: clk},
		transforms: transformationHandlers{subscriptions: reads.Subscriptions, events: reads.Views, transformations: cfg.Transformations,
			eventTypes: catalogue.New(cfg.EventTypes), changes: changes, clock: clk},
		events: eventHandlers{reads: reads.Views, pages: pages, types: catalogue.New(cfg.EventTypes),
			publisher: cfg.Publisher, environment: cfg.Environment},
		deliveries: deliveryHandlers{reads: reads.Views, pages: pages, actions: cfg.Publisher, clock: clk},
		replays:    replayHandlers{replays: replays},
		portalSessions: portalSessionHandlers{issuer: sessions.NewIssuer(st.PortalSessions, cfg.Environment, cfg.AllowHTTPTargets),
			store: st.PortalSessions, limits: limits, environment: cfg.Environment, publicURL: cfg.PublicURL, destinations: allowedDestinations(cfg.Destinations, cfg.Kinds), kinds: cfg.Kinds},
		listen: listenHandlers{registry: registry, store: st.Listeners, redis: cfg.Redis, wakes: wakes, grace: cfg.ListenerGrace,
			clock: clk, logger: cfg.Logger, held: newHeldLimit("listen", "listen connections", cfg.MaxListenersPerMerchant,
				DefaultMaxListenersPerMerchant, listenRetryAfter, 2*cfg.ListenerGrace, cfg.Redis, clk, cfg.Logger)},
		legacy: legacyHandlers{changes: changes},
		polls: pollHandlers{poller: cfg.Poller, held: newHeldLimit("long_poll", "long polls", cfg.MaxLongPollsPerMerchant,
			DefaultMaxLongPollsPerMerchant, pollRetryAfter, pollLease, cfg.Redis, clk, cfg.Logger)},
		portal: cfg.Portal,
		wakes:  wakes, ownsWakes: ownsWakes,

		internal: internalHandlers{postgres: cfg.Store, redis: cfg.Redis, changed: changed,
			settings: merchants.NewSettingsUpdater(st.Merchants, cfg.Versions, clk.Now, merchants.WithHTTPLogos(cfg.AllowHTTPTargets))},
		ingest:    ingestHandlers{publisher: cfg.Publisher},
		erasure:   erasureHandlers{eraser: st.Erasures, audit: st.Audit, pages: pages},
		scheduled: scheduledHandlers{events: st.Events},
		apiKeys: apiKeyHandlers{issuer: merchants.NewKeyIssuer(st.APIKeys, cfg.Environment, cfg.Versions.Latest()),
			ring: merchants.NewKeyRing(st.APIKeys), store: st.APIKeys, redis: cfg.Redis, pages: pages, logger: cfg.Logger},
		gatherer: cfg.Gatherer,
	}, nil
}

// Close closes the listen connections' shared pub/sub connection, once
// the servers serving Public have stopped: a listen connection still open
// then finds its deliveries by its periodic look alone, and one opened
// after ends at once.
func (s *Server) Close() error {
	if !s.ownsWakes {
		return nil
	}
	return s.wakes.Close()
}
