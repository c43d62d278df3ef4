package kinds_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/kafka"
	"github.com/webhookd/webhookd/internal/destination/kinds"
	"github.com/webhookd/webhookd/internal/destination/rabbitmq"
	"github.com/webhookd/webhookd/internal/invalid"
)

// TestDefaultRegistersEveryKind: the thirteen ways of delivering less
// the three built-in kinds the worker adds on its own sender and relay
// (webhook, listener, poll: Registry.WithBuiltin), in the documentation's
// order, each described well enough for
// the portal to draw its form: labels, field types, and a label no other
// field of the kind shares.
func TestDefaultRegistersEveryKind(t *testing.T) {
	r, err := kinds.Default(kinds.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"rabbitmq", "kafka", "sqs", "gcp_pubsub", "nats", "mqtt", "kinesis", "sns", "eventbridge", "s3"}
	got := r.Types()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("registered %v, want %v", got, want)
	}
	for _, md := range r.Metadata() {
		labels := map[string]bool{}
		for _, f := range md.Fields {
			if f.Label == "" || f.Type == "" || labels[f.Label] {
				t.Errorf("%s.%s: label %q (empty or shared) or no type", md.Type, f.Name, f.Label)
			}
			labels[f.Label] = true
		}
	}
}

// FuzzParse: whatever a merchant sends as a destination of any kind, the
// registry answers with a checked config or a refusal naming a field of
// destination, never panics; a refusal never quotes the value of a
// secret field; an accepted config reads back from its stored form as
// the same destination, and its summary and target show no secret.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{"type":"rabbitmq","url":"amqp://u:hunter2@h/","routing_key":"q"}`,
		`{"type":"rabbitmq","url":"amqps://u:hunter2@h:5671/v?cacertfile=/etc/hostname","routing_key":"q"}`,
		`{"type":"rabbitmq","url":"amqp://u:hunter2@[::1]/%2F#f","exchange":"x"}`,
		`{"type":"kafka","brokers":["h:1"],"topic":"t","sasl":{"mechanism":"plain","username":"u","password":"hunter2"}}`,
		`{"type":"kafka","brokers":["/etc/hostname:1"],"topic":"t"}`,
		`{"type":"sqs","queue_url":"https://sqs.example.com/1/q","region":"eu-west-1","endpoint":"http://h/?a=b","access_key_id":"a","secret_access_key":"hunter2"}`,
		`{"type":"gcp_pubsub","project_id":"my-project","topic_id":"webhooks","credentials_json":"{\"type\":\"external_account\",\"credential_source\":{\"file\":\"/etc/hostname\"}}"}`,
		`{"type":"gcp_pubsub","project_id":"my-project","topic_id":"webhooks","endpoint":"h:8085"}`,
		`{"type":"nats","servers":["nats.example.com:4222"],"subject":"webhooks.payouts","tls":true,"username":"u","password":"hunter2"}`,
		`{"type":"nats","servers":["nats://h:4222?x=1"],"subject":"$JS.API.STREAM.PURGE.X"}`,
		`{"type":"mqtt","broker":"mqtt.example.com:8883","topic":"webhooks/payouts","tls":true,"username":"u","password":"hunter2"}`,
		`{"type":"mqtt","broker":"h:1883","topic":"#"}`,
		`{"type":"kinesis","stream_name":"webhooks","region":"eu-west-1","access_key_id":"a","secret_access_key":"hunter2"}`,
		`{"type":"sns","topic_arn":"arn:aws:sns:eu-west-1:123456789012:webhooks.fifo","region":"eu-west-1","access_key_id":"a","secret_access_key":"hunter2"}`,
		`{"type":"eventbridge","event_bus":"default","source":"aws.evil","region":"eu-west-1","access_key_id":"a","secret_access_key":"hunter2"}`,
		`{"type":"s3","bucket":"webhooks","key_template":"{event_type}/../{date}","region":"eu-west-1","access_key_id":"a","secret_access_key":"hunter2"}`,
		`{"type":"sqs","queue_url":1}`, `[]`, `null`,
		`{"type":"kafka","brokers":"h:1","topic":"t","tls":1}`,
		`{"type":"sqs","queue_url":"https://sqs.eu-west-1.amazonaws.com/123456789012/q.fifo","region":"eu-west-1"}`,
		`{"type":"gcp_pubsub","project_id":"my-project","topic_id":"webhooks","credentials_json":"{\"type\":\"service_account\",\"client_email\":\"a@b\",\"private_key\":\"hunter2\"}"}`,
	} {
		f.Add(seed)
	}
	r, err := kinds.Default(kinds.Options{SQSEngineQueues: []string{"https://sqs.eu-west-1.amazonaws.com/123456789012/"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		typ, cfg, err := r.Parse("destination", json.RawMessage(raw))
		secrets := secretValues(r, raw)
		if err != nil {
			bad := invalid.As(err)
			if bad == nil || !strings.HasPrefix(bad.Param, "destination") {
				t.Fatalf("%q: %v, want a refusal of a destination field", raw, err)
			}
			for _, s := range secrets {
				if strings.Contains(bad.Message, s) {
					t.Fatalf("the refusal quotes a secret: %s", bad.Message)
				}
			}
			return
		}
		stored, err := destination.Encode(typ, cfg)
		if err != nil {
			t.Fatalf("encode %q: %v", raw, err)
		}
		_, again, err := r.Parse("destination", stored)
		if err != nil {
			t.Fatalf("%q was accepted, but its stored form %q is refused: %v", raw, stored, err)
		}
		a, _ := json.Marshal(cfg.Summary())
		b, _ := json.Marshal(again.Summary())
		if string(a) != string(b) {
			t.Fatalf("stored form reads back as %s, want %s", b, a)
		}
		for _, s := range secrets {
			if strings.Contains(string(a), s) || strings.Contains(cfg.Target(), s) {
				t.Fatalf("summary %s or target %q shows a secret", a, cfg.Target())
			}
		}
		if check, ok := accepted[typ]; ok {
			if why := check(cfg); why != "" {
				t.Fatalf("accepted %q: %s", raw, why)
			}
		}
	})
}

