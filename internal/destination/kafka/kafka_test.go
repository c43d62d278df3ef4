package kafka_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/desttest"
	"github.com/webhookd/webhookd/internal/destination/kafka"
	"github.com/webhookd/webhookd/internal/invalid"
)

// The user the clusters below know (SASL PLAIN).
const (
	user     = "webhookd"
	password = "right-password"
)

// newCluster starts an in-process Kafka cluster (franz-go's kfake) with
// topic, of three partitions; the test's end stops it.
func newCluster(t testing.TB, topic string, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(3, topic)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// answerWrongPasswords makes c answer a SASL PLAIN login with a wrong
// password as Kafka does, SASL_AUTHENTICATION_FAILED: kfake closes the
// connection instead, which a client cannot tell from a broker gone.
func answerWrongPasswords(c *kfake.Cluster) {
	c.ControlKey(int16(kmsg.SASLAuthenticate), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		auth := req.(*kmsg.SASLAuthenticateRequest)
		if parts := strings.Split(string(auth.SASLAuthBytes), "\x00"); len(parts) == 3 && parts[2] != password {
			resp := auth.ResponseKind().(*kmsg.SASLAuthenticateResponse)
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			msg := "Authentication failed: Invalid username or password"
			resp.ErrorMessage = &msg
			return resp, nil, true
		}
		return nil, nil, false
	})
}

// consumer reads a topic from its start, record by record.
type consumer struct {
	client *kgo.Client
	mu     sync.Mutex
	ready  []*kgo.Record
}

func newConsumer(t testing.TB, c *kfake.Cluster, topic string, opts ...kgo.Opt) *consumer {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &consumer{client: cl}
}

// next is the next record, before ctx ends.
func (c *consumer) next(ctx context.Context, t testing.TB) *kgo.Record {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.ready) == 0 {
		fs := c.client.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("no record: %v", ctx.Err())
		}
		c.ready = append(c.ready, fs.Records()...)
	}
	r := c.ready[0]
	c.ready = c.ready[1:]
	return r
}

func arrived(r *kgo.Record) desttest.Arrived {
	headers := make(map[string]string, len(r.Headers))
	for _, h := range r.Headers {
		headers[h.Key] = string(h.Value)
	}
	return desttest.Arrived{Body: r.Value, Headers: headers, Key: string(r.Key)}
}

// dest is a destination object as a merchant sends it.
func dest(t testing.TB, fields map[string]any) string {
	t.Helper()
	fields["type"] = "kafka"
	b, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func plainSASL(pw string) map[string]any {
	return map[string]any{"mechanism": "plain", "username": user, "password": pw}
}

// TestConformance runs desttest against kfake with SASL PLAIN: a wrong
// password is refused as Kafka refuses it (answerWrongPasswords), and
// the broker goes down by closing every connection and refusing every
// request until it is back.
func TestConformance(t *testing.T) {
	cluster := newCluster(t, "payouts", kfake.EnableSASL(), kfake.Superuser("PLAIN", user, password))
	answerWrongPasswords(cluster)
	var down atomic.Bool
	cluster.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if down.Load() {
			return nil, errors.New("broker down"), true
		}
		return nil, nil, false
	})
	records := newConsumer(t, cluster, "payouts", kgo.SASL(plain.Auth{User: user, Pass: password}.AsMechanism()))
	desttest.Run(t, desttest.Case{
		Kind:   kafka.New(),
		Config: dest(t, map[string]any{"brokers": cluster.ListenAddrs(), "topic": "payouts", "sasl": plainSASL(password)}),
		Receive: func(ctx context.Context, t testing.TB) desttest.Arrived {
			return arrived(records.next(ctx, t))
		},
		WrongCredentials: dest(t, map[string]any{"brokers": cluster.ListenAddrs(), "topic": "payouts", "sasl": plainSASL("wrong-password")}),
		Down: func(testing.TB) func() {
			down.Store(true)
			return func() { down.Store(false) }
		},
		Hostile: hostile(t),
		// No Oversized: Kafka's protocol bounds its own frames (franz-go
		// refuses a response over BrokerMaxReadBytes, 100 MiB by
		// default, before reading it).
	})
}

