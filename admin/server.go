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

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/go-redis/redis_rate/v10"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/merchants"
	"github.com/webhookd/webhookd/internal/sessions"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
)

// Config is everything the HTTP surfaces need. cmd/webhookd fills every
// field from the environment; New gives Now, Logger, CursorTTL and
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
	// Redis backs the rate limiter; readiness checks it too.
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
	// TestEventRate limits send_test_event per merchant.
	TestEventRate redis_rate.Limit
	// APIRate limits every authenticated request of the public API (/v1
	// and the legacy routes) per API key; zero is no limit.
	APIRate redis_rate.Limit
	// MaxSubscriptions is how many subscriptions a merchant may hold (every
	// one not deleted, legacy-made ones included); zero means 100
	// (subscriptions.DefaultMaxSubscriptions).
	MaxSubscriptions int
	// PublicURL is the public listener's external base URL; a portal
	// session's link is PublicURL + "/portal/#token=…".
	PublicURL string
	// Checker runs endpoint checks (POST …/check); nil uses the Publisher
	// when it is one (dispatcher.Dispatcher is).
	Checker EndpointChecker
	// CursorTTL is how long a pagination cursor stays valid.
	CursorTTL time.Duration
	// KeyUsage notes when each API key authenticates a request and writes
	// it in batches (cmd/webhookd runs it); nil records no last use.
	KeyUsage *merchants.KeyUsage
	// Now is the clock.
	Now func() time.Time
	// SourceAddresses are the addresses deliveries leave from, as the
	// operator declares them; GET /v1/webhook_source_addresses lists them.
	SourceAddresses []netip.Prefix
	// ListenerGrace is how long a listener (`webhookd listen`) outlives its
	// connection, for the command to reconnect; zero means 30 s.
	ListenerGrace time.Duration
	// Portal, when set, serves the merchant portal's web pages at /portal/
	// on the public listener; the pages call /v1 like any client.
	Portal http.Handler
}

// Server serves the HTTP surfaces.
type Server struct {
	cfg   Config
	store *store.Store
	// reads is where the list and get routes read: the replica when there
	// is one. They may lag Store (replication delay), which is why only
	// routes that read what a client asks for, and nothing that decides
	// a write, use it.
	reads   *store.Store
	logger  *slog.Logger
	metrics *httpMetrics
	limiter *redis_rate.Limiter
	// subscriptions applies the rules of subscriptions and makes their
	// signing secrets; keys issues API keys; merchantSettings changes a
	// merchant's settings.
	subscriptions    *subscriptions.Registry
	keys             *merchants.KeyIssuer
	keyRing          *merchants.KeyRing
	merchantSettings *merchants.SettingsUpdater
	// portalSessions issues portal sessions; secrets reveals signing
	// secrets.
	portalSessions *sessions.Issuer
	secrets        *subscriptions.SecretRevealer
	// limiterErrors counts requests whose rate limit Redis could not check.
	limiterErrors *prometheus.CounterVec
}

// New builds a Server and registers its metrics.
func New(cfg Config) (*Server, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ListenerGrace == 0 {
		cfg.ListenerGrace = 30 * time.Second
	}
	if cfg.CursorTTL == 0 {
		cfg.CursorTTL = 24 * time.Hour
	}
	if len(cfg.Versions) == 0 {
		cfg.Versions = DefaultVersions()
	}
	m, err := newHTTPMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	limiterErrors, err := newLimiterErrors(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, store: cfg.Store, logger: cfg.Logger, metrics: m, limiterErrors: limiterErrors,
		subscriptions: subscriptions.NewRegistry(cfg.Store, cfg.MasterKey, subscriptions.Rules{
			EventTypes: cfg.EventTypes, AllowHTTPTargets: cfg.AllowHTTPTargets, AllowPrivateTargets: cfg.AllowPrivateTargets,
			MaxSubscriptions: cfg.MaxSubscriptions,
		}),
		keys:             merchants.NewKeyIssuer(cfg.Store, cfg.Environment, cfg.Versions.Latest()),
		keyRing:          merchants.NewKeyRing(cfg.Store),
		merchantSettings: merchants.NewSettingsUpdater(cfg.Store, cfg.Versions, cfg.Now, merchants.WithHTTPLogos(cfg.AllowHTTPTargets)),
		portalSessions:   sessions.NewIssuer(cfg.Store, cfg.Environment, cfg.AllowHTTPTargets),
		secrets:          subscriptions.NewSecretRevealer(cfg.Store, cfg.MasterKey, cfg.Now),
	}
	s.reads = cfg.ReadStore
	if s.reads == nil {
		s.reads = cfg.Store
	}
	if s.cfg.Checker == nil {
		s.cfg.Checker, _ = cfg.Publisher.(EndpointChecker)
	}
	if cfg.Redis != nil {
		s.limiter = redis_rate.NewLimiter(cfg.Redis)
	}
	return s, nil
}

