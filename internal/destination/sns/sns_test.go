package sns_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/desttest"
	"github.com/webhookd/webhookd/internal/destination/sns"
	"github.com/webhookd/webhookd/internal/invalid"
)

// config is an sns destination object.
func config(topicARN, endpoint, key string) string {
	b, _ := json.Marshal(map[string]string{"type": "sns", "topic_arn": topicARN, "region": region,
		"access_key_id": key, "secret_access_key": secretKey, "endpoint": endpoint})
	return string(b)
}

// TestConformance runs desttest against goaws, on a FIFO topic: the
// ordered row runs there, since only a FIFO topic keeps order. goaws
// takes a ".fifo" topic and a FIFO queue subscribed to it but implements
// neither SNS FIFO's message groups nor its deduplication (gosns ignores
// MessageGroupId and MessageDeduplicationId; every message of the topic
// lands in its queue in the order published): the ordered row proves
// that the kind publishes in order, one Publish answered before the
// next, and TestFIFOGroups what it sends as group and deduplication ids.
func TestConformance(t *testing.T) {
	srv := newServer(t)
	topicARN, sub := srv.topic(t, true)
	desttest.Run(t, desttest.Case{
		Kind:             sns.New(),
		Config:           config(topicARN, srv.endpoint(), accessKey),
		Receive:          sub.Receive,
		WrongCredentials: config(topicARN, srv.endpoint(), "AKIANOTKNOWNTOSNS"),
		Down:             srv.down,
		Oversized:        func(url string) string { return config(topicARN, url, accessKey) },
		Hostile: []desttest.Hostile{
			{Name: "a topic of another region", Config: config("arn:aws:sns:us-east-1:123456789012:webhooks", srv.endpoint(), accessKey),
				Field: "destination.topic_arn", Secret: "us-east-1"},
			{Name: "not an ARN", Config: config("https://sns.eu-west-1.amazonaws.com/123456789012/webhooks", srv.endpoint(), accessKey),
				Field: "destination.topic_arn", Secret: "amazonaws.com"},
			{Name: "control characters in the topic", Config: config("arn:aws:sns:eu-west-1:123456789012:web\r\nX-Injected: 1", srv.endpoint(), accessKey),
				Field: "destination.topic_arn", Secret: "X-Injected"},
			{Name: "an endpoint with a query", Config: config(topicARN, srv.endpoint()+"/?Action=DeleteTopic", accessKey),
				Field: "destination.endpoint", Secret: "DeleteTopic"},
			{Name: "a field SNS has but the kind does not", Config: `{"type": "sns", "topic_arn": "arn:aws:sns:eu-west-1:123456789012:webhooks", ` +
				`"target_arn": "arn:aws:sns:eu-west-1:123456789012:endpoint/GCM/app/secret-device", "region": "eu-west-1", ` +
				`"access_key_id": "AKIAWEBHOOKDSNSTEST", "secret_access_key": "x"}`,
				Field: "destination.target_arn", Secret: "secret-device"},
			{Name: "a topic name too long", Config: config("arn:aws:sns:eu-west-1:123456789012:"+strings.Repeat("overlong", 33), srv.endpoint(), accessKey),
				Field: "destination.topic_arn", Secret: "overlongoverlong"},
		},
	})
}

// TestStandardTopic: a standard topic's message arrives, signed, and is
// published with neither a group nor a deduplication id (SNS refuses
// them on a standard topic).
func TestStandardTopic(t *testing.T) {
	srv := newServer(t)
	topicARN, sub := srv.topic(t, false)
	p := open(t, config(topicARN, srv.endpoint(), accessKey))
	secret, m := message(t, "evt_standard", "payout_42")
	res, err := p.Send(context.Background(), m)
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	if !regexp.MustCompile(`^confirmed by SNS \(message id [0-9a-f-]{36}\)$`).MatchString(res.Answer) {
		t.Errorf("answer %q, want confirmed by SNS with goaws's message id", res.Answer)
	}
	got := receive(t, sub)
	verify(t, secret, m, got)
	sent := srv.publishes(topicARN)
	if len(sent) != 1 || sent[0].Has("MessageGroupId") || sent[0].Has("MessageDeduplicationId") {
		t.Fatalf("publishes %v, want one without group or deduplication id", sent)
	}
}