// hostile are rows of TestParse that desttest checks too.
func hostile(t testing.TB) []desttest.Hostile {
	return []desttest.Hostile{
		{Name: "a broker with a scheme", Config: dest(t, map[string]any{"brokers": []string{"kafka://k.example.com:9092"}, "topic": "t"}),
			Field: "destination.brokers[0]", Secret: "kafka://"},
		{Name: "a broker of a path", Config: dest(t, map[string]any{"brokers": []string{"/etc/hostname:1"}, "topic": "t"}),
			Field: "destination.brokers[0]", Secret: "/etc/hostname"},
		{Name: "eleven brokers", Config: dest(t, map[string]any{"brokers": strings.Split(strings.Repeat("k.example.com:9092,", 10)+"k.example.com:9092", ","),
			"topic": "t"}), Field: "destination.brokers"},
		{Name: "a topic with a slash", Config: dest(t, map[string]any{"brokers": []string{"k.example.com:9092"}, "topic": "../etc/hostname"}),
			Field: "destination.topic", Secret: "/etc/hostname"},
		{Name: "a SASL mechanism of Kerberos", Config: dest(t, map[string]any{"brokers": []string{"k.example.com:9092"}, "topic": "t",
			"sasl": map[string]any{"mechanism": "gssapi", "username": "u", "password": "hunter2-pw"}}), Field: "destination.sasl.mechanism", Secret: "hunter2-pw"},
		{Name: "a password with a newline", Config: dest(t, map[string]any{"brokers": []string{"k.example.com:9092"}, "topic": "t",
			"sasl": plainSASL("hunter2-pw\n")}), Field: "destination.sasl.password", Secret: "hunter2-pw"},
		{Name: "tls of a string", Config: `{"type": "kafka", "brokers": ["k.example.com:9092"], "topic": "t", "tls": "yes"}`, Field: "destination.tls"},
	}
}

