package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/go-redis/redis_rate/v10"
	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/dispatcher/publish"
	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/kinds"
	"github.com/webhookd/webhookd/internal/payloadschema"
	"github.com/webhookd/webhookd/internal/portal"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/internal/transform"
	"github.com/webhookd/webhookd/producer"
	"github.com/webhookd/webhookd/retry"
)

// config is the process configuration: the WEBHOOKD_* variables of
// DESIGN.md, with their defaults.
type config struct {
	DatabaseURL         string        `env:"WEBHOOKD_DATABASE_URL" envDefault:"postgres://127.0.0.1:5432/webhookd?sslmode=disable"`
	DatabaseReadURL     string        `env:"WEBHOOKD_DATABASE_READ_URL"`
	RedisURL            string        `env:"WEBHOOKD_REDIS_URL" envDefault:"redis://127.0.0.1:6379/0"`
	Listen              string        `env:"WEBHOOKD_LISTEN" envDefault:"127.0.0.1:8080"`
	InternalListen      string        `env:"WEBHOOKD_INTERNAL_LISTEN" envDefault:"127.0.0.1:8081"`
	PublicURL           string        `env:"WEBHOOKD_PUBLIC_URL"`
	Environment         string        `env:"WEBHOOKD_ENVIRONMENT" envDefault:"sandbox"`
	IngestToken         string        `env:"WEBHOOKD_INGEST_TOKEN"`
	MasterKey           string        `env:"WEBHOOKD_MASTER_KEY"`
	DeliveryTimeout     time.Duration `env:"WEBHOOKD_DELIVERY_TIMEOUT" envDefault:"25s"`
	PublishLinger       time.Duration `env:"WEBHOOKD_PUBLISH_LINGER" envDefault:"4ms"`
	RetrySchedule       string        `env:"WEBHOOKD_RETRY_SCHEDULE"`
	AllowHTTPTargets    bool          `env:"WEBHOOKD_ALLOW_HTTP_TARGETS" envDefault:"false"`
	AllowPrivateTargets bool          `env:"WEBHOOKD_ALLOW_PRIVATE_TARGETS" envDefault:"false"`
	TestEventRate       string        `env:"WEBHOOKD_TEST_EVENT_RATE" envDefault:"10/m"`
	APIRate             string        `env:"WEBHOOKD_API_RATE" envDefault:"100/s"`
	PortalSessionRate   string        `env:"WEBHOOKD_PORTAL_SESSION_RATE" envDefault:"10/m"`
	SMTPURL             string        `env:"WEBHOOKD_SMTP_URL"`
	NotifyFrom          string        `env:"WEBHOOKD_NOTIFY_FROM" envDefault:"webhookd@localhost"`
	TLSCert             string        `env:"WEBHOOKD_TLS_CERT"`
	TLSKey              string        `env:"WEBHOOKD_TLS_KEY"`
	WorkerConcurrency   int           `env:"WEBHOOKD_WORKER_CONCURRENCY" envDefault:"256"`
	MerchantShare       float64       `env:"WEBHOOKD_MERCHANT_SHARE" envDefault:"0.25"`
	MaxSubscriptions    int           `env:"WEBHOOKD_MAX_SUBSCRIPTIONS" envDefault:"100"`
	APIVersions         string        `env:"WEBHOOKD_API_VERSIONS"`
	EventTypes          []string      `env:"WEBHOOKD_EVENT_TYPES" envSeparator:","`
	TrustedProxies      []string      `env:"WEBHOOKD_TRUSTED_PROXIES" envSeparator:","`
	FrameAncestors      []string      `env:"WEBHOOKD_PORTAL_FRAME_ANCESTORS" envSeparator:","`
	Destinations        []string      `env:"WEBHOOKD_DESTINATIONS" envSeparator:","`
	MaxBodyBytes        int64         `env:"WEBHOOKD_MAX_BODY_BYTES" envDefault:"1048576"`
	MaxPayloadBytes     int           `env:"WEBHOOKD_MAX_PAYLOAD_BYTES" envDefault:"262144"`
	PayloadValidation   string        `env:"WEBHOOKD_PAYLOAD_VALIDATION" envDefault:"off"`
	LogLevel            slog.Level    `env:"WEBHOOKD_LOG_LEVEL" envDefault:"info"`
	SweepInterval       time.Duration `env:"WEBHOOKD_SWEEP_INTERVAL" envDefault:"30s"`
	ScheduleShards      int           `env:"WEBHOOKD_SCHEDULE_SHARDS" envDefault:"12"`
	AutoDisableAfter    time.Duration `env:"WEBHOOKD_AUTO_DISABLE_AFTER" envDefault:"120h"`
	StartupTimeout      time.Duration `env:"WEBHOOKD_STARTUP_TIMEOUT" envDefault:"2m"`
	ListenerGrace       time.Duration `env:"WEBHOOKD_LISTENER_GRACE" envDefault:"30s"`
	MaxLongPolls        int           `env:"WEBHOOKD_MAX_LONG_POLLS_PER_MERCHANT" envDefault:"20"`
	MaxListeners        int           `env:"WEBHOOKD_MAX_LISTENERS_PER_MERCHANT" envDefault:"10"`
	EgressProxy         string        `env:"WEBHOOKD_EGRESS_PROXY"`
	SourceAddresses     []string      `env:"WEBHOOKD_SOURCE_ADDRESSES" envSeparator:","`
	SQSEngineQueues     []string      `env:"WEBHOOKD_SQS_ENGINE_CREDENTIALS" envSeparator:","`
	// TransformationCPU and TransformationMemory bound one run of a
	// merchant's transformation (docs/transformations.md, "Limits").
	TransformationCPU    time.Duration `env:"WEBHOOKD_TRANSFORMATION_CPU_TIME" envDefault:"50ms"`
	TransformationMemory int           `env:"WEBHOOKD_TRANSFORMATION_MEMORY_BYTES" envDefault:"16777216"`

	// Parsed forms, filled by load.
	masterKey      []byte
	schedule       retry.Schedule
	testEventRate  redis_rate.Limit
	apiRate        redis_rate.Limit
	versions       admin.Versions
	trustedProxies []netip.Prefix
	// frameAncestors are the origins that may show the portal in a frame.
	frameAncestors []string
	redisConn      *producer.RedisConn
	egressProxy    *url.URL
	sourceAddrs    []netip.Prefix
	// kinds are the destination kinds this build delivers to, with the
	// operator's settings they read.
	kinds *destination.Registry
	// masterKeyGenerated is set when WEBHOOKD_MASTER_KEY is unset and
	// masterKey was made up for this process (sandbox only).
	masterKeyGenerated bool
	// portalSessionRate bounds the portal sessions each API key mints
	// (WEBHOOKD_PORTAL_SESSION_RATE).
	portalSessionRate redis_rate.Limit
	// payloadValidation is what a publish does with a payload that does
	// not match its type's schema (WEBHOOKD_PAYLOAD_VALIDATION).
	payloadValidation payloadschema.Mode
}