// TestFIFOGroups: on a FIFO topic, the group is the ordering key (its
// hex SHA-256 when SNS would refuse it as a group id), the delivery id
// when unordered; the deduplication id is always the delivery id.
func TestFIFOGroups(t *testing.T) {
	srv := newServer(t)
	topicARN, _ := srv.topic(t, true)
	p := open(t, config(topicARN, srv.endpoint(), accessKey))
	long := strings.Repeat("k", 129)
	sum := sha256.Sum256([]byte(long))
	spaced := "payout 42"
	spacedSum := sha256.Sum256([]byte(spaced))
	for _, tc := range []struct{ name, key, group string }{
		{"an ordering key is the group", "payout_42", "payout_42"},
		{"unordered: the delivery id is the group", "", "dlv_evt_fifo_2"},
		{"a key over 128 characters is hashed", long, hex.EncodeToString(sum[:])},
		{"a key with a space is hashed", spaced, hex.EncodeToString(spacedSum[:])},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(srv.publishes(topicARN))
			_, m := message(t, "evt_fifo_"+fmt.Sprint(before+1), tc.key)
			if _, err := p.Send(context.Background(), m); err != nil {
				t.Fatalf("send: %v", err)
			}
			sent := srv.publishes(topicARN)
			if len(sent) != before+1 {
				t.Fatalf("%d publishes, want %d", len(sent), before+1)
			}
			last := sent[len(sent)-1]
			if g := last.Get("MessageGroupId"); g != tc.group {
				t.Errorf("group %q, want %q", g, tc.group)
			}
			if d := last.Get("MessageDeduplicationId"); d != m.DeliveryID {
				t.Errorf("deduplication id %q, want the delivery id %q", d, m.DeliveryID)
			}
		})
	}
}

// TestRefusedBeforeSending: a message SNS would refuse is broker_refused
// in fixed words naming the limit, and nothing is published.
func TestRefusedBeforeSending(t *testing.T) {
	srv := newServer(t)
	topicARN, _ := srv.topic(t, false)
	p := open(t, config(topicARN, srv.endpoint(), accessKey))
	for _, tc := range []struct {
		name  string
		shape func(m *destination.Message)
		words string
	}{
		{"eleven attributes without user-agent", func(m *destination.Message) {
			for i := range 6 {
				m.Headers[fmt.Sprintf("x-merchant-%d", i)] = "v"
			}
		}, "an SNS message takes at most 10 message attributes and this one needs 11"},
		{"a body over 256 KiB", func(m *destination.Message) {
			m.Body = []byte(`"` + strings.Repeat("a", 256<<10) + `"`)
		}, "an SNS message takes at most 262144 bytes (256 KiB) of body and message attributes"},
		{"a body at the limit with its attributes", func(m *destination.Message) {
			m.Body = []byte(strings.Repeat("a", 256<<10-100))
		}, "an SNS message takes at most 262144 bytes (256 KiB)"},
		{"a body that is not text", func(m *destination.Message) { m.Body = []byte{0xff, 0xfe} },
			"an SNS message is UTF-8 text and this body is not"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, m := message(t, "evt_refused", "")
			tc.shape(&m)
			_, err := p.Send(context.Background(), m)
			code, said := destination.Classify(err)
			if code != destination.CodeRefused || !strings.HasPrefix(said, tc.words) {
				t.Errorf("send: %s %q (%v), want broker_refused %q", code, said, err, tc.words)
			}
			if n := len(srv.publishes(topicARN)); n != 0 {
				t.Errorf("%d publishes reached the server", n)
			}
		})
	}
}

// TestServiceRefusals: SNS's own refusals, in its status and code: a key
// its policy denies is auth_failed, a topic that does not exist
// broker_refused.
func TestServiceRefusals(t *testing.T) {
	srv := newServer(t)
	topicARN, _ := srv.topic(t, false)
	for _, tc := range []struct{ name, cfg, code, said string }{
		{"a key not allowed to publish", config(topicARN, srv.endpoint(), deniedKey), destination.CodeAuthFailed, "SNS answered HTTP 403 AuthorizationError"},
		{"an unknown key", config(topicARN, srv.endpoint(), "AKIANOTKNOWNTOSNS"), destination.CodeAuthFailed, "SNS answered HTTP 403 InvalidClientTokenId"},
		{"no such topic", config("arn:aws:sns:eu-west-1:123456789012:webhookd-missing", srv.endpoint(), accessKey), destination.CodeRefused,
			"SNS answered HTTP 400 AWS.SimpleNotificationService.NonExistentTopic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := open(t, tc.cfg)
			_, m := message(t, "evt_refusal", "")
			_, err := p.Send(context.Background(), m)
			code, said := destination.Classify(err)
			if code != tc.code || said != tc.said {
				t.Errorf("send: %s %q (%v), want %s %q", code, said, err, tc.code, tc.said)
			}
			desttest.CheckMerchantWords(t, said)
		})
	}
}

