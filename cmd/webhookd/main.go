// Command webhookd runs the webhook delivery engine: `serve` (everything in
// one process), `api` and `worker` (the roles split), `migrate`, and
// `keys create|list|revoke|roll`; and the developer's commands `listen`,
// `trigger` and `poll`, clients of a running engine. It only wires packages
// together.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
	asynqmetrics "github.com/hibiken/asynq/x/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/dispatcher/deliver"
	"github.com/webhookd/webhookd/dispatcher/maintain"
	"github.com/webhookd/webhookd/dispatcher/notify"
	"github.com/webhookd/webhookd/dispatcher/publish"
	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/gcpace"
	"github.com/webhookd/webhookd/internal/keyscli"
	"github.com/webhookd/webhookd/internal/merchants"
	"github.com/webhookd/webhookd/internal/outagelog"
	"github.com/webhookd/webhookd/internal/payloadschema"
	"github.com/webhookd/webhookd/internal/portal"
	"github.com/webhookd/webhookd/internal/procs"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/sysmon"
	"github.com/webhookd/webhookd/signer"
)

// version names this build in the user-agent of deliveries and in
// `webhookd version`; a release build sets it with
// -ldflags "-X main.version=…".
var version = "dev"

const usage = `usage: webhookd <command>

commands:
  serve                                  public API, internal API, worker and scheduler in one process
  api                                    public and internal API only
  worker                                 worker and scheduler only (with the internal listener)
  migrate                                apply the database migrations and exit
  keys create --merchant ID --scopes a,b print a new API key on the last line (into WEBHOOKD_DATABASE_URL's database)
  keys list|revoke|roll --merchant ID    manage a merchant's API keys through the internal API (webhookd keys list --help)
  listen --forward-to URL                relay the merchant's deliveries to a local server (see docs/listen.md)
  trigger TYPE                           publish an example event of TYPE to the merchant's own subscriptions (sandbox)
  poll SUBSCRIPTION_ID                   print a poll subscription's deliveries; --ack, --follow (see docs/poll.md)
  version                                print the version, commit and Go version
  help                                   print this help

configuration: WEBHOOKD_* environment variables (see README.md)
`

// redisLogInterval is how often the log repeats that Redis is unreachable.
const redisLogInterval = 5 * time.Second

func main() {
	if len(os.Args) > 1 && isServerCommand(os.Args[1]) {
		// Returns only when nothing was to change, or on failure: the
		// server then runs without the setting.
		if err := sysmon.Reexec(); err != nil {
			fmt.Fprintln(os.Stderr, "webhookd:", err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "webhookd:", err)
		os.Exit(1)
	}
}

// isServerCommand tells the commands that run for long and serve: they
// run with the runtime's monitor tuned for light load (internal/sysmon).
func isServerCommand(command string) bool {
	return command == "serve" || command == "api" || command == "worker"
}

// role says which parts a process runs.
type role struct{ api, worker bool }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("a command is required")
	}
	// The commands that read no configuration come first, so that asking
	// for help or the version warns of nothing.
	switch command := args[0]; {
	case isHelp(command):
		fmt.Fprint(stdout, usage)
		return nil
	case command == "version" || command == "--version":
		fmt.Fprintln(stdout, versionLine())
		return nil
	case command == "keys" && len(args) > 1 && keyscli.Handles(args[1]):
		return keysAPI(ctx, args[1:], stdout, stderr)
	case command == "listen":
		return listen(ctx, args[1:], stdout, stderr)
	case command == "trigger":
		return trigger(ctx, args[1:], stdout, stderr)
	case command == "poll":
		return pollCommand(ctx, args[1:], stdout, stderr)
	case command == "keys":
	case slices.Contains([]string{"serve", "api", "worker", "migrate"}, command):
		// `webhookd serve --help` must not start a server.
		if len(args) > 1 && isHelp(args[1]) {
			fmt.Fprint(stdout, usage)
			return nil
		}
		if len(args) > 1 {
			fmt.Fprint(stderr, usage)
			return fmt.Errorf("%s takes no arguments, not %q", command, args[1])
		}
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
	cfg, err := loadConfig(slog.New(slog.NewJSONHandler(stderr, nil)))
	if err != nil {
		return err
	}
	logger := newLogger(stderr, cfg)
	switch args[0] {
	case "serve":
		return serve(ctx, cfg, logger, role{api: true, worker: true})
	case "api":
		return serve(ctx, cfg, logger, role{api: true})
	case "worker":
		return serve(ctx, cfg, logger, role{worker: true})
	case "migrate":
		st, err := openStoreNow(ctx, cfg.DatabaseURL)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		defer st.Close()
		if err := st.Migrate(ctx); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		logger.Info("migrations applied")
		return nil
	default: // keys
		return keys(ctx, cfg, args[1:], stdout, stderr)
	}
}

