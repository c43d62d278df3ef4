package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// usage prints what each scenario needs besides the flags.
func usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprintf(w, `Usage: webhookd-bench -scenario NAME[,NAME...]|all -token TOKEN [flags]

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
batched     single to a subscription with batch {max_size 100, max_wait_ms
            200}: deliveries/s and CPU per delivery beside single's, and
            the requests it took.
ratelimited a subscription with rate_limit 1 and -backlog (5,000) queued
            deliveries beside a merchant publishing -rate (10)/s, then the
            subscription deleted: the other's latency after it, and what the
            deleted one still gets (arrivals, deferrals, pending deliveries).

Single's workload with a feature of issues 26 and 27 on, not in all; each
shows single's figures beside its own when single ran before it in the
same invocation (-scenario single,mtls,jwe,broker):
mtls        to an HTTPS receiver requiring a client certificate
            (RequireAndVerifyClientCert), with a CA the bench makes, given as
            the subscription's authentication; also the TLS handshakes and
            connections the receiver saw.
jwe         to a subscription with encryption to a -jwe-key (ec) key pair
            the bench makes; the receiver verifies, then decrypts with
            go-jose, before counting a delivery.
broker      to a broker destination of -broker-kind, one target per
            subscription, which the bench sets up, consumes (verifying each
            message) and deletes at the end. rabbitmq (-amqp): an exchange
            and a durable queue bound to it each. nats (-nats): a subject
            each, one JetStream file stream for the run, an ephemeral
            consumer per subject. mqtt (-mqtt): a topic each, a client per
            topic subscribed at QoS 1 before publishing. Start the engine
            with WEBHOOKD_ALLOW_PRIVATE_TARGETS=true (a broker on 127.0.0.1)
            and WEBHOOKD_ALLOW_HTTP_TARGETS=true (a broker in clear).

scale       not in all: how cost grows with the work. Backlog points
            (-scale-backlog, %s deliveries): queued over %d merchants ×
            %d subscriptions while the receivers answer 503, then released.
            Merchants points (-scale-merchants, %s): merchants × %d
            subscriptions, -rate (%d) events/s spread over them, at least one
            event each. Per point: deliveries/s, CPU ms per delivery, a light
            merchant's p99 (%d events/s), database size, Redis used_memory;
            -scale-plot FILE.png plots them. Start the engine with
              WEBHOOKD_RETRY_SCHEDULE=$(printf '1s,%%.0s' {1..59})1s
            (a released backlog starts within a second, and no delivery runs
            out of attempts while down); a probe refuses the run when a delay
            between its first %d attempts is over %s. scripts/bench-scale.sh
            runs it against 1 api + 1 worker and 1 api + 3 workers.
poll        -events (20,000) published in -batch batches to -subscriptions (4)
            poll subscriptions of one merchant, each read by its own poller
            (long polling, 100 per page, acknowledging by iterator, every
            signature verified): items read per second and CPU per item.

-workers is the engine's worker slots over all its processes
(WEBHOOKD_WORKER_CONCURRENCY × workers): the bench cannot read it.

With several engine processes (webhookd api + webhookd worker ...), give
every pid to -pid and every internal URL to -metrics.

Flags:
`, strings.Join(scenarios, ", "), retryProbeLimit, scaleBacklogDefault, scaleBacklogMerchants, scaleSubsPerMerchant,
		scaleMerchantDefault, scaleSubsPerMerchant, scaleMerchantRate, scaleLightRate, scaleProbeAttempts, scaleReleaseLimit)
	fs.PrintDefaults()
}

// config is the command line.
type config struct {
	// scenario is -scenario as given; todo the scenarios it names, in the
	// order to run them.
	scenario      string
	todo          []string
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
	// jweKey is the jwe scenario's key kind, jweKeyEC or jweKeyRSA.
	jweKey string
	// brokerKind is the broker scenario's destination type, one of
	// brokerKinds.
	brokerKind string
	// amqpURL is the broker scenario's RabbitMQ, as the engine reaches it;
	// natsURL its NATS server, mqttAddr its MQTT broker (host:port).
	amqpURL  string
	natsURL  string
	mqttAddr string
	// scaleBacklog and scaleMerchants are the scale scenario's points,
	// scalePlot where it writes its plot ("": none).
	scaleBacklog, scaleMerchants []int
	scalePlot                    string
	// scaleBacklogMerchants is how many merchants a backlog point's
	// deliveries are spread over.
	scaleBacklogMerchants int
	// listenersSet: -listeners was given (spread otherwise puts every
	// receiver on one port).
	listenersSet bool
	// peer is the engine the peer scenario drives (peerWebhookd or
	// peerOutpost); peerAPI and peerKey are Outpost's API and its key.
	peer, peerAPI, peerKey string
	// diskProbe is -disk-probe: where the peer scenario times disk
	// flushes during its measured run ("": it does not).
	diskProbe string
}

