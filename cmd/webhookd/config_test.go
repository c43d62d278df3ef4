package main

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/webhookd/webhookd/internal/payloadschema"
)

func TestConfigDefaults(t *testing.T) {
	c, err := loadConfig(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:8080" || c.InternalListen != "127.0.0.1:8081" || c.DeliveryTimeout != 25*time.Second ||
		c.Environment != "sandbox" || c.schedule.Attempts() != 15 || len(c.masterKey) != 32 || c.requireHTTPS() ||
		c.apiRate != redis_rate.PerSecond(100) || c.portalSessionRate != redis_rate.PerMinute(10) || c.StartupTimeout != 2*time.Minute ||
		c.payloadValidation != payloadschema.Off || c.PublishLinger != 4*time.Millisecond {
		t.Fatalf("defaults: %+v", c)
	}
	if want := []string{"webhook", "rabbitmq", "kafka", "sqs", "gcp_pubsub", "nats", "mqtt", "kinesis", "sns", "eventbridge", "s3", "poll"}; !slices.Equal(c.Destinations, want) {
		t.Fatalf("destinations %v, want %v (every type this build delivers)", c.Destinations, want)
	}
}

func TestConfigErrorsNameTheVariable(t *testing.T) {
	tests := []struct{ name, value string }{
		{"WEBHOOKD_DATABASE_URL", "notaurl"},
		{"WEBHOOKD_DATABASE_URL", "mysql://root@127.0.0.1:3306/webhookd"},
		{"WEBHOOKD_ENVIRONMENT", "staging"},
		{"WEBHOOKD_MASTER_KEY", "c2hvcnQ="},
		{"WEBHOOKD_DELIVERY_TIMEOUT", "soon"},
		{"WEBHOOKD_DELIVERY_TIMEOUT", "-1s"},
		{"WEBHOOKD_RETRY_SCHEDULE", "1s,,2s"},
		{"WEBHOOKD_TEST_EVENT_RATE", "10/fortnight"},
		{"WEBHOOKD_TEST_EVENT_RATE", "many"},
		{"WEBHOOKD_API_RATE", "0/s"},
		{"WEBHOOKD_API_RATE", "100 per second"},
		{"WEBHOOKD_PORTAL_SESSION_RATE", "0/m"},
		{"WEBHOOKD_API_VERSIONS", `[{"name":"yesterday"}]`},
		{"WEBHOOKD_TRUSTED_PROXIES", "not-a-cidr"},
		{"WEBHOOKD_PORTAL_FRAME_ANCESTORS", "dashboard.example.com"},
		{"WEBHOOKD_PORTAL_FRAME_ANCESTORS", "https://dashboard.example.com/portal"},
		{"WEBHOOKD_REDIS_URL", "http://nope"},
		{"WEBHOOKD_REDIS_URL", "redis-sentinel://127.0.0.1:26379"},
		{"WEBHOOKD_REDIS_URL", "redis-cluster://127.0.0.1:7000/2"},
		{"WEBHOOKD_WORKER_CONCURRENCY", "0"},
		{"WEBHOOKD_STARTUP_TIMEOUT", "-1s"},
		{"WEBHOOKD_SWEEP_INTERVAL", "10ms"},
		{"WEBHOOKD_SCHEDULE_SHARDS", "0"},
		{"WEBHOOKD_SCHEDULE_SHARDS", "257"},
		{"WEBHOOKD_PUBLISH_LINGER", "-1ms"},
		{"WEBHOOKD_PUBLISH_LINGER", "51ms"},
		{"WEBHOOKD_PUBLISH_LINGER", "soon"},
		{"WEBHOOKD_ALLOW_HTTP_TARGETS", "perhaps"},
		{"WEBHOOKD_EVENT_TYPES", "payout"},
		{"WEBHOOKD_TLS_CERT", "/etc/cert.pem"},
		{"WEBHOOKD_PUBLIC_URL", "hooks.example.com"},
		{"WEBHOOKD_PUBLIC_URL", "ftp://hooks.example.com"},
		{"WEBHOOKD_PUBLIC_URL", "https://hooks.example.com/#x"},
		{"WEBHOOKD_DATABASE_READ_URL", "mysql://root@replica:3306/webhookd"},
		{"WEBHOOKD_EGRESS_PROXY", "smokescreen:4750"},
		{"WEBHOOKD_EGRESS_PROXY", "https://smokescreen:4750"},
		{"WEBHOOKD_EGRESS_PROXY", "socks5://proxy:1080"},
		{"WEBHOOKD_EGRESS_PROXY", "http://smokescreen"},
		{"WEBHOOKD_EGRESS_PROXY", "http://smokescreen:4750/path"},
		{"WEBHOOKD_SOURCE_ADDRESSES", "203.0.113.7,not-an-ip"},
		{"WEBHOOKD_SOURCE_ADDRESSES", "203.0.113.7/24"},
		{"WEBHOOKD_DESTINATIONS", "webhook,smtp"},
		{"WEBHOOKD_MAX_LONG_POLLS_PER_MERCHANT", "0"},
		{"WEBHOOKD_MAX_LISTENERS_PER_MERCHANT", "-1"},
		{"WEBHOOKD_PAYLOAD_VALIDATION", "strict"},
		{"WEBHOOKD_PAYLOAD_VALIDATION", "Enforce"},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			t.Setenv(tt.name, tt.value)
			_, err := loadConfig(slog.New(slog.DiscardHandler))
			if err == nil || !strings.Contains(err.Error(), tt.name) {
				t.Fatalf("loadConfig() error = %v, want one naming %s", err, tt.name)
			}
		})
	}
}