// isHelp tells whether arg asks for the usage.
func isHelp(arg string) bool { return slices.Contains([]string{"help", "-h", "--help", "-help"}, arg) }

// newLogger is the process's one logger: JSON lines on stderr at
// WEBHOOKD_LOG_LEVEL, with a Redis outage told once per redisLogInterval
// rather than by every client at every attempt. The libraries that print
// on their own (go-redis, and whatever uses the standard log package) are
// routed to it, so that every line is JSON.
func newLogger(stderr io.Writer, cfg config) *slog.Logger {
	jsonLines := slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel})
	var services []outagelog.Service
	for _, addr := range cfg.redisConn.Addrs() {
		services = append(services, outagelog.Service{Name: "Redis", Variable: "WEBHOOKD_REDIS_URL", Addr: addr})
	}
	logger := slog.New(outagelog.NewHandler(jsonLines, redisLogInterval, services...))
	redis.SetLogger(redisLogger{logger.With("component", "go-redis")})
	slog.SetDefault(logger)
	return logger
}

// redisLogger is go-redis's logger as slog: go-redis otherwise prints its
// own plain-text lines on stderr. Its dial errors carry the address, which
// is how the outage handler recognises them.
type redisLogger struct{ logger *slog.Logger }

// Printf logs one go-redis message, as a warning: go-redis only speaks of
// trouble.
func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.logger.WarnContext(ctx, fmt.Sprintf(format, v...))
}

// versionLine is what `webhookd version` prints: the version, the commit
// the binary was built from (when the build recorded it) and the Go
// version.
func versionLine() string {
	commit, modified := "unknown", false
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if modified {
		commit += " with uncommitted changes"
	}
	return fmt.Sprintf("webhookd %s (commit %s, %s)", version, commit, runtime.Version())
}

// keys runs `keys create`: it stores a new API key for a merchant in the
// database of WEBHOOKD_DATABASE_URL and prints it on stdout.
func keys(ctx context.Context, cfg config, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, usage)
		return nil
	}
	if len(args) == 0 || args[0] != "create" {
		return errors.New("usage: webhookd keys create|list|revoke|roll --merchant ID …")
	}
	fs := flag.NewFlagSet("keys create", flag.ContinueOnError)
	fs.SetOutput(stderr)
	merchant := fs.String("merchant", "", "merchant id")
	scopes := fs.String("scopes", admin.ScopeRead+","+admin.ScopeWrite, "comma-separated scopes")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *merchant == "" {
		return errors.New("keys create: --merchant is required")
	}
	st, err := openStoreNow(ctx, cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("keys create: %w", err)
	}
	defer st.Close()
	issued, err := merchants.NewKeyIssuer(st.APIKeys, cfg.Environment, cfg.versions.Latest()).Create(ctx, *merchant, strings.Split(*scopes, ","))
	if err != nil {
		return fmt.Errorf("keys create: %w", err)
	}
	// The key works only against the engine that reads this database: say
	// which one, since an unset WEBHOOKD_DATABASE_URL means the default.
	// The id is what keys revoke and keys roll name.
	target := describeDatabase(cfg.DatabaseURL)
	fmt.Fprintf(stderr, "webhookd: keys create: stored key %s (%s) in database %s at %s (WEBHOOKD_DATABASE_URL)\n",
		issued.ID, issued.Prefix, target.database, target.addr)
	fmt.Fprintln(stdout, issued.Key)
	return nil
}

// handover serves one handler until told to serve another: the internal
// listener answers admin.Starting while the process waits for Postgres,
// then the real routes, on one socket bound throughout (closing and
// binding again would let another process take the port meanwhile).
type handover struct{ current atomic.Pointer[http.Handler] }

// ServeHTTP serves r with the current handler.
func (h *handover) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*h.current.Load()).ServeHTTP(w, r)
}

// to makes next the handler of every request from now on.
func (h *handover) to(next http.Handler) { h.current.Store(&next) }

// listeners are a process's bound sockets; public is nil for a worker.
type listeners struct{ public, internal net.Listener }

// bind binds the listeners before anything else, so that a port in use
// or a bad address fails at once, naming its variable, rather than after
// the wait for Postgres or after "listening" was logged.
func bind(cfg config, r role) (listeners, error) {
	var ls listeners
	var err error
	if ls.internal, err = listenOn("WEBHOOKD_INTERNAL_LISTEN", cfg.InternalListen); err != nil {
		return ls, err
	}
	if r.api {
		if ls.public, err = listenOn("WEBHOOKD_LISTEN", cfg.Listen); err != nil {
			_ = ls.internal.Close()
			return ls, err
		}
	}
	return ls, nil
}

