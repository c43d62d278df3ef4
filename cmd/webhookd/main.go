// Command webhookd runs the webhook delivery engine: `serve` (everything in
// one process), `api` and `worker` (the roles split), `migrate`, and
// `keys create`. It only wires packages together.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
	asynqmetrics "github.com/hibiken/asynq/x/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	goretry "github.com/sethvargo/go-retry"
	"golang.org/x/sync/errgroup"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/signer"
	"github.com/webhookd/webhookd/store"
)

// version names this build in the user-agent of deliveries.
var version = "dev"

const usage = `usage: webhookd <command>

commands:
  serve                                  public API, internal API, worker and scheduler in one process
  api                                    public and internal API only
  worker                                 worker and scheduler only (with the internal listener)
  migrate                                apply the database migrations and exit
  keys create --merchant ID --scopes a,b print a new API key on the last line

configuration: WEBHOOKD_* environment variables (see README.md)
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "webhookd:", err)
		os.Exit(1)
	}
}

// role says which parts a process runs.
type role struct{ api, worker bool }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("a command is required")
	}
	logger := slog.New(slog.NewJSONHandler(stderr, nil))
	cfg, err := loadConfig(logger)
	if err != nil {
		return err
	}
	logger = slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	switch args[0] {
	case "serve":
		return serve(ctx, cfg, logger, role{api: true, worker: true})
	case "api":
		return serve(ctx, cfg, logger, role{api: true})
	case "worker":
		return serve(ctx, cfg, logger, role{worker: true})
	case "migrate":
		if err := store.Migrate(ctx, cfg.DatabaseURL); err != nil {
			return err
		}
		logger.Info("migrations applied")
		return nil
	case "keys":
		return keys(ctx, cfg, args[1:], stdout)
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}

func keys(ctx context.Context, cfg config, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "create" {
		return errors.New("usage: webhookd keys create --merchant ID --scopes webhooks:read,webhooks:write")
	}
	fs := flag.NewFlagSet("keys create", flag.ContinueOnError)
	merchant := fs.String("merchant", "", "merchant id")
	scopes := fs.String("scopes", admin.ScopeRead+","+admin.ScopeWrite, "comma-separated scopes")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *merchant == "" {
		return errors.New("keys create: --merchant is required")
	}
	st, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	key, err := admin.IssueAPIKey(ctx, st, cfg.Environment, cfg.versions.Latest(), *merchant, strings.Split(*scopes, ","))
	if err != nil {
		return fmt.Errorf("keys create: %w", err)
	}
	fmt.Fprintln(stdout, key)
	return nil
}

// openStore connects to Postgres (and migrates when migrate is set). A
// process started while Postgres is still coming up (both restarted at
// once, a failover) waits for it with backoff, up to
// WEBHOOKD_STARTUP_TIMEOUT, rather than exiting; Redis needs no wait, its
// clients reconnect by themselves.
func openStore(ctx context.Context, cfg config, logger *slog.Logger, migrate bool) (*store.Store, error) {
	var st *store.Store
	backoff := goretry.WithCappedDuration(5*time.Second, goretry.NewExponential(100*time.Millisecond))
	err := goretry.Do(ctx, goretry.WithMaxDuration(cfg.StartupTimeout, backoff), func(ctx context.Context) error {
		s, err := store.Open(ctx, cfg.DatabaseURL)
		if err == nil && migrate {
			if err = s.Migrate(ctx); err != nil {
				s.Close()
			}
		}
		if err != nil {
			logger.Warn("postgres not ready; retrying", "error", err)
			return goretry.RetryableError(err)
		}
		st = s
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	return st, nil
}

// startStore is openStore with the internal listener answering
// admin.Starting meanwhile (alive, not ready), so that a probe during a
// long wait for Postgres sees a process starting rather than a closed port.
// The listener is closed before serve opens it with the real handler.
func startStore(ctx context.Context, cfg config, logger *slog.Logger, migrate bool) (*store.Store, error) {
	ln, err := net.Listen("tcp", cfg.InternalListen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.InternalListen, err)
	}
	hs := &http.Server{Handler: admin.Starting(logger), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	go func() { _ = hs.Serve(ln) }() // ErrServerClosed once startStore returns
	defer func() {
		_ = hs.Close()
		_ = ln.Close() // at once, not when Serve gets round to it: serve binds the address next
	}()
	return openStore(ctx, cfg, logger, migrate)
}

func serve(ctx context.Context, cfg config, logger *slog.Logger, r role) error {
	// The API role applies migrations first; a worker alone waits for them.
	st, err := startStore(ctx, cfg, logger, r.api)
	if err != nil {
		return err
	}
	defer st.Close()
	rc := redis.NewClient(cfg.redisOpts)
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
	notifier, err := dispatcher.NewMailNotifier(cfg.SMTPURL, cfg.NotifyFrom, st, logger)
	if err != nil {
		return fmt.Errorf("configuration: WEBHOOKD_SMTP_URL: %w", err)
	}
	d, err := dispatcher.New(dispatcher.Config{
		Store: st, Redis: cfg.asynqRedis(), Schedule: cfg.schedule, DeliveryTimeout: cfg.DeliveryTimeout,
		AllowHTTPTargets: cfg.AllowHTTPTargets, AllowPrivateTargets: cfg.AllowPrivateTargets,
		Concurrency: cfg.WorkerConcurrency, Sealer: sealer, Notifier: notifier,
		Logger: logger, Registerer: reg, DefaultAPIVersion: cfg.versions.Latest(), SweepInterval: cfg.SweepInterval, Version: version,
	})
	if err != nil {
		return err
	}
	defer d.Close()

	srv, err := admin.New(admin.Config{
		Store: st, Redis: rc, Publisher: d, Logger: logger, Registerer: reg, Gatherer: reg,
		Environment: cfg.Environment, Versions: cfg.versions, MasterKey: cfg.masterKey,
		IngestToken: cfg.IngestToken, RequireHTTPS: cfg.requireHTTPS(), TrustedProxies: cfg.trustedProxies,
		MaxBodyBytes: cfg.MaxBodyBytes, MaxPayloadBytes: cfg.MaxPayloadBytes, EventTypes: cfg.eventTypes(),
		AllowHTTPTargets: cfg.AllowHTTPTargets, AllowPrivateTargets: cfg.AllowPrivateTargets,
		TestEventRate: cfg.testEventRate, APIRate: cfg.apiRate,
	})
	if err != nil {
		return err
	}

	g, ctx := errgroup.WithContext(ctx)
	listen := func(addr string, h http.Handler, tls bool) {
		hs := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
		g.Go(func() error {
			logger.Info("listening", "addr", addr, "tls", tls)
			var err error
			if tls {
				err = hs.ListenAndServeTLS(cfg.TLSCert, cfg.TLSKey)
			} else {
				err = hs.ListenAndServe()
			}
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return fmt.Errorf("listen on %s: %w", addr, err)
		})
		g.Go(func() error {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return hs.Shutdown(sctx)
		})
	}
	if r.api {
		listen(cfg.Listen, srv.Public(), cfg.TLSCert != "")
	}
	listen(cfg.InternalListen, srv.Internal(), false)
	if r.worker {
		g.Go(func() error { return d.Run(ctx) })
	}
	logger.Info("webhookd started", "api", r.api, "worker", r.worker, "environment", cfg.Environment)
	err = g.Wait()
	logger.Info("webhookd stopped")
	return err
}