// TestParse: the rules of each field, as a merchant meets them. Every
// refusal names its field, says what is accepted and never quotes the
// value.
func TestParse(t *testing.T) {
	const broker = "k1.example.com:9092"
	kafkaDest := func(fields map[string]any) string {
		if _, ok := fields["brokers"]; !ok {
			fields["brokers"] = []string{broker}
		}
		if _, ok := fields["topic"]; !ok {
			fields["topic"] = "payouts"
		}
		return dest(t, fields)
	}
	eleven := make([]string, 11)
	for i := range eleven {
		eleven[i] = fmt.Sprintf("k%d.example.com:9092", i)
	}
	const name = "must be at most 255 characters, none of them a control character."
	for _, r := range []struct {
		name, raw           string
		field, rule, reason string // field "" accepted; reason the message, when checked
	}{
		{"brokers, topic, SASL and TLS", kafkaDest(map[string]any{"brokers": []string{broker, "k2.example.com:9092"},
			"sasl": map[string]any{"mechanism": "scram-sha-512", "username": "u", "password": "pw-kafka"}, "tls": true}), "", "", ""},
		{"ten brokers", kafkaDest(map[string]any{"brokers": eleven[:10]}), "", "", ""},
		{"an IPv6 broker", kafkaDest(map[string]any{"brokers": []string{"[2001:db8::1]:9092"}}), "", "", ""},
		{"a topic of every legal character", kafkaDest(map[string]any{"topic": "Payouts.v1_eu-west"}), "", "", ""},
		{"a topic of 249", kafkaDest(map[string]any{"topic": strings.Repeat("t", 249)}), "", "", ""},
		{"each mechanism: plain", kafkaDest(map[string]any{"sasl": map[string]any{"mechanism": "plain", "username": "u", "password": "p"}}), "", "", ""},
		{"each mechanism: scram-sha-256", kafkaDest(map[string]any{"sasl": map[string]any{"mechanism": "scram-sha-256", "username": "u", "password": "p"}}), "", "", ""},
		{"sasl null", kafkaDest(map[string]any{"sasl": nil}), "", "", ""},
		{"no brokers", dest(t, map[string]any{"topic": "t"}), "destination.brokers", invalid.RuleMissing, ""},
		{"brokers empty", kafkaDest(map[string]any{"brokers": []string{}}), "destination.brokers", invalid.RuleMissing, ""},
		{"eleven brokers", kafkaDest(map[string]any{"brokers": eleven}), "destination.brokers", "destination_brokers_too_many",
			"destination.brokers must list at most 10 brokers."},
		{"a broker without a port", kafkaDest(map[string]any{"brokers": []string{"k1.example.com"}}), "destination.brokers[0]", "destination_broker_invalid",
			"destination.brokers[0] must be host:port, such as kafka-1.example.com:9092."},
		{"the second broker without a port", kafkaDest(map[string]any{"brokers": []string{broker, "k2.example.com"}}), "destination.brokers[1]",
			"destination_broker_invalid", ""},
		{"a broker with a scheme", kafkaDest(map[string]any{"brokers": []string{"kafka://k1.example.com:9092"}}), "destination.brokers[0]",
			"destination_broker_invalid", "destination.brokers[0] must be host:port, such as kafka-1.example.com:9092."},
		{"a broker of a scheme and no port", kafkaDest(map[string]any{"brokers": []string{"kafka://k1"}}), "destination.brokers[0]", "destination_port",
			"destination.brokers[0] has an invalid port."},
		{"a broker URL", kafkaDest(map[string]any{"brokers": []string{"https://k1.example.com:9092/"}}), "destination.brokers[0]", "destination_broker_invalid", ""},
		{"a broker of other characters", kafkaDest(map[string]any{"brokers": []string{"k/1:9092"}}), "destination.brokers[0]", "destination_host_invalid", ""},
		{"a broker of a path", kafkaDest(map[string]any{"brokers": []string{"/etc/hostname:1"}}), "destination.brokers[0]", "destination_host_invalid", ""},
		{"a broker with a zoned IPv6 host", kafkaDest(map[string]any{"brokers": []string{"[fe80::1%eth0]:9092"}}), "destination.brokers[0]",
			"destination_host_invalid", ""},
		{"a broker with no host", kafkaDest(map[string]any{"brokers": []string{":9092"}}), "destination.brokers[0]", "destination_no_host",
			"destination.brokers[0] must name a host."},
		{"a broker with port 0", kafkaDest(map[string]any{"brokers": []string{"k1.example.com:0"}}), "destination.brokers[0]", "destination_port",
			"destination.brokers[0] has an invalid port."},
		{"a broker with a port of letters", kafkaDest(map[string]any{"brokers": []string{"k1.example.com:kafka"}}), "destination.brokers[0]", "destination_port", ""},
		{"a broker with a control character", kafkaDest(map[string]any{"brokers": []string{"k1.example.com\n:9092"}}), "destination.brokers[0]",
			"destination_host_invalid", ""},
		{"a broker of a number", `{"type": "kafka", "brokers": [9092], "topic": "t"}`, "destination.brokers", "destination_field_invalid", ""},
		{"brokers of a string", `{"type": "kafka", "brokers": "k1.example.com:9092", "topic": "t"}`, "destination.brokers", "destination_field_invalid", ""},
		{"no topic", dest(t, map[string]any{"brokers": []string{broker}}), "destination.topic", invalid.RuleMissing, ""},
		{"a topic with a space", kafkaDest(map[string]any{"topic": "a b"}), "destination.topic", "destination_topic_invalid",
			"destination.topic must be 1 to 249 letters, digits, '.', '_' or '-'."},
		{"a topic of 250", kafkaDest(map[string]any{"topic": strings.Repeat("t", 250)}), "destination.topic", "destination_topic_invalid", ""},
		{"a topic with a slash", kafkaDest(map[string]any{"topic": "a/b"}), "destination.topic", "destination_topic_invalid", ""},
		{"a SASL mechanism of Kerberos", kafkaDest(map[string]any{"sasl": map[string]any{"mechanism": "gssapi", "username": "u", "password": "p"}}),
			"destination.sasl.mechanism", "destination_sasl_mechanism", `destination.sasl.mechanism must be "plain", "scram-sha-256" or "scram-sha-512".`},
		{"a SASL mechanism in upper case", kafkaDest(map[string]any{"sasl": map[string]any{"mechanism": "PLAIN", "username": "u", "password": "p"}}),
			"destination.sasl.mechanism", "destination_sasl_mechanism", ""},
		{"SASL without a mechanism", kafkaDest(map[string]any{"sasl": map[string]any{"username": "u", "password": "p"}}),
			"destination.sasl.mechanism", "destination_sasl_mechanism", ""},
		{"SASL without a username", kafkaDest(map[string]any{"sasl": map[string]any{"mechanism": "plain", "password": "p"}}),
			"destination.sasl.username", invalid.RuleMissing, ""},
		{"SASL without a password", kafkaDest(map[string]any{"sasl": map[string]any{"mechanism": "plain", "username": "u"}}),
			"destination.sasl.password", invalid.RuleMissing, ""},
		{"a username over 255", kafkaDest(map[string]any{"sasl": map[string]any{"mechanism": "plain", "username": strings.Repeat("u", 256), "password": "p"}}),
			"destination.sasl.username", "destination_name_invalid", "destination.sasl.username " + name},
		{"a password with a NUL", kafkaDest(map[string]any{"sasl": map[string]any{"mechanism": "plain", "username": "u", "password": "p\x00w"}}),
			"destination.sasl.password", "destination_name_invalid", "destination.sasl.password " + name},
		{"a SASL member of its own", kafkaDest(map[string]any{"sasl": map[string]any{"mechanism": "plain", "username": "u", "password": "p",
			"token_endpoint": "https://evil.example.com/"}}), "destination", "destination_field_invalid", ""},
		{"SASL of a string", kafkaDest(map[string]any{"sasl": "plain:u:p"}), "destination.sasl", "destination_field_invalid", ""},
		{"tls of a string", kafkaDest(map[string]any{"tls": "true"}), "destination.tls", "destination_field_invalid", ""},
		{"a field of another kind", kafkaDest(map[string]any{"url": "amqps://mq.example.com/"}), "destination.url", "destination_field_unknown", ""},
	} {
		t.Run(r.name, func(t *testing.T) {
			_, cfg, err := mustRegistry(t).Parse("destination", json.RawMessage(r.raw))
			if r.field == "" {
				if err != nil {
					t.Fatalf("Parse = %v, want accepted", err)
				}
				if _, ok := cfg.(kafka.Config); !ok {
					t.Fatalf("Parse = %T, want a kafka.Config", cfg)
				}
				return
			}
			var bad *invalid.Error
			if !errors.As(err, &bad) || bad.Param != r.field || bad.Rule != r.rule {
				t.Fatalf("Parse = %v, want %s on %s", err, r.rule, r.field)
			}
			if r.reason != "" && bad.Message != r.reason {
				t.Errorf("message %q, want %q", bad.Message, r.reason)
			}
			for _, quoted := range []string{"/etc/hostname", "kafka://", "evil.example.com", "gssapi", "eth0", "a b", "k/1"} {
				if strings.Contains(bad.Message, quoted) {
					t.Errorf("the refusal %q quotes %q", bad.Message, quoted)
				}
			}
		})
	}
}
func mustRegistry(t testing.TB) *destination.Registry {
	t.Helper()
	r, err := destination.NewRegistry(kafka.New())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestConfigShows: what reads, lists and logs show of a destination: the
// SASL password masked, never shown.
func TestConfigShows(t *testing.T) {
	_, cfg, err := mustRegistry(t).Parse("destination", json.RawMessage(`{"type":"kafka","brokers":["k1.example.com:9093","10.0.0.7:9093"],
		"topic":"payouts","tls":true,"sasl":{"mechanism":"plain","username":"u","password":"wJalrXUtnFEMI-secret"}}`))
	if err != nil {
		t.Fatal(err)
	}
	summary, _ := json.Marshal(cfg.Summary())
	want := `{"brokers":["k1.example.com:9093","10.0.0.7:9093"],"sasl":{"mechanism":"plain","password":"••••••","username":"u"},"tls":true,"topic":"payouts","type":"kafka"}`
	if string(summary) != want {
		t.Errorf("summary %s, want %s", summary, want)
	}
	if got := cfg.Target(); got != "kafka://k1.example.com:9093,10.0.0.7:9093/payouts" {
		t.Errorf("target %q", got)
	}
	wantAddrs := []destination.Address{{Field: "brokers[0]", Host: "k1.example.com"}, {Field: "brokers[1]", Host: "10.0.0.7"}}
	if got := cfg.Addresses(); fmt.Sprint(got) != fmt.Sprint(wantAddrs) {
		t.Errorf("addresses %+v, want %+v", got, wantAddrs)
	}
	if got := cfg.Plaintext(); got != "" {
		t.Errorf("plaintext with tls %q, want none", got)
	}
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("destination", "config", cfg)
	c := cfg.(kafka.Config)
	for _, printed := range []string{fmt.Sprintf("%v %+v %#v %s", cfg, cfg, cfg, cfg), fmt.Sprintf("%v %+v %#v", c.SASL, *c.SASL, c.SASL), logged.String()} {
		if strings.Contains(printed, "wJalrXUtnFEMI") {
			t.Errorf("printed as %s", printed)
		}
	}
	_, cfg, err = mustRegistry(t).Parse("destination", json.RawMessage(`{"type":"kafka","brokers":["k1.example.com:9092"],"topic":"t"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Plaintext(); got != "tls" {
		t.Errorf("plaintext without tls %q, want tls", got)
	}
	if summary, _ := json.Marshal(cfg.Summary()); string(summary) != `{"brokers":["k1.example.com:9092"],"tls":false,"topic":"t","type":"kafka"}` {
		t.Errorf("summary without SASL %s", summary)
	}
}

func testEnv(timeout time.Duration) destination.Env {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return destination.Env{Dial: d.DialContext, Timeout: timeout, Clock: clock.Or(nil), Version: "test"}
}

func open(t testing.TB, raw string, env destination.Env) destination.Publisher {
	t.Helper()
	typ, cfg, err := mustRegistry(t).Parse("destination", json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	p, err := mustRegistry(t).Open(typ, cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func send(t testing.TB, p destination.Publisher, m destination.Message) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := p.Send(ctx, m)
	if err != nil || res.Answer != "confirmed by broker" {
		code, said := destination.Classify(err)
		t.Fatalf("Send = %q, %s: %s (%v)", res.Answer, code, said, err)
	}
}

// TestRecordKeys: an unordered delivery's record is keyed by its event
// id, an ordered one's by its ordering key; and the records of each key
// of an ordered subscription, sent one after another as the engine
// sends them, arrive in order (three keys, ten records each, the keys
// sent at once).
func TestRecordKeys(t *testing.T) {
	cluster := newCluster(t, "payouts")
	records := newConsumer(t, cluster, "payouts")
	p := open(t, dest(t, map[string]any{"brokers": cluster.ListenAddrs(), "topic": "payouts"}), testEnv(5*time.Second))
	send(t, p, destination.Message{DeliveryID: "dlv_1", EventID: "evt_1", Body: []byte(`{"id":"evt_1"}`),
		Headers: map[string]string{"webhook-id": "evt_1", "x-merchant-header": "kept"}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := arrived(records.next(ctx, t))
	if r.Key != "evt_1" || string(r.Body) != `{"id":"evt_1"}` || r.Headers["webhook-id"] != "evt_1" || r.Headers["x-merchant-header"] != "kept" {
		t.Errorf("unordered record %+v, want keyed by the event id, its body and headers", r)
	}

	const perKey = 10
	keys := []string{"acct_a", "acct_b", "acct_c"}
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perKey {
				send(t, p, destination.Message{DeliveryID: fmt.Sprint("dlv_", k, i), EventID: fmt.Sprint("evt_", k, i), OrderingKey: k,
					Body: []byte(fmt.Sprintf(`{"account":%q,"n":%d}`, k, i))})
			}
		}()
	}
	wg.Wait()
	next := map[string]int{}
	for range perKey * len(keys) {
		r := records.next(ctx, t)
		var body struct {
			Account string `json:"account"`
			N       int    `json:"n"`
		}
		if err := json.Unmarshal(r.Value, &body); err != nil {
			t.Fatal(err)
		}
		if string(r.Key) != body.Account {
			t.Errorf("record key %q, want the ordering key %q", r.Key, body.Account)
		}
		if body.N != next[body.Account] {
			t.Errorf("%s: record %d came when %d was next", body.Account, body.N, next[body.Account])
		}
		next[body.Account] = body.N + 1
	}
}

// TestSCRAM: the SCRAM mechanisms log in (kfake checks SCRAM as Kafka
// does) and the record is produced.
func TestSCRAM(t *testing.T) {
	for _, c := range []struct{ mechanism, kfake string }{{"scram-sha-256", "SCRAM-SHA-256"}, {"scram-sha-512", "SCRAM-SHA-512"}} {
		t.Run(c.mechanism, func(t *testing.T) {
			cluster := newCluster(t, "payouts", kfake.EnableSASL(), kfake.Superuser(c.kfake, user, password))
			p := open(t, dest(t, map[string]any{"brokers": cluster.ListenAddrs(), "topic": "payouts",
				"sasl": map[string]any{"mechanism": c.mechanism, "username": user, "password": password}}), testEnv(5*time.Second))
			send(t, p, destination.Message{DeliveryID: "dlv_1", EventID: "evt_1", Body: []byte(`{}`)})
		})
	}
}

// TestRefusals: the broker's own answers, in the merchant's words: a
// topic the cluster does not have is broker_refused naming Kafka's
// error, a wrong password auth_failed naming Kafka's; a broker whose
// certificate is from no trusted authority fails saying so, a broker
// where nothing listens as unreachable. None names this server's
// addresses.
func TestRefusals(t *testing.T) {
	cluster := newCluster(t, "payouts", kfake.EnableSASL(), kfake.Superuser("PLAIN", user, password))
	answerWrongPasswords(cluster)
	tlsCluster := newCluster(t, "payouts", kfake.TLS(selfSigned(t)))
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nothing := free.Addr().String()
	_ = free.Close()
	for _, c := range []struct {
		name, raw  string
		code, said string
	}{
		{name: "no such topic", raw: dest(t, map[string]any{"brokers": cluster.ListenAddrs(), "topic": "webhookd-missing", "sasl": plainSASL(password)}),
			code: destination.CodeRefused, said: "the broker answered UNKNOWN_TOPIC_OR_PARTITION"},
		{name: "wrong password", raw: dest(t, map[string]any{"brokers": cluster.ListenAddrs(), "topic": "payouts", "sasl": plainSASL("wrong-password")}),
			code: destination.CodeAuthFailed, said: "the broker answered SASL_AUTHENTICATION_FAILED"},
		{name: "certificate of no trusted authority", raw: dest(t, map[string]any{"brokers": tlsCluster.ListenAddrs(), "topic": "payouts", "tls": true}),
			code: destination.CodeUnreachable, said: "TLS failed: the server's certificate is not from a trusted authority"},
		{name: "nothing listening", raw: dest(t, map[string]any{"brokers": []string{nothing}, "topic": "payouts"}),
			code: destination.CodeUnreachable, said: "connection refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := open(t, c.raw, testEnv(3*time.Second))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := p.Send(ctx, destination.Message{DeliveryID: "dlv_1", EventID: "evt_1", Body: []byte(`{}`)})
			code, said := destination.Classify(err)
			if code != c.code || said != c.said {
				t.Errorf("Send = %s: %q (%v), want %s: %q", code, said, err, c.code, c.said)
			}
			desttest.CheckMerchantWords(t, said)
		})
	}
}

// TestDialsThroughEnv: every connection, the bootstrap broker's and
// those to the leaders the cluster's metadata names, is dialled by
// env.Dial: thirty records over three partitions led by three brokers,
// the destination naming one of them, reach more than that one through
// it.
func TestDialsThroughEnv(t *testing.T) {
	cluster := newCluster(t, "payouts", kfake.NumBrokers(3))
	var mu sync.Mutex
	dialled := map[string]bool{}
	env := testEnv(5 * time.Second)
	plainDial := env.Dial
	env.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		mu.Lock()
		dialled[address] = true
		mu.Unlock()
		return plainDial(ctx, network, address)
	}
	p := open(t, dest(t, map[string]any{"brokers": cluster.ListenAddrs()[:1], "topic": "payouts"}), env)
	for i := range 30 {
		send(t, p, destination.Message{DeliveryID: fmt.Sprint("dlv_", i), EventID: fmt.Sprint("evt_", i), Body: []byte(`{}`)})
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialled) < 2 {
		t.Errorf("env.Dial dialled %v, want the leaders beside the bootstrap broker", dialled)
	}
}

// TestOpenRefusesAStoredValue: a Config not made by Parse (a value an
// older build stored) that breaks a rule is refused by Open as
// destination_invalid in the rule's words, before any dial.
func TestOpenRefusesAStoredValue(t *testing.T) {
	var dials atomic.Int32
	env := testEnv(time.Second)
	env.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		dials.Add(1)
		return nil, errors.New("no dial expected")
	}
	_, err := kafka.New().Open(kafka.Config{Brokers: []string{"/etc/hostname:1"}, Topic: "t"}, env)
	code, said := destination.Classify(err)
	if code != destination.CodeInvalid || said != "destination.brokers[0] must name a host by a DNS name or an IP address." {
		t.Errorf("Open = %s: %q (%v), want %s in the rule's words", code, said, err, destination.CodeInvalid)
	}
	if strings.Contains(said, "/etc/hostname") || dials.Load() != 0 {
		t.Errorf("said %q, %d dials; want no value quoted, no dial", said, dials.Load())
	}
}

// selfSigned is a TLS config for a listener on 127.0.0.1 whose
// certificate no authority signed.
func selfSigned(t testing.TB) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kafka.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
}
