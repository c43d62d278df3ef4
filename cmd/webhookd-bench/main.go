// Command webhookd-bench measures a running webhookd: it publishes events
// through the engine's internal API, receives the deliveries on its own
// HTTP receivers on 127.0.0.1 (verifying every signature with package
// signer), checks in Postgres that each attempt was recorded, and reports
// throughput, latency, isolation from hanging receivers, fan-out time, the
// machine's raw HTTP ceiling and the storage footprint. See BENCHMARKS.md.
//
// Usage:
//
//	webhookd-bench -scenario all -token "$WEBHOOKD_INGEST_TOKEN" [-json]
//
// Every scenario is bounded in count and in time (-duration), and all
// traffic stays on 127.0.0.1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/producer"
)

// scenarios in the order -scenario all runs them: the ones that leave
// retrying deliveries behind (footprint's closed port, the hanging
// receivers of noisy and noisy5) come last so they cannot slow the others.
var scenarios = []string{"raw", "throughput", "latency", "fanout", "ordered", "single", "footprint", "noisy", "noisy5"}

// ownScenarios run only when named: they need the engine started with
// settings of their own (see usage), which the bench cannot set, or they
// are the isolation scenarios of issue 24, which leave hanging and
// throttled work behind and take minutes each.
var ownScenarios = []string{"retrystorm", "hostile", "spread", "burst", "solofanout", "backlog", "ratelimited"}

// usage prints what each scenario needs besides the flags.
func usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprintf(w, `Usage: webhookd-bench -scenario NAME|all -token TOKEN [flags]

-scenario all runs %s.

single      one merchant, one subscription, 20,000 events of a ~1 KiB payout
            payload, one event per request from 32 publishers, as fast as the
            engine accepts them; also reports the sweeper's re-queues (none
            are expected).
retrystorm  not in all: 10,000 events to 10 subscriptions whose receivers
            answer 500 to the first attempt of every delivery and 204 to the
            second. Start the engine with a 1 s first retry, e.g.
              WEBHOOKD_RETRY_SCHEDULE=1s,2s,4s,8s,16s webhookd serve
            The bench cannot set the engine's environment: it probes the
            first retry delay before the run and refuses if it is over %s.

The isolation scenarios (issue 24), not in all, each measure one merchant's
publish → arrival alone ("solo") and beside another merchant's load
("beside"), each phase -phase long, or whether fan-out uses the pool:
hostile     a merchant with -hanging (5) subscriptions that never answer,
            publishing -load-rate (20) events/s, beside one publishing -rate
            (10) events/s to a fast receiver.
spread      -merchants (20) × -subscriptions (100) receivers answering in
            -delay (1s), one event per merchant, in -batch batches: the most
            connections open at once and the time until all arrive, against
            -workers. Every receiver on one host and port (a receiving
            platform all the merchants use), unless -listeners is given.
burst       one merchant's burst of -events (5,000) to its fast receiver,
            batched as fast as accepted, beside one publishing -rate (10)/s.
solofanout  one merchant, one event to -subscriptions (100) receivers
            answering in -delay (1s): connections and time, against -workers.
backlog     -merchants (50) × one subscription publishing -rate (50) events/s
            together, beside a merchant with -backlog (10,000) deliveries
            queued to a receiver answering in -delay (1s).
ratelimited a subscription with rate_limit 1 and -backlog (5,000) queued
            deliveries beside a merchant publishing -rate (10)/s, then the
            subscription deleted: the other's latency after it, and what the
            deleted one still gets (arrivals, deferrals, pending deliveries).
-workers is the engine's worker slots over all its processes
(WEBHOOKD_WORKER_CONCURRENCY × workers): the bench cannot read it.

With several engine processes (webhookd api + webhookd worker ...), give
every pid to -pid and every internal URL to -metrics.

Flags:
`, strings.Join(scenarios, ", "), retryProbeLimit)
	fs.PrintDefaults()
}