func TestProductionRequiresMasterKey(t *testing.T) {
	t.Setenv("WEBHOOKD_ENVIRONMENT", "production")
	if _, err := loadConfig(slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "WEBHOOKD_MASTER_KEY") {
		t.Fatalf("err = %v", err)
	}
}

func TestHTTPSRequiredOffLoopback(t *testing.T) {
	tests := []struct {
		listen, cert string
		want         bool
	}{
		{"127.0.0.1:8080", "", false},
		{"[::1]:8080", "", false},
		{"localhost:8080", "", false},
		{"0.0.0.0:8080", "", true},
		{":8080", "", true},
		{"0.0.0.0:8443", "/cert.pem", false},
	}
	for _, tt := range tests {
		c := config{Listen: tt.listen, TLSCert: tt.cert}
		if got := c.requireHTTPS(); got != tt.want {
			t.Errorf("requireHTTPS(%q, cert %q) = %v, want %v", tt.listen, tt.cert, got, tt.want)
		}
	}
}

func TestUnknownVariablesWarn(t *testing.T) {
	tests := []struct {
		variable string
		// closest is the known variable the warning names; "" means no
		// warning.
		closest string
	}{
		{"WEBHOOKD_RETRY_SCHEDUL", "WEBHOOKD_RETRY_SCHEDULE"},
		{"WEBHOOKD_DATABASE_URI", "WEBHOOKD_DATABASE_URL"},
		{"WEBHOOKD_INGEST_TOKN", "WEBHOOKD_INGEST_TOKEN"},
		{"WEBHOOKD_LISTEN", ""},
		{"WEBHOOKD_TEST_DATABASE_URL", ""},
		{"PATH", ""},
	}
	for _, tt := range tests {
		t.Run(tt.variable, func(t *testing.T) {
			var out bytes.Buffer
			warnUnknownVariables(slog.New(slog.NewJSONHandler(&out, nil)), []string{tt.variable + "=x"})
			if tt.closest == "" && out.Len() != 0 || tt.closest != "" && !strings.Contains(out.String(), `"closest":"`+tt.closest+`"`) {
				t.Errorf("logged %q, want a warning naming %q (none if empty)", out.String(), tt.closest)
			}
		})
	}
}

func TestPublicURL(t *testing.T) {
	tests := []struct {
		configured, listen string
		tls                bool
		want               string
	}{
		{"", "127.0.0.1:8080", false, "http://127.0.0.1:8080"},
		{"", "0.0.0.0:8443", true, "https://0.0.0.0:8443"},
		{"https://hooks.example.com/", "0.0.0.0:8080", false, "https://hooks.example.com"},
		{"https://example.com/webhooks", "0.0.0.0:8080", false, "https://example.com/webhooks"},
	}
	for _, tt := range tests {
		if got, err := publicURL(tt.configured, tt.listen, tt.tls); err != nil || got != tt.want {
			t.Errorf("publicURL(%q, %q, %v) = %q, %v; want %q", tt.configured, tt.listen, tt.tls, got, err, tt.want)
		}
	}
}

// The highly available Redis URLs give every client, go-redis's and
// asynq's, a pool sized for the workers.
func TestConfigRedisTopologies(t *testing.T) {
	for _, url := range []string{"redis://127.0.0.1:6379/0", "redis-sentinel://127.0.0.1:26379,127.0.0.2:26379/mymaster",
		"rediss-cluster://127.0.0.1:7000,127.0.0.1:7001"} {
		t.Run(url, func(t *testing.T) {
			t.Setenv("WEBHOOKD_REDIS_URL", url)
			t.Setenv("WEBHOOKD_WORKER_CONCURRENCY", "300")
			c, err := loadConfig(slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			if c.redisConn.PoolSize() != 600 {
				t.Errorf("pool size %d, want 600", c.redisConn.PoolSize())
			}
			if rc := c.redisConn.NewClient(); rc.Close() != nil {
				t.Error("closing the client failed")
			}
		})
	}
}

// TestEgressSettings reads the egress proxy and the declared source
// addresses into their parsed forms.
func TestEgressSettings(t *testing.T) {
	t.Setenv("WEBHOOKD_EGRESS_PROXY", "http://user:p%40ss@smokescreen:4750")
	t.Setenv("WEBHOOKD_SOURCE_ADDRESSES", " 203.0.113.7, 198.51.100.0/28,2001:db8:1::/48,::ffff:192.0.2.1")
	c, err := loadConfig(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if pw, _ := c.egressProxy.User.Password(); c.egressProxy.Host != "smokescreen:4750" || pw != "p@ss" {
		t.Errorf("egress proxy = %v", c.egressProxy.Redacted())
	}
	var got []string
	for _, p := range c.sourceAddrs {
		got = append(got, p.String())
	}
	if want := "203.0.113.7/32 198.51.100.0/28 2001:db8:1::/48 192.0.2.1/32"; strings.Join(got, " ") != want {
		t.Errorf("source addresses = %v, want %s", got, want)
	}
}