// accepted are what each kind's accepted config must hold beside the
// registry's promises: what its publisher dials is what the rules let
// through, and nothing else.
var accepted = map[string]func(destination.Config) string{
	"rabbitmq": func(cfg destination.Config) string {
		c := cfg.(rabbitmq.Config)
		if u, err := rabbitmq.ParseURL("destination.url", c.URL); err != nil || strings.ContainsAny(c.URL, "?#") || u.Port == 0 {
			return "a url with options, or without a port to dial"
		}
		return ""
	},
	"kafka": func(cfg destination.Config) string {
		if c := cfg.(kafka.Config); len(c.Brokers) == 0 || len(c.Brokers) > 10 || c.Topic == "" {
			return "no broker, more than ten, or no topic"
		}
		return ""
	},
	"sqs": func(cfg destination.Config) string {
		if cfg.Target() == "" || cfg.Summary()["region"] == "" {
			return "no queue or no region"
		}
		return ""
	},
	"gcp_pubsub": func(cfg destination.Config) string {
		if cfg.Summary()["project_id"] == "" || (cfg.Summary()["credentials_json"] == nil && cfg.Plaintext() != "endpoint") {
			return "no project, or neither a key nor an emulator"
		}
		return ""
	},
}

// secretValues are the values, six characters or longer, of raw's
// secret fields by its kind's metadata (top level and one object deep).
func secretValues(r *destination.Registry, raw string) []string {
	k, ok := r.Kind(destination.TypeOf(json.RawMessage(raw)))
	if !ok {
		return nil
	}
	var values map[string]any
	if json.Unmarshal([]byte(raw), &values) != nil {
		return nil
	}
	var out []string
	var walk func(fields []destination.Field, values map[string]any)
	walk = func(fields []destination.Field, values map[string]any) {
		for _, f := range fields {
			switch v := values[f.Name].(type) {
			case string:
				if f.Secret && len(v) >= 6 {
					out = append(out, secretPart(v))
				}
			case map[string]any:
				walk(f.Fields, v)
			}
		}
	}
	walk(k.Metadata().Fields, values)
	return out
}

// secretPart is what of a secret value must never show: a URL's
// password (its user and host are shown; a URL without one holds nothing
// secret, and may well be a substring of the refusal's example, as
// "mqp://" is of "amqp://": the fuzzer found that), else the whole value.
func secretPart(s string) string {
	if i := strings.Index(s, "://"); i >= 0 {
		if at := strings.LastIndex(s, "@"); at > i {
			userinfo := s[i+3 : at]
			if c := strings.Index(userinfo, ":"); c >= 0 && len(userinfo)-c-1 >= 6 {
				return userinfo[c+1:]
			}
		}
		return "\x00never"
	}
	return s
}