// config is the command line.
type config struct {
	scenario      string
	events        int
	rate          float64
	subscriptions int
	payload       int
	concurrency   int
	publishers    int
	batch         int
	pending       int
	listeners     int
	jsonOut       bool
	api           string
	internal      string
	token         string
	redisURL      string
	databaseURL   string
	merchant      string
	duration      time.Duration
	// pids are the engine's processes (one `serve`, or an `api` and its
	// `worker`s): their CPU and RSS are summed.
	pids []int
	// metricsURLs are the internal base URLs whose /metrics are scraped
	// and summed: every engine process has its own counters.
	metricsURLs []string
	// The isolation scenarios' (issue 24): see usage.
	phase     time.Duration
	warmup    time.Duration
	delay     time.Duration
	hanging   int
	loadRate  float64
	merchants int
	backlog   int
	workers   int
	// listenersSet: -listeners was given (spread otherwise puts every
	// receiver on one port).
	listenersSet bool
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("webhookd-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.scenario, "scenario", "all", "scenario: "+strings.Join(append(slices.Clone(scenarios), ownScenarios...), ", ")+", or all")
	fs.IntVar(&c.events, "events", 0, "events to publish (0: the scenario's default)")
	fs.Float64Var(&c.rate, "rate", 0, "publish rate in events/s for latency, noisy and noisy5 (0: the scenario's default, 500); the probe merchants' rate in hostile, burst, backlog, ratelimited")
	fs.IntVar(&c.subscriptions, "subscriptions", 0, "subscriptions (receivers); merchants in noisy and noisy5; per merchant in spread (0: the scenario's default)")
	fs.IntVar(&c.payload, "payload", 0, "payload size in bytes (0: the scenario's default; footprint uses 1024)")
	fs.IntVar(&c.concurrency, "concurrency", 256, "concurrent senders in the raw scenario (webhookd's default worker concurrency is 256)")
	fs.IntVar(&c.publishers, "publishers", 0, fmt.Sprintf("concurrent publish requests (0: the scenario's default, %d; single: %d)", defaultPublishers, singlePublishers))
	fs.IntVar(&c.batch, "batch", 100, "events per publish request in throughput, ordered, footprint and retrystorm (1: no batching)")
	fs.IntVar(&c.pending, "pending", 100000, "pending deliveries for the footprint scenario's Redis and RSS figures")
	fs.IntVar(&c.listeners, "listeners", 1000, "at most this many receiver ports; subscriptions beyond share them")
	fs.DurationVar(&c.phase, "phase", isolationPhase, "isolation scenarios: how long each measured phase publishes")
	fs.DurationVar(&c.warmup, "warmup", isolationWarmup, "hostile: how long the hostile load runs before the beside phase")
	fs.DurationVar(&c.delay, "delay", answerDelay, "spread, solofanout, backlog: how long the receivers take to answer")
	fs.IntVar(&c.hanging, "hanging", 0, fmt.Sprintf("hostile: hanging subscriptions of the hostile merchant (0: %d)", hostileHanging))
	fs.Float64Var(&c.loadRate, "load-rate", 0, fmt.Sprintf("hostile: the hostile merchant's events/s (0: %d)", hostileRate))
	fs.IntVar(&c.merchants, "merchants", 0, fmt.Sprintf("spread, backlog: merchants (0: %d, %d)", spreadMerchants, backlogMerchants))
	fs.IntVar(&c.backlog, "backlog", 0, fmt.Sprintf("backlog, ratelimited: deliveries queued (0: %d, %d)", backlogDeliveries, ratelimitedBacklog))
	fs.IntVar(&c.workers, "workers", 0, "spread, solofanout: the engine's worker slots over all its processes, to judge connections and time (0: not judged)")
	fs.BoolVar(&c.jsonOut, "json", false, "print one JSON object per scenario instead of tables")
	fs.StringVar(&c.api, "api", envOr("WEBHOOKD_BENCH_API", "http://127.0.0.1:8080"), "public API base URL")
	fs.StringVar(&c.internal, "internal", envOr("WEBHOOKD_BENCH_INTERNAL", "http://127.0.0.1:8081"), "internal API base URL")
	fs.StringVar(&c.token, "token", os.Getenv("WEBHOOKD_INGEST_TOKEN"), "ingest token (default $WEBHOOKD_INGEST_TOKEN)")
	fs.StringVar(&c.redisURL, "redis", envOr("WEBHOOKD_REDIS_URL", "redis://127.0.0.1:6379/0"), "the engine's Redis, for memory and CPU figures")
	fs.StringVar(&c.databaseURL, "database", envOr("WEBHOOKD_DATABASE_URL", "postgres://127.0.0.1:5432/webhookd?sslmode=disable"), "the engine's Postgres, to check recorded attempts and sizes")
	fs.StringVar(&c.merchant, "merchant", fmt.Sprintf("bench-%d", time.Now().Unix()), "merchant id prefix, fresh per run so runs do not interfere")
	fs.DurationVar(&c.duration, "duration", 5*time.Minute, "time cap per scenario (publishing and waiting for deliveries)")
	pids := fs.String("pid", "", "engine pid, or a comma-separated list of them (an api and its workers), for CPU and RSS from /proc; without it, process_* metrics from -metrics")
	metricsURLs := fs.String("metrics", "", "comma-separated internal base URLs whose /metrics are summed (default: -internal); with several engine processes list every one's")
	fs.Usage = func() { usage(fs) }
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	fs.Visit(func(f *flag.Flag) { c.listenersSet = c.listenersSet || f.Name == "listeners" })
	var err error
	if c.pids, err = parsePIDs(*pids); err != nil {
		return c, err
	}
	c.metricsURLs = []string{c.internal}
	if *metricsURLs != "" {
		c.metricsURLs = splitList(*metricsURLs)
	}
	if c.scenario != "all" && !slices.Contains(scenarios, c.scenario) && !slices.Contains(ownScenarios, c.scenario) {
		return c, fmt.Errorf("unknown -scenario %q", c.scenario)
	}
	if c.token == "" && c.scenario != "raw" {
		return c, errors.New("-token (or WEBHOOKD_INGEST_TOKEN) is required to publish")
	}
	if c.events < 0 || c.subscriptions < 0 || c.payload < 0 || c.rate < 0 || c.pending < 0 || c.publishers < 0 {
		return c, errors.New("-events, -subscriptions, -payload, -rate, -pending and -publishers must not be negative")
	}
	if c.concurrency < 1 || c.batch < 1 || c.listeners < 1 || c.duration <= 0 || c.phase <= 0 {
		return c, errors.New("-concurrency, -batch, -listeners, -duration and -phase must be positive")
	}
	if c.hanging < 0 || c.loadRate < 0 || c.merchants < 0 || c.backlog < 0 || c.workers < 0 || c.delay < 0 || c.warmup < 0 {
		return c, errors.New("-hanging, -load-rate, -merchants, -backlog, -workers, -delay and -warmup must not be negative")
	}
	return c, nil
}

// splitList splits a comma-separated flag value, dropping spaces and
// empty items.
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// parsePIDs reads -pid: empty, or distinct positive pids separated by
// commas. A pid listed twice would count its CPU twice, so it is refused.
func parsePIDs(s string) ([]int, error) {
	var pids []int
	for _, item := range splitList(s) {
		pid, err := strconv.Atoi(item)
		if err != nil || pid < 1 {
			return nil, fmt.Errorf("-pid: %q is not a process id", item)
		}
		if slices.Contains(pids, pid) {
			return nil, fmt.Errorf("-pid: %d listed twice", pid)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "webhookd-bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "webhookd-bench:", err)
		os.Exit(1)
	}
}

// bench holds the connections every scenario shares.
type bench struct {
	cfg config
	eng *engine
	db  *pgxpool.Pool
	rdb redis.UniversalClient
	// postmaster is the pid of the Postgres server the engine uses, when it
	// runs on this machine; 0: every postgres process counts.
	postmaster int
	log        io.Writer
	reports    []*report
}

func run(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	b := &bench{cfg: cfg, log: stderr,
		eng: newEngine(cfg.api, cfg.internal, cfg.token, max(cfg.publishers, singlePublishers))}
	todo := scenarios
	if cfg.scenario != "all" {
		todo = []string{cfg.scenario}
	}
	if cfg.scenario != "raw" {
		db, err := pgxpool.New(ctx, cfg.databaseURL)
		if err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		defer db.Close()
		if err := db.Ping(ctx); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		b.db = db
		pid, err := backendPID(ctx, db)
		if err == nil {
			b.postmaster, err = postmasterOf(pid)
		}
		if err != nil {
			b.logf("Postgres CPU counts every postgres process on this machine: %v", err)
		}
		// The engine's parser: every form WEBHOOKD_REDIS_URL takes. On a
		// Cluster, INFO (memory, CPU) is one node's.
		conn, err := producer.ParseRedisURL(cfg.redisURL)
		if err != nil {
			return fmt.Errorf("redis: %w", err)
		}
		b.rdb = conn.NewClient()
		defer b.rdb.Close()
		if err := b.rdb.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("redis: %w", err)
		}
	}
	var failed []string
	for _, name := range todo {
		if ctx.Err() != nil {
			break
		}
		b.logf("scenario %s: starting", name)
		r, err := b.runScenario(ctx, name)
		if err != nil {
			b.logf("scenario %s: %v", name, err)
			failed = append(failed, name)
			if r == nil {
				r = &report{scenario: name}
			}
			r.note("error: %v", err)
		}
		b.reports = append(b.reports, r)
		if err := r.write(stdout, cfg.jsonOut); err != nil {
			return err
		}
	}
	if !cfg.jsonOut {
		writeSummary(stdout, b.reports)
	}
	if len(failed) > 0 {
		return fmt.Errorf("scenarios failed: %s", strings.Join(failed, ", "))
	}
	return ctx.Err()
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.log, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func (b *bench) runScenario(ctx context.Context, name string) (*report, error) {
	// -duration caps each phase (footprint has two); set-up, the final
	// measurements and clean-up get time on top.
	ctx, cancel := context.WithTimeout(ctx, 2*b.cfg.duration+5*time.Minute)
	defer cancel()
	switch name {
	case "raw":
		return b.raw(ctx)
	case "throughput":
		return b.throughput(ctx)
	case "latency":
		return b.latency(ctx)
	case "noisy":
		return b.noisy(ctx, "noisy", 1)
	case "noisy5":
		return b.noisy(ctx, "noisy5", noisy5Hanging)
	case "fanout":
		return b.fanout(ctx)
	case "ordered":
		return b.ordered(ctx)
	case "footprint":
		return b.footprint(ctx)
	case "single":
		return b.single(ctx)
	case "retrystorm":
		return b.retrystorm(ctx)
	case "hostile":
		return b.hostile(ctx)
	case "spread":
		return b.spread(ctx)
	case "burst":
		return b.burst(ctx)
	case "solofanout":
		return b.solofanout(ctx)
	case "backlog":
		return b.backlogScenario(ctx)
	case "ratelimited":
		return b.ratelimited(ctx)
	}
	return nil, fmt.Errorf("unknown scenario %q", name)
}

// orDefault returns the flag value when set, else the scenario's default.
func orDefault[T int | float64](flagValue, def T) T {
	if flagValue > 0 {
		return flagValue
	}
	return def
}