// TestAttributes: which headers become the ten attributes SNS takes.
func TestAttributes(t *testing.T) {
	srv := newServer(t)
	topicARN, sub := srv.topic(t, false)
	p := open(t, config(topicARN, srv.endpoint(), accessKey))
	for _, tc := range []struct {
		name   string
		extra  map[string]string
		absent []string
	}{
		{"user-agent kept while room is left", map[string]string{"x-b": "1", "x-c": "2"}, nil},
		{"user-agent dropped for the merchant's tenth header", map[string]string{"x-b": "1", "x-c": "2", "x-d": "3", "x-e": "4", "traceparent": "00-1"}, []string{"user-agent"}},
		{"an empty value skipped", map[string]string{"x-empty": ""}, []string{"x-empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secret, m := message(t, "evt_attributes", "")
			for k, v := range tc.extra {
				m.Headers[k] = v
			}
			if _, err := p.Send(context.Background(), m); err != nil {
				t.Fatalf("send: %v", err)
			}
			got := receive(t, sub)
			verify(t, secret, m, got)
			for k, v := range m.Headers {
				if v == "" || containsName(tc.absent, k) {
					if _, ok := got.Headers[k]; ok {
						t.Errorf("attribute %s arrived, want it left out", k)
					}
					continue
				}
				if got.Headers[k] != v {
					t.Errorf("attribute %s arrived as %q, want %q", k, got.Headers[k], v)
				}
			}
			if len(got.Headers) > 10 {
				t.Errorf("%d attributes arrived", len(got.Headers))
			}
		})
	}
}

func containsName(names []string, n string) bool {
	for _, x := range names {
		if x == n {
			return true
		}
	}
	return false
}