// loadConfig reads and checks the environment. Every error names the
// variable at fault; a WEBHOOKD_* variable that webhookd does not know (a
// misspelling, which would otherwise leave a setting at its default
// unnoticed) is logged as a warning naming the closest known one.
func loadConfig(logger *slog.Logger) (config, error) {
	warnUnknownVariables(logger, os.Environ())
	var c config
	if err := env.Parse(&c); err != nil {
		return c, fmt.Errorf("configuration: %s: %w", variablesOf(err), err)
	}
	bad := func(name string, err error) error { return fmt.Errorf("configuration: %s: %w", name, err) }
	var err error
	if _, err := pgxpool.ParseConfig(c.DatabaseURL); err != nil {
		return c, bad("WEBHOOKD_DATABASE_URL", fmt.Errorf("expected a PostgreSQL URL such as postgres://user:password@host:5432/webhookd?sslmode=disable: %w", err))
	}
	if c.DatabaseReadURL != "" {
		if _, err := pgxpool.ParseConfig(c.DatabaseReadURL); err != nil {
			return c, bad("WEBHOOKD_DATABASE_READ_URL", fmt.Errorf("expected a PostgreSQL URL of a streaming replica such as postgres://user:password@replica:5432/webhookd?sslmode=disable: %w", err))
		}
	}
	if c.egressProxy, err = parseEgressProxy(c.EgressProxy); err != nil {
		return c, bad("WEBHOOKD_EGRESS_PROXY", err)
	}
	if c.sourceAddrs, err = parsePrefixes(c.SourceAddresses); err != nil {
		return c, bad("WEBHOOKD_SOURCE_ADDRESSES", err)
	}
	switch c.Environment {
	case "sandbox", "production":
	default:
		return c, bad("WEBHOOKD_ENVIRONMENT", fmt.Errorf("must be sandbox or production, not %q", c.Environment))
	}
	if c.MasterKey == "" {
		if c.Environment == "production" {
			return c, bad("WEBHOOKD_MASTER_KEY", fmt.Errorf("is required in production (base64 of 32 bytes)"))
		}
		c.masterKey = make([]byte, 32)
		if _, err := rand.Read(c.masterKey); err != nil {
			return c, err
		}
		c.masterKeyGenerated = true
	} else {
		k, err := base64.StdEncoding.DecodeString(c.MasterKey)
		if err != nil || len(k) != 32 {
			return c, bad("WEBHOOKD_MASTER_KEY", fmt.Errorf("must be the base64 of exactly 32 bytes"))
		}
		c.masterKey = k
	}
	if c.DeliveryTimeout <= 0 {
		return c, bad("WEBHOOKD_DELIVERY_TIMEOUT", fmt.Errorf("must be positive"))
	}
	if c.PublishLinger < 0 || c.PublishLinger > publish.MaxLinger {
		return c, bad("WEBHOOKD_PUBLISH_LINGER", fmt.Errorf("must be between 0s and %s", publish.MaxLinger))
	}
	if c.StartupTimeout < 0 {
		return c, bad("WEBHOOKD_STARTUP_TIMEOUT", fmt.Errorf("must not be negative"))
	}
	if c.ListenerGrace < time.Second {
		return c, bad("WEBHOOKD_LISTENER_GRACE", fmt.Errorf("must be at least 1s"))
	}
	if c.AutoDisableAfter < time.Hour {
		return c, bad("WEBHOOKD_AUTO_DISABLE_AFTER", fmt.Errorf("must be at least 1h"))
	}
	if c.ScheduleShards < 1 || c.ScheduleShards > queue.MaxScheduleShards {
		return c, bad("WEBHOOKD_SCHEDULE_SHARDS", fmt.Errorf("must be between 1 and %d", queue.MaxScheduleShards))
	}
	if c.SweepInterval < 100*time.Millisecond {
		return c, bad("WEBHOOKD_SWEEP_INTERVAL", fmt.Errorf("must be at least 100ms"))
	}
	c.schedule = retry.Default()
	if c.RetrySchedule != "" {
		s, err := retry.Parse(c.RetrySchedule)
		if err != nil {
			return c, bad("WEBHOOKD_RETRY_SCHEDULE", err)
		}
		c.schedule = s
	}
	rate, err := parseRate(c.TestEventRate)
	if err != nil {
		return c, bad("WEBHOOKD_TEST_EVENT_RATE", err)
	}
	c.testEventRate = rate
	if c.apiRate, err = parseRate(c.APIRate); err != nil {
		return c, bad("WEBHOOKD_API_RATE", err)
	}
	if c.portalSessionRate, err = parseRate(c.PortalSessionRate); err != nil {
		return c, bad("WEBHOOKD_PORTAL_SESSION_RATE", err)
	}
	if c.frameAncestors, err = portal.ParseFrameAncestors(c.FrameAncestors); err != nil {
		return c, bad("WEBHOOKD_PORTAL_FRAME_ANCESTORS", err)
	}
	c.versions = admin.DefaultVersions()
	if c.APIVersions != "" {
		if c.versions, err = admin.ParseVersions(c.APIVersions); err != nil {
			return c, bad("WEBHOOKD_API_VERSIONS", err)
		}
	}
	for _, p := range c.TrustedProxies {
		prefix, err := netip.ParsePrefix(strings.TrimSpace(p))
		if err != nil {
			addr, err2 := netip.ParseAddr(strings.TrimSpace(p))
			if err2 != nil {
				return c, bad("WEBHOOKD_TRUSTED_PROXIES", err)
			}
			prefix = netip.PrefixFrom(addr, addr.BitLen())
		}
		c.trustedProxies = append(c.trustedProxies, prefix)
	}
	if c.redisConn, err = producer.ParseRedisURL(c.RedisURL); err != nil {
		return c, bad("WEBHOOKD_REDIS_URL", err)
	}
	if c.WorkerConcurrency < 1 {
		return c, bad("WEBHOOKD_WORKER_CONCURRENCY", fmt.Errorf("must be at least 1"))
	}
	// Every client of the process, go-redis's and asynq's, gets a pool
	// sized for the workers.
	c.redisConn.SetPoolSize(max(c.redisConn.PoolSize(), 2*c.WorkerConcurrency))
	if c.MaxBodyBytes < 1024 {
		return c, bad("WEBHOOKD_MAX_BODY_BYTES", fmt.Errorf("must be at least 1024"))
	}
	if c.MaxPayloadBytes < 1 || int64(c.MaxPayloadBytes) > c.MaxBodyBytes {
		return c, bad("WEBHOOKD_MAX_PAYLOAD_BYTES", fmt.Errorf("must be between 1 and WEBHOOKD_MAX_BODY_BYTES"))
	}
	if c.payloadValidation, err = payloadschema.ParseMode(c.PayloadValidation); err != nil {
		return c, bad("WEBHOOKD_PAYLOAD_VALIDATION", err)
	}
	if c.TransformationCPU < time.Millisecond || c.TransformationCPU > 10*time.Second {
		return c, bad("WEBHOOKD_TRANSFORMATION_CPU_TIME", fmt.Errorf("must be between 1ms and 10s"))
	}
	if c.TransformationMemory < 4<<20 || c.TransformationMemory > 1<<30 || c.TransformationMemory%(64<<10) != 0 {
		return c, bad("WEBHOOKD_TRANSFORMATION_MEMORY_BYTES", fmt.Errorf("must be a multiple of 65536 between 4 MiB and 1 GiB"))
	}
	if c.MaxSubscriptions < 1 {
		return c, bad("WEBHOOKD_MAX_SUBSCRIPTIONS", fmt.Errorf("must be at least 1"))
	}
	if c.MaxLongPolls < 1 {
		return c, bad("WEBHOOKD_MAX_LONG_POLLS_PER_MERCHANT", fmt.Errorf("must be at least 1"))
	}
	if c.MaxListeners < 1 {
		return c, bad("WEBHOOKD_MAX_LISTENERS_PER_MERCHANT", fmt.Errorf("must be at least 1"))
	}
	if c.MerchantShare <= 0 || c.MerchantShare > 1 {
		return c, bad("WEBHOOKD_MERCHANT_SHARE", fmt.Errorf("must be more than 0 and at most 1, not %v", c.MerchantShare))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return c, bad("WEBHOOKD_TLS_CERT", fmt.Errorf("WEBHOOKD_TLS_CERT and WEBHOOKD_TLS_KEY go together"))
	}
	if c.PublicURL, err = publicURL(c.PublicURL, c.Listen, c.TLSCert != ""); err != nil {
		return c, bad("WEBHOOKD_PUBLIC_URL", err)
	}
	var types []string
	for _, t := range c.EventTypes {
		if t = strings.TrimSpace(t); t != "" && !strings.Contains(t, ".") {
			return c, bad("WEBHOOKD_EVENT_TYPES", fmt.Errorf("%q is not of the form resource.action", t))
		}
		types = append(types, t)
	}
	if len(types) > 0 {
		// The catalogue's rule on a vocabulary (ping.test is reserved).
		if err := catalogue.New(types).Validate(); err != nil {
			return c, bad("WEBHOOKD_EVENT_TYPES", err)
		}
	}
	if c.SQSEngineQueues, err = parseSQSEngineQueues(c.SQSEngineQueues); err != nil {
		return c, bad("WEBHOOKD_SQS_ENGINE_CREDENTIALS", err)
	}
	if c.kinds, err = kinds.Default(kinds.Options{SQSEngineQueues: c.SQSEngineQueues}); err != nil {
		return c, err
	}
	if c.Destinations, err = destinationTypes(c.Destinations, c.kinds); err != nil {
		return c, bad("WEBHOOKD_DESTINATIONS", err)
	}
	return c, nil
}

