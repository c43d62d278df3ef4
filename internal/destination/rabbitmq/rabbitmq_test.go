package rabbitmq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/desttest"
	"github.com/webhookd/webhookd/internal/destination/rabbitmq"
	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/testfixtures/tcpproxy"
)

// broker is the machine's RabbitMQ (.ci/services.sh starts it), shared
// with other tests: each test uses queues of its own and reaches the
// broker through a tcpproxy when it must take it away, never stopping
// the server.
const broker = "127.0.0.1:5672"

// The user the conformance run publishes as (.ci/services.sh adds it):
// its password differs from its name, so that a summary showing the
// name does not look like one showing the password; it may write to the
// default exchange and nothing else, as the docs tell merchants to set
// theirs up.
const (
	user     = "webhookd-conformance"
	password = "conformance-pw-5e1d"
)

// queue is a queue of the test's own on the machine's RabbitMQ
// (exclusive: it goes when the test's connection closes) and what
// reaches it.
type queue struct {
	name     string
	ch       *amqp.Channel
	messages <-chan amqp.Delivery
}

func newQueue(t testing.TB) queue {
	t.Helper()
	conn, err := amqp.Dial("amqp://guest:guest@" + broker + "/")
	if err != nil {
		t.Fatalf("no RabbitMQ at %s (bash .ci/services.sh starts it): %v", broker, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare("webhookd-kind-"+uuid.NewString(), false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return queue{name: q.Name, ch: ch, messages: msgs}
}

// next is the next message, before ctx ends.
func (q queue) next(ctx context.Context, t testing.TB) amqp.Delivery {
	t.Helper()
	select {
	case m := <-q.messages:
		return m
	case <-ctx.Done():
		t.Fatalf("no message on %s: %v", q.name, ctx.Err())
		return amqp.Delivery{}
	}
}

// arrived is a message as a consumer reads it, its AMQP headers as
// strings.
func arrived(m amqp.Delivery) desttest.Arrived {
	headers := make(map[string]string, len(m.Headers))
	for k, v := range m.Headers {
		headers[k] = fmt.Sprint(v)
	}
	return desttest.Arrived{Body: m.Body, Headers: headers, Key: m.RoutingKey}
}

// dest is a destination object as a merchant sends it.
func dest(t testing.TB, fields map[string]any) string {
	t.Helper()
	fields["type"] = "rabbitmq"
	b, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestConformance(t *testing.T) {
	q := newQueue(t)
	proxy := tcpproxy.New(t, broker)
	desttest.Run(t, desttest.Case{
		Kind:   rabbitmq.New(),
		Config: dest(t, map[string]any{"url": "amqp://" + user + ":" + password + "@" + proxy.Addr + "/", "routing_key": q.name}),
		Receive: func(ctx context.Context, t testing.TB) desttest.Arrived {
			return arrived(q.next(ctx, t))
		},
		WrongCredentials: dest(t, map[string]any{"url": "amqp://" + user + ":not-the-password@" + broker + "/", "routing_key": q.name}),
		Down: func(t testing.TB) func() {
			proxy.Down()
			return func() { proxy.Up(t) }
		},
		Hostile: hostile(t),
		// No Oversized: AMQP bounds its own frames (amqp091-go refuses a
		// frame over the negotiated frame_max, 128 KiB unless set) and a
		// publisher reads nothing but the broker's methods.
	})
}

// hostile are the rows of TestParse that desttest checks too, with the
// part of the value a refusal must not quote.
func hostile(t testing.TB) []desttest.Hostile {
	const base = "amqps://guest:s3cr3t-pw@mq.example.com:5671/v"
	var out []desttest.Hostile
	for _, option := range []string{"cacertfile=/etc/hostname", "certfile=/etc/hostname&keyfile=/etc/hostname", "keyfile=/dev/zero",
		"server_name_indication=/etc/hostname", "auth_mechanism=external", "heartbeat=0", "connection_timeout=1", "channel_max=1"} {
		out = append(out, desttest.Hostile{Name: "url with ?" + option, Config: dest(t, map[string]any{"url": base + "?" + option, "routing_key": "q"}),
			Field: "destination.url", Secret: "s3cr3t-pw"})
	}
	return append(out,
		desttest.Hostile{Name: "url with a fragment", Config: dest(t, map[string]any{"url": base + "#/etc/hostname", "routing_key": "q"}),
			Field: "destination.url", Secret: "/etc/hostname"},
		desttest.Hostile{Name: "url with a newline", Config: dest(t, map[string]any{"url": "amqps://u:s3cr3t-pw@mq.example.com/\nv", "routing_key": "q"}),
			Field: "destination.url", Secret: "s3cr3t-pw"},
		desttest.Hostile{Name: "routing key with a control character", Config: dest(t, map[string]any{"url": base, "routing_key": "q\x00/etc/hostname"}),
			Field: "destination.routing_key", Secret: "/etc/hostname"},
		desttest.Hostile{Name: "url of a number", Config: `{"type": "rabbitmq", "url": 5672}`, Field: "destination.url"},
	)
}

// TestParse: the rules of each field, as a merchant meets them. A url is
// scheme, user, password, host, port and vhost, nothing else: each
// option of amqp091-go's query (files it would open, the SNI, the
// authentication, the timing) is refused, as is a fragment. Every
// refusal names its field, says what is accepted and never quotes the
// value.
func TestParse(t *testing.T) {
	url := func(u string) string { return dest(t, map[string]any{"url": u, "routing_key": "q"}) }
	const good = "amqps://guest:guest@127.0.0.1:5671/v"
	const (
		urlInvalid = "destination.url must be an amqp:// or amqps:// URL such as amqps://user:password@broker.example.com/vhost, without a query or a fragment."
		urlOptions = "destination.url must not have a query or a fragment: the connection's options (TLS, heartbeat, authentication) are the engine's to set."
		name       = "must be at most 255 characters, none of them a control character."
	)
	type row struct {
		name, raw           string
		field, rule, reason string // field "" accepted; reason the message, when checked
	}
	rows := []row{
		{"url of typed parts", url(good), "", "", ""},
		{"url without a vhost", url("amqps://u:p@mq.example.com"), "", "", ""},
		{"url without credentials", url("amqp://mq.example.com/"), "", "", ""},
		{"url of an IPv6 host", url("amqps://u:p@[2001:db8::1]:5671/v"), "", "", ""},
		{"url with an upper-case scheme", url("AMQPS://u:p@mq.example.com/"), "", "", ""},
		{"an exchange without a routing key", dest(t, map[string]any{"url": good, "exchange": "webhooks"}), "", "", ""},
		{"url missing", dest(t, map[string]any{"routing_key": "q"}), "destination.url", invalid.RuleMissing, ""},
		{"url empty", url(""), "destination.url", invalid.RuleMissing, ""},
		{"url with a fragment", url(good + "#x"), "destination.url", "destination_url_options", urlOptions},
		{"url with an empty query", url(good + "?"), "destination.url", "destination_url_options", urlOptions},
		{"url with a zoned IPv6 host", url("amqps://[fe80::1%25eth0]:5671/"), "destination.url", "destination_host_invalid",
			"destination.url must name a host by a DNS name or an IP address."},
		{"url with a host of other characters", url("amqps://u:p@mq!example.com/"), "destination.url", "destination_host_invalid", ""},
		{"url with no host", url("amqps://u:p@/v"), "destination.url", "destination_no_host", "destination.url must name a host."},
		{"url with port 0", url("amqps://mq.example.com:0/"), "destination.url", "destination_port", "destination.url has an invalid port."},
		{"url with port 65536", url("amqps://mq.example.com:65536/"), "destination.url", "destination_port", ""},
		{"url with a port of leading zeros", url("amqps://mq.example.com:05671/"), "destination.url", "destination_port", ""},
		{"url of another scheme", url("http://mq.example.com/"), "destination.url", "destination_url_invalid", urlInvalid},
		{"url of no scheme", url("mq.example.com:5671"), "destination.url", "destination_url_invalid", urlInvalid},
		{"url opaque", url("amqps:mq.example.com"), "destination.url", "destination_url_invalid", urlInvalid},
		{"url with a space", url("amqps://mq.example.com/ v"), "destination.url", "destination_url_invalid", urlInvalid},
		{"url with a DEL", url("amqps://mq.example.com/\x7f"), "destination.url", "destination_url_invalid", urlInvalid},
		{"url with a control character in the vhost", url("amqps://mq.example.com/%01"), "destination.url", "destination_url_invalid", urlInvalid},
		{"url with a control character in the password", url("amqps://u:p%0A@mq.example.com/"), "destination.url", "destination_url_invalid", urlInvalid},
		{"url with a user over 255", url("amqps://" + strings.Repeat("u", 256) + ":p@mq.example.com/"), "destination.url", "destination_url_invalid", urlInvalid},
		{"url with a vhost over 255", url("amqps://mq.example.com/" + strings.Repeat("v", 256)), "destination.url", "destination_url_invalid", urlInvalid},
		{"url over 2,048", url("amqps://mq.example.com/" + strings.Repeat("v", 2048)), "destination.url", "destination_url_invalid", urlInvalid},
		{"no routing key with the default exchange", dest(t, map[string]any{"url": good}), "destination.routing_key", invalid.RuleMissing, ""},
		{"routing key over 255", dest(t, map[string]any{"url": good, "routing_key": strings.Repeat("q", 256)}), "destination.routing_key",
			"destination_name_invalid", "destination.routing_key " + name},
		{"routing key with a control character", dest(t, map[string]any{"url": good, "routing_key": "q\r\n"}), "destination.routing_key",
			"destination_name_invalid", ""},
		{"exchange over 255", dest(t, map[string]any{"url": good, "exchange": strings.Repeat("x", 256), "routing_key": "q"}), "destination.exchange",
			"destination_name_invalid", "destination.exchange " + name},
		{"exchange with a control character", dest(t, map[string]any{"url": good, "exchange": "x\x00"}), "destination.exchange", "destination_name_invalid", ""},
		{"url of the wrong JSON type", `{"type": "rabbitmq", "url": ["amqps://mq.example.com"], "routing_key": "q"}`, "destination.url",
			"destination_field_invalid", ""},
		{"a field of another kind", dest(t, map[string]any{"url": good, "routing_key": "q", "topic": "t"}), "destination.topic",
			"destination_field_unknown", ""},
		{"not an object", `"rabbitmq"`, "destination", "destination_not_object", ""},
	}
	for _, option := range []string{"cacertfile=/nonexistent/file", "certfile=/etc/hostname", "keyfile=/dev/zero",
		"server_name_indication=internal.example", "auth_mechanism=external", "heartbeat=1", "connection_timeout=1", "channel_max=1"} {
		rows = append(rows, row{"url with ?" + option, url(good + "?" + option), "destination.url", "destination_url_options", urlOptions})
	}
	registry, err := destination.NewRegistry(rabbitmq.New())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			_, cfg, err := registry.Parse("destination", json.RawMessage(r.raw))
			if r.field == "" {
				if err != nil {
					t.Fatalf("Parse = %v, want accepted", err)
				}
				if _, ok := cfg.(rabbitmq.Config); !ok {
					t.Fatalf("Parse = %T, want a rabbitmq.Config", cfg)
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
			for _, quoted := range []string{"/etc/hostname", "/nonexistent", "/dev/zero", "guest:guest", "internal.example", "eth0", "mq!example"} {
				if strings.Contains(bad.Message, quoted) {
					t.Errorf("the refusal %q quotes %q", bad.Message, quoted)
				}
			}
		})
	}
}

// TestConfigShows: what reads, lists and logs show of a destination:
// the url with its password as net/url masks it, never the password.
func TestConfigShows(t *testing.T) {
	_, cfg, err := mustRegistry(t).Parse("destination", json.RawMessage(
		`{"type":"rabbitmq","url":"amqps://u:wJalrXUtnFEMI@mq.example.com/prod","exchange":"webhooks","routing_key":"payouts"}`))
	if err != nil {
		t.Fatal(err)
	}
	summary, _ := json.Marshal(cfg.Summary())
	if want := `{"exchange":"webhooks","routing_key":"payouts","type":"rabbitmq","url":"amqps://u:xxxxx@mq.example.com/prod"}`; string(summary) != want {
		t.Errorf("summary %s, want %s", summary, want)
	}
	if got := cfg.Target(); got != "amqps://u:xxxxx@mq.example.com/prod" {
		t.Errorf("target %q", got)
	}
	if got := cfg.Addresses(); len(got) != 1 || got[0] != (destination.Address{Field: "url", Host: "mq.example.com"}) {
		t.Errorf("addresses %+v, want the url's host", got)
	}
	if got := cfg.Plaintext(); got != "" {
		t.Errorf("amqps plaintext %q, want none", got)
	}
	for _, printed := range []string{fmt.Sprint(cfg), fmt.Sprintf("%v %+v %#v %s", cfg, cfg, cfg, cfg), logged(cfg)} {
		if strings.Contains(printed, "wJalrXUtnFEMI") {
			t.Errorf("printed as %s", printed)
		}
	}
	u, _ := rabbitmq.ParseURL("url", "amqps://u:wJalrXUtnFEMI@mq.example.com/prod")
	if printed := fmt.Sprintf("%v %+v %#v", u, u, u); strings.Contains(printed, "wJalrXUtnFEMI") {
		t.Errorf("URL printed as %s", printed)
	}
	for raw, field := range map[string]string{"amqp://mq.example.com/": "url", "AMQP://mq.example.com/": "url", "AMQPS://mq.example.com/": ""} {
		_, cfg, err := mustRegistry(t).Parse("destination", json.RawMessage(dest(t, map[string]any{"url": raw, "routing_key": "q"})))
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Plaintext(); got != field {
			t.Errorf("%s: plaintext %q, want %q", raw, got, field)
		}
	}
	_, cfg, err = mustRegistry(t).Parse("destination", json.RawMessage(dest(t, map[string]any{"url": "amqps://[2001:db8::1]:5671/", "routing_key": "q"})))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Addresses(); got[0].Host != "2001:db8::1" {
		t.Errorf("IPv6 address %+v, want the host without brackets", got)
	}
}

func logged(v any) string {
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("destination", "config", v)
	return b.String()
}

func mustRegistry(t testing.TB) *destination.Registry {
	t.Helper()
	r, err := destination.NewRegistry(rabbitmq.New())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// countingEnv dials for real and counts the dials.
func countingEnv(n *atomic.Int32) destination.Env {
	return destination.Env{
		Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			n.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, network, address)
		},
		Timeout: 5 * time.Second, Clock: clock.Or(nil), Version: "test",
	}
}

// TestOpenDialsTypedParts: the publisher dials the parts of the url read
// by allow-list, never the url's text. A value stored by an older build
// with a library option in its query (?cacertfile= made amqp091-go open
// the file, /dev/zero grew a worker to 3 GiB), handed to Open, is refused
// as destination_invalid before any dial, in words that name neither the
// path nor the password. A url of typed parts publishes to the real
// broker: with credentials, without (guest, as the AMQP URI
// specification has it), with the vhost / written %2F.
func TestOpenDialsTypedParts(t *testing.T) {
	q := newQueue(t)
	var dials atomic.Int32
	env := countingEnv(&dials)
	for _, option := range []string{"cacertfile=/etc/hostname", "certfile=/etc/hostname&keyfile=/etc/hostname", "keyfile=/dev/zero",
		"auth_mechanism=external", "heartbeat=0", "server_name_indication=/etc/hostname"} {
		t.Run(option, func(t *testing.T) {
			stored := rabbitmq.Config{URL: "amqps://guest:s3cr3t-pw@" + broker + "/?" + option, RoutingKey: q.name}
			p, err := rabbitmq.New().Open(stored, env)
			if err == nil {
				_ = p.Close()
				t.Fatal("Open accepted a url with an option")
			}
			code, said := destination.Classify(err)
			if code != destination.CodeInvalid {
				t.Errorf("Open = %s (%v), want %s", code, err, destination.CodeInvalid)
			}
			for _, text := range []string{said, err.Error()} {
				if strings.Contains(text, "/etc/hostname") || strings.Contains(text, "/dev/zero") || strings.Contains(text, "s3cr3t") {
					t.Errorf("the refusal names what the url held: %s", text)
				}
			}
			if want := "destination.url must not have a query or a fragment: the connection's options (TLS, heartbeat, authentication) are the engine's to set."; said != want {
				t.Errorf("said %q, want the rule's words %q", said, want)
			}
			if n := dials.Load(); n != 0 {
				t.Errorf("%d dials for a refused destination, want none", n)
			}
		})
	}
	for _, url := range []string{"amqp://guest:guest@" + broker + "/", "amqp://" + broker, "amqp://guest:guest@" + broker + "/%2F"} {
		t.Run(url, func(t *testing.T) {
			p := open(t, dest(t, map[string]any{"url": url, "routing_key": q.name}), env)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			res, err := p.Send(ctx, destination.Message{DeliveryID: "d-" + uuid.NewString(), Body: []byte(`{"url":"` + url + `"}`)})
			if err != nil || res.Answer != "confirmed by broker" {
				t.Fatalf("Send = %q, %v", res.Answer, err)
			}
			if m := q.next(ctx, t); !strings.Contains(string(m.Body), url) {
				t.Fatalf("the queue holds %q, want the message published", m.Body)
			}
		})
	}
	if dials.Load() == 0 {
		t.Error("the publisher dialled through something else than env.Dial")
	}
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

func defaultEnv() destination.Env {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return destination.Env{Dial: d.DialContext, Timeout: 5 * time.Second, Clock: clock.Or(nil), Version: "test"}
}

// TestMessageProperties: a delivery is one persistent message, its
// content type the body's, its message-id the delivery id (a consumer
// drops duplicates by it), its timestamp the signing time, its headers
// the message's.
func TestMessageProperties(t *testing.T) {
	q := newQueue(t)
	p := open(t, dest(t, map[string]any{"url": "amqp://guest:guest@" + broker + "/", "routing_key": q.name}), defaultEnv())
	signed := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	for _, contentType := range []string{"application/json", "application/jose"} {
		m := destination.Message{DeliveryID: "dlv_" + uuid.NewString(), EventID: "evt_1", Body: []byte(`{"id":"evt_1"}`), ContentType: contentType,
			Headers: map[string]string{"webhook-id": "evt_1", "content-type": contentType, "x-merchant-header": "kept"}, SignedAt: signed, Size: 1}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if _, err := p.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
		got := q.next(ctx, t)
		cancel()
		if got.DeliveryMode != amqp.Persistent || got.ContentType != contentType || got.MessageId != m.DeliveryID || !got.Timestamp.Equal(signed) {
			t.Errorf("message: mode %d, type %q, id %q, timestamp %v; want persistent, %s, %s, %v",
				got.DeliveryMode, got.ContentType, got.MessageId, got.Timestamp, contentType, m.DeliveryID, signed)
		}
		if string(got.Body) != string(m.Body) || got.Headers["webhook-id"] != "evt_1" || got.Headers["x-merchant-header"] != "kept" {
			t.Errorf("message %s, headers %v", got.Body, got.Headers)
		}
	}
}

// TestRefusals: the broker's own answers, in the merchant's words: a
// missing exchange is broker_refused with the broker's reply, a message
// no queue takes is returned and refused, a wrong password auth_failed;
// none of them names this server's addresses.
func TestRefusals(t *testing.T) {
	missing := "webhookd-test-missing-" + uuid.NewString()
	noQueue := "webhookd-test-no-queue-" + uuid.NewString()
	for _, c := range []struct {
		name, raw, code, said string
	}{
		{"no such exchange", dest(t, map[string]any{"url": "amqp://guest:guest@" + broker + "/", "exchange": missing}),
			destination.CodeRefused, "the broker answered 404 NOT_FOUND - no exchange '" + missing + "' in vhost '/'"},
		{"no queue bound", dest(t, map[string]any{"url": "amqp://guest:guest@" + broker + "/", "routing_key": noQueue}),
			destination.CodeRefused, `returned by the broker: 312 NO_ROUTE (no queue bound to exchange "" with routing key "` + noQueue + `")`},
		{"wrong password", dest(t, map[string]any{"url": "amqp://guest:not-the-password@" + broker + "/", "routing_key": noQueue}),
			destination.CodeAuthFailed, "the broker answered 403 username or password not allowed"},
		{"no such vhost", dest(t, map[string]any{"url": "amqp://guest:guest@" + broker + "/webhookd-no-vhost", "routing_key": noQueue}),
			destination.CodeRefused, "the broker answered 530 NOT_ALLOWED - vhost webhookd-no-vhost not found"},
		{"nothing listening", dest(t, map[string]any{"url": "amqp://guest:guest@127.0.0.1:1/", "routing_key": noQueue}),
			destination.CodeUnreachable, "connection refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := open(t, c.raw, defaultEnv())
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := p.Send(ctx, destination.Message{DeliveryID: "d", Body: []byte(`{}`)})
			code, said := destination.Classify(err)
			if code != c.code || said != c.said {
				t.Errorf("Send = %s: %q (%v), want %s: %q", code, said, err, c.code, c.said)
			}
			desttest.CheckMerchantWords(t, said)
		})
	}
}

// TestOutagesLoseNothing, the publisher's part of the engine's fault
// test: 200 messages sent by four senders, each retried until taken as
// the engine retries, while the broker is cut off twice (every
// connection closed): every message reaches the queue at least once, and
// the duplicates (a Send whose confirm was lost is made again) are
// counted by message id and reported.
func TestOutagesLoseNothing(t *testing.T) {
	q := newQueue(t)
	proxy := tcpproxy.New(t, broker)
	env := defaultEnv()
	env.Timeout = 2 * time.Second
	p := open(t, dest(t, map[string]any{"url": "amqp://guest:guest@" + proxy.Addr + "/", "routing_key": q.name}), env)
	const messages, senders = 200, 4
	var failed atomic.Int32
	next := make(chan int)
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				m := destination.Message{DeliveryID: fmt.Sprint("d-", i), Body: []byte(fmt.Sprint(`{"n":`, i, `}`))}
				for try := 0; ; try++ {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					_, err := p.Send(ctx, m)
					cancel()
					if err == nil {
						break
					}
					failed.Add(1)
					if code, _ := destination.Classify(err); code != destination.CodeUnreachable && code != destination.CodeNotConfirmed {
						t.Errorf("message %d failed as %s (%v) during an outage", i, code, err)
						return
					}
					if try > 100 {
						t.Errorf("message %d never taken: %v", i, err)
						return
					}
					time.Sleep(100 * time.Millisecond) // kept: the pace of the retries
				}
			}
		}()
	}
	for i := range messages {
		next <- i
		if i == 50 || i == 150 {
			proxy.Down()
			time.Sleep(500 * time.Millisecond) // the broker stays away a while: sends fail meanwhile
			proxy.Up(t)
		}
	}
	close(next)
	wg.Wait()
	got := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(got) < messages {
		got[q.next(ctx, t).MessageId]++
	}
	duplicates := 0
	for _, n := range got {
		duplicates += n - 1
	}
	t.Logf("%d messages: %d in the queue, %d duplicates so far; %d sends failed during the outages", messages, len(got), duplicates, failed.Load())
	if failed.Load() == 0 {
		t.Error("no send failed: the outages did not happen while sending")
	}
}