// parseFlags reads the command line and checks its bounds.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("webhookd-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.scenario, "scenario", "all", "scenario, or a comma-separated list run in its order: "+strings.Join(append(slices.Clone(scenarios), ownScenarios...), ", ")+", or all")
	fs.IntVar(&c.events, "events", 0, "events to publish (0: the scenario's default)")
	fs.Float64Var(&c.rate, "rate", 0, "publish rate in events/s for latency, noisy and noisy5 (0: the scenario's default, 500) and peer (0: as fast as -publishers allow); the probe merchants' rate in hostile, burst, backlog, ratelimited")
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
	fs.StringVar(&c.jweKey, "jwe-key", jweKeyEC, "jwe: the encryption key pair, ec (P-256, ECDH-ES+A256KW) or rsa (2048 bits, RSA-OAEP-256)")
	fs.StringVar(&c.brokerKind, "broker-kind", brokerKinds()[0].name, "broker: the destination type, "+strings.Join(brokerKindNames(), ", "))
	fs.StringVar(&c.amqpURL, "amqp", defaultAMQP, "broker: the RabbitMQ URL, for the engine's destination and the bench's consumer")
	fs.StringVar(&c.natsURL, "nats", defaultNATS, "broker: the NATS server with JetStream, nats://host:port (tls:// for TLS, user:password@ or token@ allowed), for the engine's destination and the bench's consumer")
	fs.StringVar(&c.mqttAddr, "mqtt", defaultMQTT, "broker: the MQTT 5 broker's host:port (in clear, anonymous), for the engine's destination and the bench's consumer")
	fs.StringVar(&c.peer, "peer", peerWebhookd, "peer: the engine driven, "+peerWebhookd+" or "+peerOutpost)
	fs.StringVar(&c.peerAPI, "peer-api", envOr("OUTPOST_API", "http://127.0.0.1:3333"), "peer: Outpost's API base URL")
	fs.StringVar(&c.diskProbe, "disk-probe", "", "peer: a directory on the disk Postgres writes its WAL to; the run times an 8 KiB write and its flush there every 10 ms and reports the flushes' p50, p99 and longest beside its latency (empty: no probe)")
	fs.StringVar(&c.peerKey, "peer-key", os.Getenv("OUTPOST_API_KEY"), "peer: Outpost's API key (default $OUTPOST_API_KEY)")
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
	scaleBacklog := fs.String("scale-backlog", scaleBacklogDefault, "scale: the backlog points, deliveries queued (k and M suffixes; empty: none)")
	fs.IntVar(&c.scaleBacklogMerchants, "scale-backlog-merchants", scaleBacklogMerchants,
		fmt.Sprintf("scale: the merchants a backlog point spreads its deliveries over, %d subscriptions each (many spread the schedule over a Redis Cluster's masters)", scaleSubsPerMerchant))
	scaleMerchants := fs.String("scale-merchants", scaleMerchantDefault, fmt.Sprintf("scale: the merchants points, each with %d subscriptions (empty: none)", scaleSubsPerMerchant))
	fs.StringVar(&c.scalePlot, "scale-plot", "", "scale: write a PNG plot of the points to this file")
	fs.Usage = func() { usage(fs) }
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	// The flag package stops at the first argument that is not a flag and
	// leaves the rest unread: "webhookd-bench broker -broker-kind nats"
	// would run all of the scenarios to RabbitMQ.
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q: name scenarios with -scenario, before or after the other flags", fs.Arg(0))
	}
	fs.Visit(func(f *flag.Flag) { c.listenersSet = c.listenersSet || f.Name == "listeners" })
	var err error
	if c.pids, err = parsePIDs(*pids); err != nil {
		return c, err
	}
	if c.scaleBacklog, err = parsePoints("-scale-backlog", *scaleBacklog); err != nil {
		return c, err
	}
	if c.scaleMerchants, err = parsePoints("-scale-merchants", *scaleMerchants); err != nil {
		return c, err
	}
	c.metricsURLs = []string{c.internal}
	if *metricsURLs != "" {
		c.metricsURLs = splitList(*metricsURLs)
	}
	c.todo = scenarios
	if c.scenario != "all" {
		c.todo = splitList(c.scenario)
	}
	if len(c.todo) == 0 {
		return c, errors.New("-scenario names no scenario")
	}
	for _, name := range c.todo {
		if !slices.Contains(scenarios, name) && !slices.Contains(ownScenarios, name) {
			return c, fmt.Errorf("unknown -scenario %q", name)
		}
	}
	if c.peer != peerWebhookd && c.peer != peerOutpost {
		return c, fmt.Errorf("-peer must be %s or %s, not %q", peerWebhookd, peerOutpost, c.peer)
	}
	if c.jweKey != jweKeyEC && c.jweKey != jweKeyRSA {
		return c, fmt.Errorf("-jwe-key must be %s or %s, not %q", jweKeyEC, jweKeyRSA, c.jweKey)
	}
	if _, ok := brokerKindOf(c.brokerKind); !ok {
		return c, fmt.Errorf("-broker-kind must be one of %s, not %q", strings.Join(brokerKindNames(), ", "), c.brokerKind)
	}
	if _, err := parseNATS(c.natsURL); err != nil {
		return c, err
	}
	if err := checkMQTT(c.mqttAddr); err != nil {
		return c, err
	}
	if c.scaleBacklogMerchants < 1 {
		return c, fmt.Errorf("-scale-backlog-merchants must be at least 1")
	}
	if slices.Contains(c.todo, "scale") && len(c.scaleBacklog)+len(c.scaleMerchants) == 0 {
		return c, errNoPoints
	}
	if c.token == "" && c.needsEngine() {
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

// needsEngine tells whether a scenario to run drives the engine: all but raw.
func (c config) needsEngine() bool {
	return slices.ContainsFunc(c.todo, func(name string) bool { return name != "raw" })
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

// envOr is the environment variable name, or def when it is unset or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