// destinationTypes reads WEBHOOKD_DESTINATIONS: the destination types
// subscriptions may use, every one this build delivers (the HTTP
// endpoint, each kind of the registry, poll) when unset.
func destinationTypes(names []string, registry *destination.Registry) ([]string, error) {
	known := subscriptions.DestinationTypes(registry)
	if len(names) == 0 {
		return known, nil
	}
	var out []string
	for _, n := range names {
		n = strings.TrimSpace(n)
		if !slices.Contains(known, n) {
			return nil, fmt.Errorf("%q is not a destination type this build delivers (%s)", n, strings.Join(known, ", "))
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// warnGeneratedMasterKey logs the key made up for a sandbox without
// WEBHOOKD_MASTER_KEY, so that a developer can restart with the same key:
// without it, the process could not read its own secrets after a restart.
// Only the commands that seal or open secrets call it.
func (c config) warnGeneratedMasterKey(logger *slog.Logger) {
	if c.masterKeyGenerated {
		logger.Warn("WEBHOOKD_MASTER_KEY unset: generated a development key; set it to keep secrets readable across restarts",
			"WEBHOOKD_MASTER_KEY", base64.StdEncoding.EncodeToString(c.masterKey))
	}
}

// testVariablePrefix marks the variables of webhookd's own test suite
// (internal/store/storetest), which share the prefix but are not configuration.
const testVariablePrefix = "WEBHOOKD_TEST_"

// warnUnknownVariables warns of each WEBHOOKD_* variable of environ that
// is not one of config's, naming the closest known one.
func warnUnknownVariables(logger *slog.Logger, environ []string) {
	known := knownVariables()
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "WEBHOOKD_") || strings.HasPrefix(name, testVariablePrefix) || slices.Contains(known, name) {
			continue
		}
		closest := slices.MinFunc(known, func(a, b string) int { return editDistance(name, a) - editDistance(name, b) })
		logger.Warn(fmt.Sprintf("unknown variable %s ignored; did you mean %s?", name, closest),
			"variable", name, "closest", closest)
	}
}

// knownVariables is the name of every configuration variable.
func knownVariables() []string {
	t := reflect.TypeFor[config]()
	var names []string
	for i := range t.NumField() {
		if name := t.Field(i).Tag.Get("env"); name != "" {
			names = append(names, name)
		}
	}
	return names
}

// editDistance is the Levenshtein distance between a and b: the fewest
// insertions, deletions and substitutions that turn one into the other.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			substitution := prev[j-1]
			if a[i-1] != b[j-1] {
				substitution++
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, substitution)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// variablesOf names the variables behind the env library's errors, which
// speak of Go field names.
func variablesOf(err error) string {
	var names []string
	var agg env.AggregateError
	if errors.As(err, &agg) {
		for _, e := range agg.Errors {
			var pe env.ParseError
			if errors.As(e, &pe) {
				if f, ok := reflect.TypeFor[config]().FieldByName(pe.Name); ok {
					names = append(names, f.Tag.Get("env"))
				}
			}
		}
	}
	if len(names) == 0 {
		return "environment"
	}
	return strings.Join(names, ", ")
}

// eventTypes is the catalogue plus the configured kinds.
func (c config) eventTypes() []string {
	types := dispatcher.DefaultEventTypes()
	for _, t := range c.EventTypes {
		if t = strings.TrimSpace(t); t != "" {
			types = append(types, t)
		}
	}
	return types
}

// asynqRedis turns the parsed URL into asynq's options, so that both
// clients read one URL.
func (c config) asynqRedis() asynq.RedisConnOpt { return producer.AsynqRedisOpt(c.redisConn) }

// requireHTTPS is true when the public listener is reachable from other
// hosts over plain HTTP.
func (c config) requireHTTPS() bool {
	if c.TLSCert != "" {
		return false
	}
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return true
	}
	if host == "localhost" {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err != nil || !ip.IsLoopback()
}

// parseRate reads "N/s", "N/m" or "N/h".
func parseRate(s string) (redis_rate.Limit, error) {
	n, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	count, err := strconv.Atoi(n)
	if !ok || err != nil || count < 1 {
		return redis_rate.Limit{}, fmt.Errorf("%q is not of the form N/s, N/m or N/h", s)
	}
	switch unit {
	case "s":
		return redis_rate.PerSecond(count), nil
	case "m":
		return redis_rate.PerMinute(count), nil
	case "h":
		return redis_rate.PerHour(count), nil
	}
	return redis_rate.Limit{}, fmt.Errorf("%q: unit must be s, m or h", s)
}

// publicURL is the public listener's external base URL, the start of every
// portal link: the one configured, or the listen address itself (https
// when the listener has TLS), which is right only when clients reach the
// listener directly.
func publicURL(configured, listen string, tls bool) (string, error) {
	if configured == "" {
		scheme := "http://"
		if tls {
			scheme = "https://"
		}
		return scheme + listen, nil
	}
	u, err := url.Parse(configured)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("must be an absolute http or https URL without query or fragment, such as https://webhooks.example.com")
	}
	return strings.TrimRight(configured, "/"), nil
}

// sandbox is the process's transformation sandbox, made at its first use
// (internal/transform): the limits configured, a changed url held to
// the subscription URL rules, the payload limit on what a handler
// returns.
func (c config) sandbox() *transform.Lazy {
	return transform.NewLazy(transform.Config{
		Limits: transform.Limits{TimePerCall: c.TransformationCPU, MemoryPerCall: c.TransformationMemory,
			MaxOutputBytes: c.MaxPayloadBytes},
		CheckURL: subscriptions.URLRule(subscriptions.Rules{
			AllowHTTPTargets: c.AllowHTTPTargets, AllowPrivateTargets: c.AllowPrivateTargets}),
	})
}