// Public is the handler of the public listener: /v1 and the legacy routes.
func (s *Server) Public() http.Handler {
	r := chi.NewRouter()
	r.Use(s.correlate, s.instrument)
	r.NotFound(s.fail(errNotFound))
	r.MethodNotAllowed(s.fail(errMethodNotAllowed))

	r.Route("/v1", func(r chi.Router) {
		// The version comes first so that every /v1 answer, errors
		// included, carries api-version (spec 9.3).
		r.Use(s.requestedVersion, s.requireHTTPS, s.limitBody)
		r.NotFound(s.fail(errNotFound))
		r.MethodNotAllowed(s.fail(errMethodNotAllowed))
		r.Get("/api_versions", s.listVersions)
		r.Get("/openapi.json", s.openAPI)
		r.Get("/webhook_source_addresses", s.listSourceAddresses)
		r.Group(func(r chi.Router) {
			// The rate limit comes before the idempotency claim, so that a
			// refused request writes nothing and leaves its key unused.
			r.Use(s.authenticate(bearerKey), s.limitRate(s.apiRateLimit()), s.idempotent(true))
			s.subscriptionRoutes(r)
			s.testEventRoutes(r)
			s.eventRoutes(r)
			s.deliveryRoutes(r)
			s.portalSessionRoutes(r)
			s.eventTypeRoutes(r)
			s.endpointRoutes(r)
			s.listenRoutes(r)
			s.triggerRoutes(r)
		})
	})
	r.Route("/api/service/webhook-subscription", func(r chi.Router) {
		r.Use(markLegacy, s.requireHTTPS, s.limitBody)
		r.NotFound(s.fail(errNotFound))
		r.MethodNotAllowed(s.fail(errMethodNotAllowed))
		r.Use(s.authenticate(serviceKey), s.limitRate(s.apiRateLimit()), s.idempotent(false))
		s.legacyRoutes(r)
	})
	if s.cfg.Portal != nil {
		s.portalRoutes(r)
	}
	return r
}

// Internal is the handler of the internal listener.
func (s *Server) Internal() http.Handler {
	r := chi.NewRouter()
	r.Use(s.correlate, s.instrument, s.limitBody)
	r.NotFound(s.fail(errNotFound))
	r.MethodNotAllowed(s.fail(errMethodNotAllowed))
	r.Get("/healthz", healthz)
	r.Get("/readyz", s.readyz)
	r.Handle("/metrics", s.metricsHandler())
	// The document needs no token, like the public one (openapi.go); the
	// static route wins over the /internal/v1 mount below.
	r.Get("/internal/v1/openapi.json", s.openAPIInternal)
	// Profiles for the benchmark and for incidents; the same token as the
	// internal API, since a profile shows the process's inner workings.
	r.With(s.requireIngestToken).Mount("/debug", middleware.Profiler())
	r.Route("/internal/v1", func(r chi.Router) {
		r.Use(s.requireIngestToken)
		r.Put("/merchants/{id}", s.handle(s.putMerchant))
		s.apiKeyRoutes(r)
		s.internalPortalSessionRoutes(r)
		s.ingestRoutes(r)
	})
	return r
}

// fail is a handler that always answers err.
func (s *Server) fail(err *Error) http.HandlerFunc {
	return s.handle(func(http.ResponseWriter, *http.Request) error { return err })
}