// TestParse is the rule of each field, as a table: what is taken, what
// is refused and under which field, never quoting the value.
func TestParse(t *testing.T) {
	r, err := destination.NewRegistry(sns.New())
	if err != nil {
		t.Fatal(err)
	}
	const arn = "arn:aws:sns:eu-west-1:123456789012:webhooks"
	with := func(changes map[string]any) string {
		o := map[string]any{"type": "sns", "topic_arn": arn, "region": "eu-west-1", "access_key_id": "AKIAEXAMPLE", "secret_access_key": "s3cr3t"}
		for k, v := range changes {
			if v == nil {
				delete(o, k)
			} else {
				o[k] = v
			}
		}
		b, _ := json.Marshal(o)
		return string(b)
	}
	for _, tc := range []struct {
		name, raw, field, rule, secret string
	}{
		{name: "a standard topic", raw: with(nil)},
		{name: "a FIFO topic", raw: with(map[string]any{"topic_arn": arn + ".fifo"})},
		{name: "another partition's topic", raw: with(map[string]any{"topic_arn": "arn:aws-cn:sns:cn-north-1:123456789012:webhooks", "region": "cn-north-1"})},
		{name: "a name of 256 characters", raw: with(map[string]any{"topic_arn": "arn:aws:sns:eu-west-1:123456789012:" + strings.Repeat("a", 256)})},
		{name: "a FIFO name of 256 characters with its suffix", raw: with(map[string]any{"topic_arn": "arn:aws:sns:eu-west-1:123456789012:" + strings.Repeat("a", 251) + ".fifo"})},
		{name: "an https endpoint", raw: with(map[string]any{"endpoint": "https://sns.eu-west-1.amazonaws.com"})},

		{name: "no topic", raw: with(map[string]any{"topic_arn": nil}), field: "destination.topic_arn", rule: invalid.RuleMissing},
		{name: "a topic of another region", raw: with(map[string]any{"topic_arn": "arn:aws:sns:us-east-1:123456789012:webhooks"}),
			field: "destination.topic_arn", rule: "destination_topic_region", secret: "us-east-1"},
		{name: "a name of 257 characters", raw: with(map[string]any{"topic_arn": "arn:aws:sns:eu-west-1:123456789012:" + strings.Repeat("b", 257)}),
			field: "destination.topic_arn", rule: "destination_topic_arn_invalid", secret: "bbbbbbbb"},
		{name: "a FIFO name over 256 characters with its suffix", raw: with(map[string]any{"topic_arn": "arn:aws:sns:eu-west-1:123456789012:" + strings.Repeat("b", 252) + ".fifo"}),
			field: "destination.topic_arn", rule: "destination_topic_arn_invalid", secret: "bbbbbbbb"},
		{name: "a value far over any ARN", raw: with(map[string]any{"topic_arn": strings.Repeat("arn:aws:sns:", 10000)}),
			field: "destination.topic_arn", rule: "destination_topic_arn_invalid", secret: "arn:aws:sns:arn"},
		{name: "another service's ARN", raw: with(map[string]any{"topic_arn": "arn:aws:sqs:eu-west-1:123456789012:webhooks"}),
			field: "destination.topic_arn", rule: "destination_topic_arn_invalid", secret: "sqs"},
		{name: "an account of 11 digits", raw: with(map[string]any{"topic_arn": "arn:aws:sns:eu-west-1:12345678901:webhooks"}),
			field: "destination.topic_arn", rule: "destination_topic_arn_invalid", secret: "12345678901"},
		{name: "a subscription's ARN", raw: with(map[string]any{"topic_arn": arn + ":6b0e71bd-7e97-4d97-80ce-4a0994e55286"}),
			field: "destination.topic_arn", rule: "destination_topic_arn_invalid", secret: "6b0e71bd"},
		{name: "a dot other than .fifo", raw: with(map[string]any{"topic_arn": arn + ".json"}),
			field: "destination.topic_arn", rule: "destination_topic_arn_invalid", secret: ".json"},
		{name: "a wildcard", raw: with(map[string]any{"topic_arn": "arn:aws:sns:eu-west-1:123456789012:*"}),
			field: "destination.topic_arn", rule: "destination_topic_arn_invalid"},
		{name: "a NUL in the topic", raw: with(map[string]any{"topic_arn": arn + "\x00admin"}),
			field: "destination.topic_arn", rule: "destination_topic_arn_invalid", secret: "admin"},
		{name: "a topic that is not a string", raw: with(map[string]any{"topic_arn": 42}),
			field: "destination.topic_arn", rule: "destination_field_invalid"},
		{name: "a topic that is a list", raw: with(map[string]any{"topic_arn": []string{arn}}),
			field: "destination.topic_arn", rule: "destination_field_invalid"},
		{name: "no region", raw: with(map[string]any{"region": nil}), field: "destination.region", rule: invalid.RuleMissing},
		{name: "a region that is not one", raw: with(map[string]any{"region": "eu-west-1/../x"}),
			field: "destination.region", rule: "destination_region_invalid", secret: "../x"},
		{name: "no access key", raw: with(map[string]any{"access_key_id": nil}), field: "destination.access_key_id", rule: invalid.RuleMissing},
		{name: "a secret key with a newline", raw: with(map[string]any{"secret_access_key": "s3cr3t\nX-Amz-Security-Token: t"}),
			field: "destination.secret_access_key", rule: "destination_name_invalid", secret: "s3cr3t"},
		{name: "a secret key too long", raw: with(map[string]any{"secret_access_key": strings.Repeat("s", 256)}),
			field: "destination.secret_access_key", rule: "destination_name_invalid", secret: "ssssssss"},
		{name: "an endpoint with a query", raw: with(map[string]any{"endpoint": "https://sns.example.com/?Action=DeleteTopic"}),
			field: "destination.endpoint", rule: "destination_endpoint_invalid", secret: "DeleteTopic"},
		{name: "an endpoint with credentials", raw: with(map[string]any{"endpoint": "https://user:pw@sns.example.com"}),
			field: "destination.endpoint", rule: "destination_endpoint_invalid", secret: "pw@"},
		{name: "an endpoint of another scheme", raw: with(map[string]any{"endpoint": "file:///etc/passwd"}),
			field: "destination.endpoint", rule: "destination_endpoint_invalid", secret: "/etc/passwd"},
		{name: "target_arn, SNS's other target", raw: with(map[string]any{"target_arn": "arn:aws:sns:eu-west-1:123456789012:endpoint/APNS/app/dev"}),
			field: "destination.target_arn", rule: "destination_field_unknown", secret: "endpoint/APNS"},
		{name: "a FIFO option", raw: with(map[string]any{"message_group_id": "all"}),
			field: "destination.message_group_id", rule: "destination_field_unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, cfg, err := r.Parse("destination", json.RawMessage(tc.raw))
			if tc.field == "" {
				if err != nil {
					t.Fatalf("parse: %v", err)
				}
				if cfg.Target() == "" {
					t.Error("no target")
				}
				return
			}
			var bad *invalid.Error
			if !errors.As(err, &bad) {
				t.Fatalf("parse: %v, want an *invalid.Error naming %s", err, tc.field)
			}
			if bad.Param != tc.field || bad.Rule != tc.rule {
				t.Errorf("refusal %s on %s (%s), want %s on %s", bad.Rule, bad.Param, bad.Message, tc.rule, tc.field)
			}
			if tc.secret != "" && strings.Contains(bad.Message, tc.secret) {
				t.Errorf("refusal %q quotes the value", bad.Message)
			}
		})
	}
}

