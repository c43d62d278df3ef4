package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/go-redis/redis_rate/v10"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/retry"
)

// config is the process configuration: the WEBHOOKD_* variables of
// DESIGN.md, with their defaults.
type config struct {
	DatabaseURL         string        `env:"WEBHOOKD_DATABASE_URL" envDefault:"postgres://127.0.0.1:5432/webhookd?sslmode=disable"`
	RedisURL            string        `env:"WEBHOOKD_REDIS_URL" envDefault:"redis://127.0.0.1:6379/0"`
	Listen              string        `env:"WEBHOOKD_LISTEN" envDefault:"127.0.0.1:8080"`
	InternalListen      string        `env:"WEBHOOKD_INTERNAL_LISTEN" envDefault:"127.0.0.1:8081"`
	Environment         string        `env:"WEBHOOKD_ENVIRONMENT" envDefault:"sandbox"`
	IngestToken         string        `env:"WEBHOOKD_INGEST_TOKEN"`
	MasterKey           string        `env:"WEBHOOKD_MASTER_KEY"`
	DeliveryTimeout     time.Duration `env:"WEBHOOKD_DELIVERY_TIMEOUT" envDefault:"25s"`
	RetrySchedule       string        `env:"WEBHOOKD_RETRY_SCHEDULE"`
	AllowHTTPTargets    bool          `env:"WEBHOOKD_ALLOW_HTTP_TARGETS" envDefault:"false"`
	AllowPrivateTargets bool          `env:"WEBHOOKD_ALLOW_PRIVATE_TARGETS" envDefault:"false"`
	TestEventRate       string        `env:"WEBHOOKD_TEST_EVENT_RATE" envDefault:"10/m"`
	APIRate             string        `env:"WEBHOOKD_API_RATE" envDefault:"100/s"`
	SMTPURL             string        `env:"WEBHOOKD_SMTP_URL"`
	NotifyFrom          string        `env:"WEBHOOKD_NOTIFY_FROM" envDefault:"webhookd@localhost"`
	TLSCert             string        `env:"WEBHOOKD_TLS_CERT"`
	TLSKey              string        `env:"WEBHOOKD_TLS_KEY"`
	WorkerConcurrency   int           `env:"WEBHOOKD_WORKER_CONCURRENCY" envDefault:"256"`
	APIVersions         string        `env:"WEBHOOKD_API_VERSIONS"`
	EventTypes          []string      `env:"WEBHOOKD_EVENT_TYPES" envSeparator:","`
	TrustedProxies      []string      `env:"WEBHOOKD_TRUSTED_PROXIES" envSeparator:","`
	MaxBodyBytes        int64         `env:"WEBHOOKD_MAX_BODY_BYTES" envDefault:"1048576"`
	MaxPayloadBytes     int           `env:"WEBHOOKD_MAX_PAYLOAD_BYTES" envDefault:"262144"`
	LogLevel            slog.Level    `env:"WEBHOOKD_LOG_LEVEL" envDefault:"info"`
	SweepInterval       time.Duration `env:"WEBHOOKD_SWEEP_INTERVAL" envDefault:"30s"`
	StartupTimeout      time.Duration `env:"WEBHOOKD_STARTUP_TIMEOUT" envDefault:"2m"`

	// Parsed forms, filled by load.
	masterKey      []byte
	schedule       retry.Schedule
	testEventRate  redis_rate.Limit
	apiRate        redis_rate.Limit
	versions       admin.Versions
	trustedProxies []netip.Prefix
	redisOpts      *redis.Options
}

// catalogue is the event vocabulary of spec 6.1 (ping.test is sent only by
// send_test_event).
var catalogue = []string{
	"payout.created", "payout.initiated", "payout.paid", "payout.failed",
	"return.initiated", "return.paid", "return.failed", "return.returned",
	"deposit.received",
	"conversion.created", "conversion.succeeded", "conversion.failed",
}

// loadConfig reads and checks the environment. Every error names the
// variable at fault.
func loadConfig(logger *slog.Logger) (config, error) {
	var c config
	if err := env.Parse(&c); err != nil {
		return c, fmt.Errorf("configuration: %s: %w", variablesOf(err), err)
	}
	bad := func(name string, err error) error { return fmt.Errorf("configuration: %s: %w", name, err) }
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
		// Logged so that a developer can restart with the same key; a
		// sandbox without it could not read its own secrets after restart.
		logger.Warn("WEBHOOKD_MASTER_KEY unset: generated a development key; set it to keep secrets readable across restarts",
			"WEBHOOKD_MASTER_KEY", base64.StdEncoding.EncodeToString(c.masterKey))
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
	if c.StartupTimeout < 0 {
		return c, bad("WEBHOOKD_STARTUP_TIMEOUT", fmt.Errorf("must not be negative"))
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
	if c.redisOpts, err = redis.ParseURL(c.RedisURL); err != nil {
		return c, bad("WEBHOOKD_REDIS_URL", err)
	}
	if c.WorkerConcurrency < 1 {
		return c, bad("WEBHOOKD_WORKER_CONCURRENCY", fmt.Errorf("must be at least 1"))
	}
	if c.MaxBodyBytes < 1024 {
		return c, bad("WEBHOOKD_MAX_BODY_BYTES", fmt.Errorf("must be at least 1024"))
	}
	if c.MaxPayloadBytes < 1 || int64(c.MaxPayloadBytes) > c.MaxBodyBytes {
		return c, bad("WEBHOOKD_MAX_PAYLOAD_BYTES", fmt.Errorf("must be between 1 and WEBHOOKD_MAX_BODY_BYTES"))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return c, bad("WEBHOOKD_TLS_CERT", fmt.Errorf("WEBHOOKD_TLS_CERT and WEBHOOKD_TLS_KEY go together"))
	}
	for _, t := range c.EventTypes {
		if t = strings.TrimSpace(t); t != "" && !strings.Contains(t, ".") {
			return c, bad("WEBHOOKD_EVENT_TYPES", fmt.Errorf("%q is not of the form resource.action", t))
		}
	}
	return c, nil
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
	types := append([]string(nil), catalogue...)
	for _, t := range c.EventTypes {
		if t = strings.TrimSpace(t); t != "" {
			types = append(types, t)
		}
	}
	return types
}

// asynqRedis turns the go-redis options into asynq's, so that both clients
// read one URL.
func (c config) asynqRedis() asynq.RedisClientOpt {
	o := c.redisOpts
	return asynq.RedisClientOpt{Network: o.Network, Addr: o.Addr, Username: o.Username, Password: o.Password,
		DB: o.DB, TLSConfig: o.TLSConfig, PoolSize: max(o.PoolSize, 2*c.WorkerConcurrency)}
}

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