// listenOn binds addr, which the variable named.
func listenOn(variable, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("configuration: %s: expected a free host:port to listen on: %w", variable, err)
	}
	return ln, nil
}

// loadTLS reads the public listener's certificate at start, so that a
// wrong path fails then rather than at the first connection.
func loadTLS(cfg config) (*tls.Config, error) {
	if cfg.TLSCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("configuration: WEBHOOKD_TLS_CERT, WEBHOOKD_TLS_KEY: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// serveHTTP serves h on ln in g until ctx is done, then shuts down
// gracefully; with tlsConfig set it serves TLS.
func serveHTTP(ctx context.Context, g *errgroup.Group, logger *slog.Logger, ln net.Listener, h http.Handler, tlsConfig *tls.Config) {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsConfig,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	logger.Info("listening", "addr", ln.Addr().String(), "tls", tlsConfig != nil)
	g.Go(func() error {
		var err error
		if tlsConfig != nil {
			err = hs.ServeTLS(ln, "", "")
		} else {
			err = hs.Serve(ln)
		}
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("serve on %s: %w", ln.Addr(), err)
	})
	g.Go(func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return hs.Shutdown(sctx)
	})
}

// warnOfDefaults warns of the settings whose default a serving process
// should not keep unnoticed.
func warnOfDefaults(cfg config, logger *slog.Logger) {
	cfg.warnGeneratedMasterKey(logger)
	if cfg.IngestToken == "" {
		logger.Warn("WEBHOOKD_INGEST_TOKEN unset: the internal API (/internal/v1, /debug) refuses every request with 401; set it to the token the producers send",
			"variable", "WEBHOOKD_INGEST_TOKEN")
	}
}

// serve runs the parts of role r until ctx is done.
func serve(ctx context.Context, cfg config, logger *slog.Logger, r role) (err error) {
	warnOfDefaults(cfg, logger)
	tlsConfig, err := loadTLS(cfg)
	if err != nil {
		return err
	}
	ls, err := bind(cfg, r)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	g, ctx := errgroup.WithContext(ctx)
	defer func() {
		// On a failed start, stop the listeners already serving. (After a
		// run, g has been waited for already and this changes nothing.)
		cancel()
		if stopErr := g.Wait(); err == nil {
			err = stopErr
		}
	}()
	// While it waits for Postgres the process is alive but not ready: a
	// probe meanwhile sees a process that is starting, not a closed port,
	// which an orchestrator would take for a crash.
	internal := &handover{}
	internal.to(admin.Starting(logger))
	serveHTTP(ctx, g, logger, ls.internal, internal, nil)
	if ls.public != nil {
		// Bound but not served until the API is built: connections wait in
		// the backlog rather than being refused.
		defer ls.public.Close()
	}

	// The API role applies migrations first; a worker alone waits for them.
	st, err := openStore(ctx, cfg, logger, r.api)
	if err != nil {
		return err
	}
	defer st.Close()
	var reads *store.Store
	if r.api {
		if reads, err = openReadStore(ctx, cfg); err != nil {
			return err
		}
		if reads != nil {
			defer reads.Close()
		}
	}
	rc := cfg.redisConn.NewClient()
	defer rc.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		store.NewPoolCollector(st.Pool()))
	inspector := asynq.NewInspector(cfg.asynqRedis())
	defer inspector.Close()
	reg.MustRegister(asynqmetrics.NewQueueMetricsCollector(inspector))

	sealer, err := signer.NewSealer(cfg.masterKey)
	if err != nil {
		return err
	}
	notifier, err := notify.NewMailer(cfg.SMTPURL, cfg.NotifyFrom, st.EndpointHealth, logger)
	if err != nil {
		return fmt.Errorf("configuration: WEBHOOKD_SMTP_URL: %w", err)
	}
	traces, err := startTracing(ctx, logger)
	if err != nil {
		return err
	}
	defer stopTracing(traces, logger)
	sandbox := cfg.sandbox()
	defer func() { _ = sandbox.Close(context.WithoutCancel(ctx)) }()
	payloads, err := payloadschema.New(payloadschema.Config{Mode: cfg.payloadValidation,
		Types: catalogue.New(cfg.eventTypes()).Entries(), Registerer: reg, Logger: logger})
	if err != nil {
		return err
	}
	d, err := dispatcher.New(dispatcher.Config{
		Store: st, Redis: cfg.asynqRedis(), Schedule: cfg.schedule, DeliveryTimeout: cfg.DeliveryTimeout,
		AllowHTTPTargets: cfg.AllowHTTPTargets, AllowPrivateTargets: cfg.AllowPrivateTargets,
		Concurrency: cfg.WorkerConcurrency, MerchantShare: cfg.MerchantShare, Sealer: sealer, MasterKey: cfg.masterKey, Notifier: notifier,
		Logger: logger, Registerer: reg, DefaultAPIVersion: cfg.versions.Latest(), SweepInterval: cfg.SweepInterval, ScheduleShards: cfg.ScheduleShards, Version: version,
		AutoDisableAfter: cfg.AutoDisableAfter,
		EventTypes:       cfg.eventTypes(), MaxPayloadBytes: cfg.MaxPayloadBytes, VersionUsable: cfg.versions.Usable,
		EgressProxy: cfg.egressProxy, TracerProvider: traces.Provider(), Kinds: cfg.kinds, Sandbox: sandbox,
		Payloads: payloads, PublishLinger: cfg.PublishLinger,
	})
	if err != nil {
		return err
	}
	defer d.Close()

	keyUsage := merchants.NewKeyUsage(st.APIKeys, st.Now, logger)
	srv, err := admin.New(admin.Config{
		Store: st, Redis: rc, Publisher: pipeline{d.Publisher, d.Redeliverer, d.Dropper}, Checker: d.Checker, Replays: d.Replays, Announcer: d.Emitter, Poller: d.Poller, Wakes: d.Wakes, Logger: logger, Registerer: reg, Gatherer: reg,
		Environment: cfg.Environment, Versions: cfg.versions, MasterKey: cfg.masterKey,
		IngestToken: cfg.IngestToken, RequireHTTPS: cfg.requireHTTPS(), TrustedProxies: cfg.trustedProxies,
		MaxBodyBytes: cfg.MaxBodyBytes, EventTypes: cfg.eventTypes(), MaxSubscriptions: cfg.MaxSubscriptions,
		AllowHTTPTargets: cfg.AllowHTTPTargets, AllowPrivateTargets: cfg.AllowPrivateTargets,
		TestEventRate: cfg.testEventRate, APIRate: cfg.apiRate, PortalSessionRate: cfg.portalSessionRate, PublicURL: cfg.PublicURL, KeyUsage: keyUsage,
		ListenerGrace: cfg.ListenerGrace, Portal: portal.New(portal.Config{FrameAncestors: cfg.frameAncestors}),
		ReadStore: reads, SourceAddresses: cfg.sourceAddrs, TracerProvider: traces.Provider(), Destinations: cfg.Destinations,
		Kinds: cfg.kinds, MaxLongPollsPerMerchant: cfg.MaxLongPolls, MaxListenersPerMerchant: cfg.MaxListeners,
		Transformations: sandbox,
	})
	if err != nil {
		return err
	}
	defer srv.Close()

	if r.api {
		serveHTTP(ctx, g, logger, ls.public, srv.Public(), tlsConfig)
		g.Go(func() error { return keyUsage.Run(ctx, merchants.UsageFlushInterval) })
	}
	internal.to(srv.Internal())
	if r.worker {
		g.Go(func() error { return d.Run(ctx) })
	}
	if procs.Enabled(os.Getenv) {
		// Light load runs on one P, load on the runtime's default
		// (internal/procs; GOMAXPROCS set by the operator turns it off).
		governor, err := procs.New(procs.Config{Logger: logger})
		if err != nil {
			return err
		}
		g.Go(func() error { return governor.Run(ctx) })
	}
	if gcpace.Enabled(os.Getenv) {
		// A small heap is collected against a goal of at least 64 MiB
		// (internal/gcpace; GOGC or GOMEMLIMIT set by the operator turns
		// it off).
		pacer, err := gcpace.New(gcpace.Config{Logger: logger})
		if err != nil {
			return err
		}
		g.Go(func() error { return pacer.Run(ctx) })
	}
	logger.Info("webhookd started", "api", r.api, "worker", r.worker, "environment", cfg.Environment)
	err = g.Wait()
	logger.Info("webhookd stopped")
	return err
}

// pipeline is the dispatcher's pieces that admin's Publisher calls: the
// publisher, the redeliverer and the dropper, each method its own.
type pipeline struct {
	*publish.Publisher
	*publish.Redeliverer
	*deliver.Dropper
}

// The mailer is both notifiers the pipeline knows: of deliveries that
// failed for good and of subscriptions the engine disabled.
var (
	_ deliver.Notifier         = (*notify.Mailer)(nil)
	_ maintain.DisableNotifier = (*notify.Mailer)(nil)
)
