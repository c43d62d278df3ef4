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
//
// The pieces, by role: flags.go reads the command line; lab.go is what
// every scenario shares (fleet.go sets up receivers and subscriptions,
// load.go publishes, meter.go reads the engine's figures, deliver.go is the
// publish-and-wait run most scenarios are made of, report.go prints);
// engine.go talks to the engine's APIs and receiver.go is the bench's own
// receivers. Each scenario family is a file of functions of a lab: raw.go,
// throughput.go (throughput, latency, fanout), noisy.go, ordered.go,
// single.go, footprint.go, retrystorm.go, the isolation scenarios of
// issue 24 in isolation.go and pool.go, single's workload with a
// feature on in batched.go, mtls.go, jwe.go and broker.go, and the scale
// curve of issue 30 in scale.go (its plot in scaleplot.go); peer.go
// drives webhookd or Hookdeck Outpost with one light generator (issue 42).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhookd/webhookd/producer"
)

// scenarios in the order -scenario all runs them: the ones that leave
// retrying deliveries behind (footprint's closed port, the hanging
// receivers of noisy and noisy5) come last so they cannot slow the others.
var scenarios = []string{"raw", "throughput", "latency", "fanout", "ordered", "single", "footprint", "noisy", "noisy5"}

// ownScenarios run only when named: they need the engine started with
// settings of their own (see usage), which the bench cannot set, or they
// are the isolation scenarios of issue 24, which leave hanging and
// throttled work behind and take minutes each, or they are single's
// workload with a feature on (batched; mtls and jwe of issue 26; broker of
// issue 27, which needs a RabbitMQ), read against single's figures; or poll
// (issue 28), reading poll subscriptions instead of receiving; or the
// scale curve of issue 30, which needs a shrunk retry schedule and runs
// for as long as its points take; or transform (issue 40), single's
// workload through a transformation, and spinning, hostile's shape with
// scripts spinning at their CPU limit; or peer (issue 42), webhookd or
// Hookdeck Outpost under one light load generator.
var ownScenarios = []string{"retrystorm", "hostile", "spread", "burst", "solofanout", "backlog", "ratelimited",
	"batched", "mtls", "jwe", "broker", "poll", "scale", "transform", "spinning", "peer"}

// main parses the flags, runs until done or interrupted, and exits 2 on a
// bad command line, 1 when a scenario failed.
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

// run connects to the engine's Postgres and Redis (not for raw, which
// needs no engine), runs the scenarios cfg names in order and prints each
// report as it completes, then the targets of all of them.
func run(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	eng := newEngine(cfg.api, cfg.internal, cfg.token, max(cfg.publishers, singlePublishers))
	logf := progressTo(stderr)
	l := &lab{cfg: cfg, eng: eng, logf: logf,
		fleets: &fleetMaker{eng: eng, listeners: cfg.listeners, logf: logf},
		load:   &loadGen{eng: eng, publishers: cfg.publishers},
		meter:  &meter{eng: eng, pids: cfg.pids, metricsURLs: cfg.metricsURLs}}
	todo := cfg.todo
	if cfg.needsEngine() {
		db, err := pgxpool.New(ctx, cfg.databaseURL)
		if err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		defer db.Close()
		if err := db.Ping(ctx); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		l.meter.db = db
		pid, err := backendPID(ctx, db)
		if err == nil {
			l.meter.postmaster, err = postmasterOf(pid)
		}
		if err != nil {
			logf("Postgres CPU counts every postgres process on this machine: %v", err)
		}
		// The engine's parser: every form WEBHOOKD_REDIS_URL takes. On a
		// Cluster, INFO (memory, CPU) is one node's.
		conn, err := producer.ParseRedisURL(cfg.redisURL)
		if err != nil {
			return fmt.Errorf("redis: %w", err)
		}
		rdb := conn.NewClient()
		defer rdb.Close()
		if err := rdb.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("redis: %w", err)
		}
		l.meter.rdb = rdb
	}
	var failed []string
	for _, name := range todo {
		if ctx.Err() != nil {
			break
		}
		logf("scenario %s: starting", name)
		scheduleBefore := l.masterScheduleCalls(ctx)
		r, err := runScenario(ctx, l, name)
		if r != nil {
			reportMasterSpread(r, scheduleBefore, l.masterScheduleCalls(ctx))
		}
		if err != nil {
			logf("scenario %s: %v", name, err)
			failed = append(failed, name)
			if r == nil {
				r = &report{scenario: name}
			}
			r.note("error: %v", err)
		}
		l.reports = append(l.reports, r)
		if err := r.write(stdout, cfg.jsonOut); err != nil {
			return err
		}
	}
	if !cfg.jsonOut {
		writeSummary(stdout, l.reports)
	}
	if len(failed) > 0 {
		return fmt.Errorf("scenarios failed: %s", strings.Join(failed, ", "))
	}
	return ctx.Err()
}

// runScenario runs the scenario called name on l, within its time.
func runScenario(ctx context.Context, l *lab, name string) (*report, error) {
	if name == "scale" {
		// Each of its points is capped by -duration per phase instead.
		return scale(ctx, l)
	}
	// -duration caps each phase (footprint has two); set-up, the final
	// measurements and clean-up get time on top.
	ctx, cancel := context.WithTimeout(ctx, 2*l.cfg.duration+5*time.Minute)
	defer cancel()
	switch name {
	case "raw":
		return raw(ctx, l)
	case "throughput":
		return throughput(ctx, l)
	case "latency":
		return latency(ctx, l)
	case "noisy":
		return noisy(ctx, l, "noisy", 1)
	case "noisy5":
		return noisy(ctx, l, "noisy5", noisy5Hanging)
	case "fanout":
		return fanout(ctx, l)
	case "ordered":
		return ordered(ctx, l)
	case "footprint":
		return footprint(ctx, l)
	case "single":
		return single(ctx, l)
	case "retrystorm":
		return retrystorm(ctx, l)
	case "hostile":
		return hostile(ctx, l)
	case "spread":
		return spread(ctx, l)
	case "burst":
		return burst(ctx, l)
	case "solofanout":
		return solofanout(ctx, l)
	case "backlog":
		return backlogScenario(ctx, l)
	case "ratelimited":
		return ratelimited(ctx, l)
	case "batched":
		return batched(ctx, l)
	case "mtls":
		return mtls(ctx, l)
	case "jwe":
		return jweScenario(ctx, l)
	case "broker":
		return broker(ctx, l)
	case "poll":
		return pollScenario(ctx, l)
	case "peer":
		return peer(ctx, l)
	case "transform":
		return transformScenario(ctx, l)
	case "spinning":
		return spinningScenario(ctx, l)
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