// TestConfigNeverPrintsTheSecret: the Config's printed forms (a log
// line, an error's %v) show no secret key.
func TestConfigNeverPrintsTheSecret(t *testing.T) {
	const secret = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
	raw := `{"type": "sns", "topic_arn": "arn:aws:sns:eu-west-1:123456789012:webhooks", "region": "eu-west-1", ` +
		`"access_key_id": "AKIAEXAMPLE", "secret_access_key": "` + secret + `", "endpoint": "https://sns.example.com"}`
	r, _ := destination.NewRegistry(sns.New())
	_, c, err := r.Parse("destination", json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("opened", "destination", c)
	summary, _ := json.Marshal(c.Summary())
	for what, text := range map[string]string{
		"%v": fmt.Sprintf("%v", c), "%+v": fmt.Sprintf("%+v", c), "%#v": fmt.Sprintf("%#v", c), "%s": fmt.Sprintf("%s", c),
		"slog": logged.String(), "summary": string(summary), "target": c.Target(),
	} {
		if strings.Contains(text, secret) {
			t.Errorf("%s shows the secret key: %s", what, text)
		}
	}
	if !strings.Contains(logged.String(), "arn:aws:sns:eu-west-1:123456789012:webhooks") {
		t.Errorf("the log line %s does not name the topic", logged.String())
	}
	if c.Plaintext() != "" || len(c.Addresses()) != 1 || c.Addresses()[0].URL != "https://sns.example.com" {
		t.Errorf("plaintext %q, addresses %+v; want none, the endpoint", c.Plaintext(), c.Addresses())
	}
}

// open parses and opens raw with the conformance suite's environment.
func open(t *testing.T, raw string) destination.Publisher {
	t.Helper()
	r, err := destination.NewRegistry(sns.New())
	if err != nil {
		t.Fatal(err)
	}
	typ, cfg, err := r.Parse("destination", json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Open(typ, cfg, env())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func receive(t *testing.T, sub *subscriber) desttest.Arrived {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return sub.Receive(ctx, t)
}

// TestLargestMessage: a message of exactly 256 KiB, body and attributes
// counted as SNS counts them (each attribute's name, data type and
// value), is sent and arrives whole.
func TestLargestMessage(t *testing.T) {
	srv := newServer(t)
	topicARN, sub := srv.topic(t, false)
	p := open(t, config(topicARN, srv.endpoint(), accessKey))
	attributes := func(m destination.Message) (n int) {
		for name, v := range m.Headers {
			n += len(name) + len("String") + len(v)
		}
		return n
	}
	// The headers' sizes do not depend on the body's: a first message
	// measures them, the second carries the body that fills the rest.
	_, first := message(t, "evt_largest", "")
	pad := 256<<10 - attributes(first) - len(`{"pad":""}`)
	secret, m := messageWithBody(t, "evt_largest", []byte(`{"pad":"`+strings.Repeat("p", pad)+`"}`))
	attrs := attributes(m)
	if total := len(m.Body) + attrs; total != 256<<10 {
		t.Fatalf("the message is %d bytes, want 262144", total)
	}
	if _, err := p.Send(context.Background(), m); err != nil {
		code, said := destination.Classify(err)
		t.Fatalf("send of %d bytes: %s %s (%v)", len(m.Body)+attrs, code, said, err)
	}
	verify(t, secret, m, receive(t, sub))

	// One byte more is refused before sending.
	_, over := messageWithBody(t, "evt_largest", []byte(`{"pad":"`+strings.Repeat("p", pad+1)+`"}`))
	_, err := p.Send(context.Background(), over)
	if code, said := destination.Classify(err); code != destination.CodeRefused || !strings.Contains(said, "this one has 262145") {
		t.Errorf("send of one byte more: %s %q (%v), want broker_refused naming its size", code, said, err)
	}
	if n := len(srv.publishes(topicARN)); n != 1 {
		t.Errorf("%d publishes reached the server, want the first only", n)
	}
}
