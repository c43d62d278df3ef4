package sqs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/desttest"
	"github.com/webhookd/webhookd/internal/destination/sqs"
	"github.com/webhookd/webhookd/internal/invalid"
)

// config is an sqs destination object of queueURL at srv, signed with
// key.
func config(t testing.TB, srv *sqsServer, queueURL, key string) string {
	return destJSON(t, map[string]any{"type": "sqs", "queue_url": queueURL, "region": "eu-west-1",
		"access_key_id": key, "secret_access_key": "goaws-takes-any-secret", "endpoint": srv.endpoint()})
}

// destJSON is a destination as a merchant sends it.
func destJSON(t testing.TB, fields map[string]any) string {
	t.Helper()
	b, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestConformance: the conformance suite against goaws, on a FIFO queue
// (the queue that keeps an ordering key's order, Metadata.Ordered); wrong
// credentials are an access key the server does not know; the server
// stopped and started again on its address is the target down and back.
func TestConformance(t *testing.T) {
	srv := newSQSServer(t)
	queueURL := srv.queue(t, true)
	desttest.Run(t, desttest.Case{
		Kind:             sqs.New(sqs.Options{}),
		Config:           config(t, srv, queueURL, accessKey),
		Receive:          srv.receiver(queueURL),
		WrongCredentials: config(t, srv, queueURL, "AKIAUNKNOWN"),
		Down:             srv.down,
		Hostile:          hostile(),
		Oversized: func(url string) string {
			return `{"type":"sqs","queue_url":"https://sqs.eu-west-1.amazonaws.com/123456789012/q","region":"eu-west-1",` +
				`"access_key_id":"AKIAMERCHANT","secret_access_key":"merchant-secret","endpoint":"` + url + `"}`
		},
	})
}

// hostile are values the kind refuses, naming their field and never
// quoting them.
func hostile() []desttest.Hostile {
	const q = `"queue_url":"https://sqs.eu-west-1.amazonaws.com/1/q"`
	const key = `"access_key_id":"AKIA","secret_access_key":"hunter2-secret"`
	return []desttest.Hostile{
		{Name: "a queue URL with credentials", Config: `{"type":"sqs","queue_url":"https://u:hunter2@sqs.example.com/1/q","region":"eu-west-1",` + key + `}`,
			Field: "destination.queue_url", Secret: "hunter2"},
		{Name: "an endpoint with a query", Config: `{"type":"sqs",` + q + `,"region":"eu-west-1",` + key + `,"endpoint":"https://sqs.example.com/?Action=x"}`,
			Field: "destination.endpoint", Secret: "Action=x"},
		{Name: "an endpoint of a file", Config: `{"type":"sqs",` + q + `,"region":"eu-west-1",` + key + `,"endpoint":"file:///etc/passwd"}`,
			Field: "destination.endpoint", Secret: "/etc/passwd"},
		{Name: "a control character in the key", Config: `{"type":"sqs",` + q + `,"region":"eu-west-1","access_key_id":"AKIA\u0000x","secret_access_key":"s"}`,
			Field: "destination.access_key_id"},
		{Name: "an oversized secret", Config: `{"type":"sqs",` + q + `,"region":"eu-west-1","access_key_id":"AKIA","secret_access_key":"` +
			strings.Repeat("hunter2", 40) + `"}`, Field: "destination.secret_access_key", Secret: "hunter2"},
		{Name: "a region of a path", Config: `{"type":"sqs",` + q + `,"region":"../../etc",` + key + `}`, Field: "destination.region", Secret: "../../etc"},
		{Name: "a queue URL of the wrong type", Config: `{"type":"sqs","queue_url":["https://sqs.example.com/1/q"],"region":"eu-west-1",` + key + `}`,
			Field: "destination.queue_url"},
		{Name: "no key and no engine credentials", Config: `{"type":"sqs",` + q + `,"region":"eu-west-1"}`, Field: "destination.access_key_id"},
	}
}

// TestParse: the rules of each field, as a spec: the field named, the
// rule, and the words the API answers (which never quote the value).
func TestParse(t *testing.T) {
	t.Parallel()
	reg, err := destination.NewRegistry(sqs.New(sqs.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	dest := func(change map[string]any) string {
		fields := map[string]any{"type": "sqs", "queue_url": "https://sqs.eu-west-1.amazonaws.com/123456789012/q", "region": "eu-west-1",
			"access_key_id": "AKIAMERCHANT", "secret_access_key": "hunter2-secret"}
		for k, v := range change {
			if v == nil {
				delete(fields, k)
				continue
			}
			fields[k] = v
		}
		return destJSON(t, fields)
	}
	for _, tc := range []struct {
		name, dest, param, rule string // rule "" accepted
		message                 string // the refusal's words, when checked whole
	}{
		{"a queue", dest(nil), "", "", ""},
		{"a FIFO queue", dest(map[string]any{"queue_url": "https://sqs.eu-west-1.amazonaws.com/123456789012/q.fifo"}), "", "", ""},
		{"an http:// queue (the operator's rule, not the shape's)", dest(map[string]any{"queue_url": "http://sqs.example.com/1/q"}), "", "", ""},
		{"an endpoint", dest(map[string]any{"endpoint": "https://vpce-1.sqs.eu-west-1.vpce.amazonaws.com"}), "", "", ""},
		{"no queue URL", dest(map[string]any{"queue_url": nil}), "destination.queue_url", invalid.RuleMissing, "destination.queue_url is required."},
		{"a queue URL over 2,048 characters", dest(map[string]any{"queue_url": "https://sqs.example.com/" + strings.Repeat("q", 2048)}),
			"destination.queue_url", "url_too_long", "destination.queue_url must be at most 2048 characters."},
		{"a queue URL with a space", dest(map[string]any{"queue_url": "https://sqs.example.com/1/q x"}),
			"destination.queue_url", "url_control_characters", "destination.queue_url must not contain spaces or control characters."},
		{"a queue URL with a control character", dest(map[string]any{"queue_url": "https://sqs.example.com/1/q\r\nHost: evil"}),
			"destination.queue_url", "url_control_characters", ""},
		{"a relative queue URL", dest(map[string]any{"queue_url": "/123456789012/q"}),
			"destination.queue_url", "url_not_absolute", "destination.queue_url must be an absolute URL such as https://example.com/webhooks."},
		{"a queue URL of another scheme", dest(map[string]any{"queue_url": "ftp://sqs.example.com/1/q"}),
			"destination.queue_url", "url_not_https", "destination.queue_url must use https."},
		{"a queue URL with credentials", dest(map[string]any{"queue_url": "https://u:hunter2@sqs.example.com/1/q"}),
			"destination.queue_url", "url_credentials", "destination.queue_url must not contain credentials; authenticate deliveries by their signature."},
		{"a queue URL with a fragment", dest(map[string]any{"queue_url": "https://sqs.example.com/1/q#x"}),
			"destination.queue_url", "url_fragment", "destination.queue_url must not contain a fragment."},
		{"a queue URL without a host", dest(map[string]any{"queue_url": "https://:443/1/q"}),
			"destination.queue_url", "url_no_host", "destination.queue_url must name a host."},
		{"a queue URL with port 70000", dest(map[string]any{"queue_url": "https://sqs.example.com:70000/1/q"}),
			"destination.queue_url", "url_port", "destination.queue_url has an invalid port."},
		{"a queue URL of the wrong type", dest(map[string]any{"queue_url": 1}), "destination.queue_url", "destination_field_invalid", ""},
		{"an endpoint with a query", dest(map[string]any{"endpoint": "https://sqs.example.com/?Action=x"}),
			"destination.endpoint", "destination_endpoint_invalid", "destination.endpoint must be a URL without a query, such as https://sqs.example.com."},
		{"an endpoint with an empty query", dest(map[string]any{"endpoint": "https://sqs.example.com/?"}),
			"destination.endpoint", "destination_endpoint_invalid", ""},
		{"an endpoint with credentials", dest(map[string]any{"endpoint": "https://u:hunter2@sqs.example.com"}), "destination.endpoint", "url_credentials", ""},
		{"an endpoint of a file", dest(map[string]any{"endpoint": "file:///etc/passwd"}), "destination.endpoint", "url_not_https", ""},
		{"no region", dest(map[string]any{"region": nil}), "destination.region", invalid.RuleMissing, "destination.region is required."},
		{"a region of another shape", dest(map[string]any{"region": "Europe"}),
			"destination.region", "destination_region_invalid", "destination.region must be an AWS region such as eu-west-1."},
		{"a key without its secret", dest(map[string]any{"secret_access_key": nil}),
			"destination.secret_access_key", invalid.RuleMissing, "destination.secret_access_key is required."},
		{"a secret without its key", dest(map[string]any{"access_key_id": nil}), "destination.access_key_id", invalid.RuleMissing, ""},
		{"a key with a control character", dest(map[string]any{"access_key_id": "AKIA\x7f"}), "destination.access_key_id", "destination_name_invalid",
			"destination.access_key_id must be at most 255 characters, none of them a control character."},
		{"a secret over 255 characters", dest(map[string]any{"secret_access_key": strings.Repeat("hunter2", 37)}),
			"destination.secret_access_key", "destination_name_invalid", ""},
		{"no key, and the engine's credentials not allowed", dest(map[string]any{"access_key_id": nil, "secret_access_key": nil}),
			"destination.access_key_id", invalid.RuleMissing,
			"destination.access_key_id is required: give access_key_id and secret_access_key of an IAM user allowed sqs:SendMessage on the queue."},
		{"a member the kind does not have", dest(map[string]any{"session_token": "x"}), "destination.session_token", "destination_field_unknown", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, cfg, err := reg.Parse("destination", json.RawMessage(tc.dest))
			if tc.rule == "" {
				if err != nil {
					t.Fatalf("Parse = %v, want accepted", err)
				}
				if cfg.Target() == "" {
					t.Error("no target")
				}
				return
			}
			var bad *invalid.Error
			if !errors.As(err, &bad) || bad.Param != tc.param || bad.Rule != tc.rule {
				t.Fatalf("Parse = %#v, want %s on %s", err, tc.rule, tc.param)
			}
			if tc.message != "" && bad.Message != tc.message {
				t.Errorf("refusal %q, want %q", bad.Message, tc.message)
			}
			for _, quoted := range []string{"hunter2", "/etc/passwd", "Action=x", "evil"} {
				if strings.Contains(bad.Message, quoted) {
					t.Errorf("refusal %q quotes %q", bad.Message, quoted)
				}
			}
		})
	}
}

// TestConfigReads: what a read, the target, the operator's rules and a
// log see of a destination.
func TestConfigReads(t *testing.T) {
	t.Parallel()
	reg, err := destination.NewRegistry(sqs.New(sqs.Options{EngineQueues: []string{"https://sqs.eu-west-1.amazonaws.com/123456789012/"}}))
	if err != nil {
		t.Fatal(err)
	}
	parse := func(raw string) destination.Config {
		t.Helper()
		_, cfg, err := reg.Parse("destination", json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	keyed := parse(`{"type":"sqs","queue_url":"http://sqs.example.com/1/q","region":"eu-west-1","access_key_id":"AKIAMERCHANT",` +
		`"secret_access_key":"hunter2-secret","endpoint":"https://10.0.0.1:9324"}`)
	summary, _ := json.Marshal(keyed.Summary())
	if want := `{"access_key_id":"AKIAMERCHANT","endpoint":"https://10.0.0.1:9324","queue_url":"http://sqs.example.com/1/q",` +
		`"region":"eu-west-1","secret_access_key":"••••••","type":"sqs"}`; string(summary) != want {
		t.Errorf("summary %s, want %s", summary, want)
	}
	if keyed.Target() != "http://sqs.example.com/1/q" || keyed.Plaintext() != "queue_url" {
		t.Errorf("target %q, plaintext %q", keyed.Target(), keyed.Plaintext())
	}
	addrs := keyed.Addresses()
	if len(addrs) != 2 || addrs[0] != (destination.Address{Field: "queue_url", URL: "http://sqs.example.com/1/q"}) ||
		addrs[1] != (destination.Address{Field: "endpoint", URL: "https://10.0.0.1:9324"}) {
		t.Errorf("addresses %+v, want the queue URL and the endpoint as URLs", addrs)
	}
	for _, printed := range []string{keyed.(interface{ String() string }).String(), keyed.(interface{ GoString() string }).GoString()} {
		if strings.Contains(printed, "hunter2") {
			t.Errorf("printed %q shows the secret", printed)
		}
	}

	engine := parse(`{"type":"sqs","queue_url":"https://sqs.eu-west-1.amazonaws.com/123456789012/q","region":"eu-west-1","endpoint":"https://sqs.eu-west-1.amazonaws.com"}`)
	summary, _ = json.Marshal(engine.Summary())
	if want := `{"credentials":"engine","endpoint":"https://sqs.eu-west-1.amazonaws.com","queue_url":"https://sqs.eu-west-1.amazonaws.com/123456789012/q",` +
		`"region":"eu-west-1","type":"sqs"}`; string(summary) != want {
		t.Errorf("summary %s, want %s", summary, want)
	}
	if engine.Plaintext() != "" {
		t.Errorf("plaintext %q, want none", engine.Plaintext())
	}
	plainEndpoint := parse(`{"type":"sqs","queue_url":"https://sqs.eu-west-1.amazonaws.com/1/q","region":"eu-west-1","access_key_id":"a",` +
		`"secret_access_key":"s","endpoint":"HTTP://sqs.example.com"}`)
	if plainEndpoint.Plaintext() != "endpoint" {
		t.Errorf("plaintext %q, want endpoint", plainEndpoint.Plaintext())
	}
	stored, err := destination.Encode("sqs", engine)
	if err != nil || strings.Contains(string(stored), "access_key") {
		t.Errorf("stored %s (%v), want no key at all", stored, err)
	}
}

// TestEngineCredentialsRules: a destination without an access key is
// refused unless the operator allows the engine's credentials for its
// queue; allowed, it reads as "credentials": "engine" and stores no key;
// a key given is always the one stored and shown.
func TestEngineCredentialsRules(t *testing.T) {
	t.Parallel()
	const prefix = "https://sqs.eu-west-1.amazonaws.com/123456789012/"
	off, err := destination.NewRegistry(sqs.New(sqs.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	on, err := destination.NewRegistry(sqs.New(sqs.Options{EngineQueues: []string{prefix, "https://sqs.us-east-1.amazonaws.com/210987654321/"}}))
	if err != nil {
		t.Fatal(err)
	}
	const key = `,"access_key_id":"AKIAMERCHANT","secret_access_key":"merchant-secret-key"`
	dest := func(queueURL, extra string) string {
		return `{"type":"sqs","queue_url":"` + queueURL + `","region":"eu-west-1"` + extra + `}`
	}
	for _, tc := range []struct {
		name      string
		reg       *destination.Registry
		dest      string
		param     string // "" accepted
		rule      string // the fault's rule, when param is set
		engine    bool   // accepted with the engine's credentials
		wantStore string // the access key stored, when accepted
	}{
		{"off: key required", off, dest(prefix+"payouts", ""), "destination.access_key_id", invalid.RuleMissing, false, ""},
		{"off: key given", off, dest(prefix+"payouts", key), "", "", false, "AKIAMERCHANT"},
		{"on: under a listed prefix", on, dest(prefix+"payouts", ""), "", "", true, ""},
		{"on: FIFO queue under the second prefix", on, dest("https://sqs.us-east-1.amazonaws.com/210987654321/payouts.fifo", ""), "", "", true, ""},
		{"on: another account", on, dest("https://sqs.eu-west-1.amazonaws.com/999999999999/payouts", ""),
			"destination.access_key_id", "destination_engine_credentials_refused", false, ""},
		{"on: an account that starts the same", on, dest("https://sqs.eu-west-1.amazonaws.com/1234567890123/payouts", ""),
			"destination.access_key_id", "destination_engine_credentials_refused", false, ""},
		{"on: a path climbing out of the prefix", on, dest(prefix+"../999999999999/payouts", ""),
			"destination.access_key_id", "destination_engine_credentials_refused", false, ""},
		{"on: a query after the queue", on, dest(prefix+"payouts?QueueUrl=x", ""),
			"destination.access_key_id", "destination_engine_credentials_refused", false, ""},
		{"on: an endpoint of the merchant's", on, dest(prefix+"payouts", `,"endpoint":"https://sqs.example.com"`),
			"destination.access_key_id", "destination_engine_credentials_refused", false, ""},
		{"on: the queue's own origin as endpoint", on, dest(prefix+"payouts", `,"endpoint":"https://sqs.eu-west-1.amazonaws.com"`), "", "", true, ""},
		{"on: key given under a listed prefix is used", on, dest(prefix+"payouts", key), "", "", false, "AKIAMERCHANT"},
		{"on: key given elsewhere", on, dest("https://sqs.eu-west-1.amazonaws.com/999999999999/payouts", key), "", "", false, "AKIAMERCHANT"},
		{"on: half a key", on, dest(prefix+"payouts", `,"access_key_id":"AKIAMERCHANT"`), "destination.secret_access_key", invalid.RuleMissing, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, cfg, err := tc.reg.Parse("destination", json.RawMessage(tc.dest))
			if tc.param != "" {
				var e *invalid.Error
				if !errors.As(err, &e) || e.Param != tc.param || e.Rule != tc.rule {
					t.Fatalf("Parse = %#v, want a fault of %s (%s)", err, tc.param, tc.rule)
				}
				if !strings.Contains(e.Message, tc.param) || strings.Contains(e.Message, "123456789012") {
					t.Errorf("message %q: want it to say what to give, and never the listed prefixes", e.Message)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			summary := cfg.Summary()
			shown, _ := json.Marshal(summary)
			if tc.engine != (summary["credentials"] == sqs.EngineCredentials) {
				t.Errorf("summary %s: engine credentials %v, want %v", shown, summary["credentials"], tc.engine)
			}
			if _, hasKey := summary["access_key_id"]; hasKey == tc.engine || strings.Contains(string(shown), "merchant-secret-key") {
				t.Errorf("summary %s: want the key id shown only when given, and never the secret", shown)
			}
			if stored := cfg.(sqs.Config).AccessKeyID; stored != tc.wantStore {
				t.Errorf("stored access key %q, want %q", stored, tc.wantStore)
			}
		})
	}
}

// TestCheckEngineQueues: a prefix is an http(s) URL whose path ends in
// "/", so that it cannot match more than the operator meant.
func TestCheckEngineQueues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		prefix string
		ok     bool
	}{
		{"https://sqs.eu-west-1.amazonaws.com/123456789012/", true},
		{"https://sqs.eu-west-1.amazonaws.com/", true},
		{"http://127.0.0.1:4100/000000000000/", true},
		{"https://sqs.eu-west-1.amazonaws.com/123456789012", false},
		{"https://sqs.eu-west-1.amazonaws.com", false},
		{"123456789012", false},
		{"ftp://sqs.eu-west-1.amazonaws.com/1/", false},
		{"https://user:pw@sqs.eu-west-1.amazonaws.com/1/", false},
		{"https://sqs.eu-west-1.amazonaws.com/1/?x=1/", false},
		{"https://sqs.eu-west-1.amazonaws.com/1/../2/", false},
		{"https:///1/", false},
	} {
		if err := sqs.CheckEngineQueues([]string{tc.prefix}); (err == nil) != tc.ok {
			t.Errorf("CheckEngineQueues(%q) = %v, want ok %v", tc.prefix, err, tc.ok)
		}
	}
}

// testEnv is a plain dialer's Env.
func testEnv() destination.Env {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return destination.Env{Dial: d.DialContext, Timeout: 5 * time.Second, Clock: clock.Or(nil), Version: "test"}
}

// open parses raw with kind and opens its publisher.
func open(t *testing.T, kind destination.Kind, raw string) destination.Publisher {
	t.Helper()
	reg, err := destination.NewRegistry(kind)
	if err != nil {
		t.Fatal(err)
	}
	typ, cfg, err := reg.Parse("destination", json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	p, err := reg.Open(typ, cfg, testEnv())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// message is a delivery's message, its ordering key key ("" unordered).
func message(deliveryID, key string) destination.Message {
	h := map[string]string{"webhook-id": "msg_" + deliveryID, "webhook-timestamp": "1700000000", "webhook-signature": "v1,x",
		"content-type": "application/json", "user-agent": "webhookd/test"}
	if key != "" {
		h["webhook-ordering-key"], h["webhook-sequence"] = key, "1"
	}
	return destination.Message{DeliveryID: deliveryID, EventID: "evt_" + deliveryID, Body: []byte(`{"id":"` + deliveryID + `"}`),
		ContentType: "application/json", Headers: h, OrderingKey: key, Size: 1}
}

func send(t *testing.T, p destination.Publisher, m destination.Message) (destination.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.Send(ctx, m)
}

// TestFIFOGroupsAndDeduplication: on a FIFO queue an ordered message's
// group is its ordering key (or the key's SHA-256 when SQS would refuse
// it), an unordered one's its delivery id, and the deduplication id is
// always the delivery id.
func TestFIFOGroupsAndDeduplication(t *testing.T) {
	srv := newSQSServer(t)
	queueURL := srv.queue(t, true)
	p := open(t, sqs.New(sqs.Options{}), config(t, srv, queueURL, accessKey))
	long := strings.Repeat("k", 129)
	for _, m := range []destination.Message{message("d1", "acct_a"), message("d2", "acct_b"), message("d3", ""), message("d4", long)} {
		res, err := send(t, p, m)
		if err != nil || !strings.HasPrefix(res.Answer, "confirmed by broker (message id ") {
			t.Fatalf("send %s: %q, %v", m.DeliveryID, res.Answer, err)
		}
	}
	sends := srv.sends(queueURL)
	want := [][2]string{{"acct_a", "d1"}, {"acct_b", "d2"}, {"d3", "d3"}}
	if len(sends) != 4 {
		t.Fatalf("%d SendMessage requests, want 4", len(sends))
	}
	for i, w := range want {
		if sends[i].MessageGroupID != w[0] || sends[i].MessageDeduplicationID != w[1] {
			t.Errorf("SendMessage %d: group %q, deduplication id %q; want %q, %q", i, sends[i].MessageGroupID, sends[i].MessageDeduplicationID, w[0], w[1])
		}
	}
	if g := sends[3].MessageGroupID; len(g) != 64 || strings.Contains(g, "k") {
		t.Errorf("a key SQS would refuse was sent as group %q, want its SHA-256 in hex", g)
	}
}

// TestStandardQueue: a standard queue gets the message and its
// attributes, and no group or deduplication id (SQS refuses them there).
func TestStandardQueue(t *testing.T) {
	srv := newSQSServer(t)
	queueURL := srv.queue(t, false)
	p := open(t, sqs.New(sqs.Options{}), config(t, srv, queueURL, accessKey))
	m := message("d1", "acct_a")
	if _, err := send(t, p, m); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	got := srv.receiver(queueURL)(ctx, t)
	if string(got.Body) != string(m.Body) || got.Headers["webhook-id"] != "msg_d1" || got.Headers["webhook-ordering-key"] != "acct_a" ||
		got.Headers["user-agent"] != "webhookd/test" {
		t.Errorf("arrived %s %v", got.Body, got.Headers)
	}
	if s := srv.sends(queueURL); len(s) != 1 || s[0].MessageGroupID != "" || s[0].MessageDeduplicationID != "" {
		t.Errorf("SendMessage %+v, want no group or deduplication id", s)
	}
}

// TestLostAnswer: SQS took a FIFO message but its answer was lost; the
// retry (the same Send again) carries the same deduplication id, so the
// queue holds the message once.
func TestLostAnswer(t *testing.T) {
	srv := newSQSServer(t)
	queueURL := srv.queue(t, true)
	srv.LoseAnswers(1)
	p := open(t, sqs.New(sqs.Options{}), config(t, srv, queueURL, accessKey))
	m := message("dlv_lost", "")
	_, err := send(t, p, m)
	if code, said := destination.Classify(err); err == nil || code != destination.CodeUnreachable {
		t.Fatalf("send with its answer lost: %s %q (%v), want broker_unreachable", code, said, err)
	}
	if _, err := send(t, p, m); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if sends := srv.sends(queueURL); len(sends) != 2 || sends[0].MessageDeduplicationID != "dlv_lost" || sends[1].MessageDeduplicationID != "dlv_lost" {
		t.Fatalf("SendMessage requests %+v, want two with the delivery id as deduplication id", sends)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if got := srv.receiver(queueURL)(ctx, t); got.Headers["webhook-id"] != "msg_dlv_lost" {
		t.Fatalf("arrived %v", got.Headers)
	}
	// The queue's own answer to a long poll: nothing more (a second
	// copy would be there already, sent before the first was read).
	if extra := srv.Receive(context.Background(), t, queueURL, 10); len(extra) != 0 {
		t.Errorf("a second message %v: the retry was not deduplicated", arrived(extra[0]).Headers)
	}
}

// TestFailures: what SQS answers gives the code and the merchant's words:
// an unknown key auth_failed, no such queue broker_refused, each in
// SQS's status and code and never its message or our addresses; more
// than ten attributes broker_refused naming the limit, before any
// request.
func TestFailures(t *testing.T) {
	srv := newSQSServer(t)
	queueURL := srv.queue(t, false)
	kind := sqs.New(sqs.Options{})
	for _, tc := range []struct {
		name, raw string
		m         destination.Message
		code      string
		said      string
	}{
		{"an unknown key", config(t, srv, queueURL, "AKIAUNKNOWN"), message("d1", ""), destination.CodeAuthFailed, "SQS answered HTTP 400 "},
		{"no such queue", config(t, srv, queuePrefix(srv)+"no-such-queue", accessKey), message("d2", ""),
			destination.CodeRefused, "SQS answered HTTP 400 "},
		{"eleven attributes", config(t, srv, queueURL, accessKey), func() destination.Message {
			m := message("d3", "acct_a")
			for _, n := range []string{"x-a", "x-b", "x-c", "x-d", "x-e"} {
				m.Headers[n] = "v"
			}
			return m
		}(), destination.CodeRefused, "an SQS message takes at most 10 message attributes and this one needs 11"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := send(t, open(t, kind, tc.raw), tc.m)
			code, said := destination.Classify(err)
			if err == nil || code != tc.code || !strings.HasPrefix(said, tc.said) {
				t.Errorf("send: %s %q (%v), want %s %q…", code, said, err, tc.code, tc.said)
			}
			if strings.Contains(said, "security token") {
				t.Errorf("said %q quotes the server's message", said)
			}
			desttest.CheckMerchantWords(t, said)
		})
	}
}

// TestDeclaredLargeAnswer: an endpoint that says its answer is 64 MiB is
// response_too_large before a byte of the body is read (desttest's
// Oversized row is the endless chunked body).
func TestDeclaredLargeAnswer(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("Content-Length", "67108864")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"MessageId":"`))
	}))
	defer srv.Close()
	p := open(t, sqs.New(sqs.Options{}), `{"type":"sqs","queue_url":"https://sqs.eu-west-1.amazonaws.com/123456789012/q","region":"eu-west-1",`+
		`"access_key_id":"AKIAMERCHANT","secret_access_key":"merchant-secret","endpoint":"`+srv.URL+`"}`)
	_, err := send(t, p, message("d1", ""))
	if code, said := destination.Classify(err); code != destination.CodeTooLarge {
		t.Errorf("send: %s %q (%v), want response_too_large", code, said, err)
	}
}

// engineAWS sets the process's own AWS environment for the standard
// chain: the given access key (none when ""), no shared config file and
// no instance metadata, so that nothing but the variables is found.
func engineAWS(t *testing.T, key string) {
	t.Helper()
	missing := filepath.Join(t.TempDir(), "none")
	for name, value := range map[string]string{
		"AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "",
		"AWS_CONFIG_FILE": missing, "AWS_SHARED_CREDENTIALS_FILE": missing, "AWS_PROFILE": "",
		"AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "",
		"AWS_EC2_METADATA_DISABLED": "true",
	} {
		t.Setenv(name, value)
	}
	if key == "" {
		t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	}
}

// TestEngineCredentials: a destination without a key under an allowed
// prefix is sent with the process's own AWS credentials (here
// AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY) and arrives; a key given is
// used instead, even a wrong one; a chain with no credentials is
// auth_failed saying why; a prefix the operator took out refuses the
// stored destination when it is read again.
func TestEngineCredentials(t *testing.T) {
	engineAWS(t, accessKey)
	srv := newSQSServer(t)
	queueURL := srv.queue(t, false)
	allowed := sqs.Options{EngineQueues: []string{queuePrefix(srv)}}
	keyless := destJSON(t, map[string]any{"type": "sqs", "queue_url": queueURL, "region": "eu-west-1", "endpoint": srv.endpoint()})
	kind := sqs.New(allowed)

	m := message("d1", "")
	if _, err := send(t, open(t, kind, keyless), m); err != nil {
		t.Fatalf("send with the engine's credentials: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if got := srv.receiver(queueURL)(ctx, t); string(got.Body) != string(m.Body) {
		t.Fatalf("arrived %s", got.Body)
	}

	_, err := send(t, open(t, kind, config(t, srv, queueURL, "AKIAUNKNOWN")), message("d2", ""))
	if code, said := destination.Classify(err); code != destination.CodeAuthFailed || !strings.HasPrefix(said, "SQS answered HTTP 400") {
		t.Errorf("a wrong key beside the engine's credentials: %s %q, want auth_failed in SQS's status and code", code, said)
	}

	t.Run("prefix no longer allowed", func(t *testing.T) {
		reg, _ := destination.NewRegistry(sqs.New(sqs.Options{}))
		_, _, err := reg.Parse("destination", json.RawMessage(keyless))
		if e := invalid.As(err); e == nil || e.Param != "destination.access_key_id" {
			t.Errorf("Parse of the stored destination = %v, want refused on destination.access_key_id", err)
		}
	})
	t.Run("no credentials in the chain", func(t *testing.T) {
		engineAWS(t, "")
		_, err := send(t, open(t, sqs.New(allowed), keyless), message("d3", ""))
		if code, said := destination.Classify(err); code != destination.CodeAuthFailed || !strings.Contains(said, "own AWS credentials") {
			t.Errorf("send: %s %q (%v), want auth_failed saying the engine's credentials could not be had", code, said, err)
		}
	})
}

// TestAnswerBeforeTheRequest: an endpoint that answers (an endless body)
// before it reads the request is response_too_large every time: the
// request is written whole before its answer can cut it short
// (destination.HTTPClient), so the connection is never closed under
// the answer being read. Without it, about one send in twenty read as
// "SQS answered HTTP 200", broker_refused.
func TestAnswerBeforeTheRequest(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusOK)
		chunk := []byte(strings.Repeat("{", 64<<10))
		for range 64 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	raw := `{"type":"sqs","queue_url":"https://sqs.eu-west-1.amazonaws.com/123456789012/q","region":"eu-west-1",` +
		`"access_key_id":"AKIAMERCHANT","secret_access_key":"merchant-secret","endpoint":"` + srv.URL + `"}`
	for i := range 60 {
		_, err := send(t, open(t, sqs.New(sqs.Options{}), raw), message(fmt.Sprintf("d%d", i), ""))
		if code, said := destination.Classify(err); code != destination.CodeTooLarge {
			t.Fatalf("send %d: %s %q (%v), want response_too_large", i, code, said, err)
		}
	}
}
