package subscriptions_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/signer"
)

// TestDestinationRules: each type's fields, each fault naming its field;
// what is stored is sealed whole and read masked.
func TestDestinationRules(t *testing.T) {
	t.Parallel()
	reg, _ := registry(t, subscriptions.Rules{EventTypes: catalogue()}, "m1")
	publicReg, _ := registry(t, subscriptions.Rules{EventTypes: catalogue(), Destinations: []string{"kafka"}}, "m1")
	for _, tc := range []struct {
		name  string
		reg   *subscriptions.Registry
		dest  string
		param string // "" accepted
	}{
		{"rabbitmq", reg, `{"type":"rabbitmq","url":"amqps://u:pw@mq.example.com/v","exchange":"x"}`, ""},
		{"rabbitmq private host", reg, `{"type":"rabbitmq","url":"amqp://u:pw@10.0.0.1/","exchange":"x"}`, "destination.url"},
		{"rabbitmq localhost", reg, `{"type":"rabbitmq","url":"amqp://localhost/","routing_key":"q"}`, "destination.url"},
		{"kafka", reg, `{"type":"kafka","brokers":["k1.example.com:9092","k2.example.com:9092"],"topic":"payouts",
			"sasl":{"mechanism":"scram-sha-512","username":"u","password":"pw-kafka"},"tls":true}`, ""},
		{"kafka broker without a port", reg, `{"type":"kafka","brokers":["k1.example.com"],"topic":"t"}`, "destination.brokers[0]"},
		{"kafka private broker", reg, `{"type":"kafka","brokers":["127.0.0.1:9092"],"topic":"t"}`, "destination.brokers[0]"},
		{"kafka bad topic", reg, `{"type":"kafka","brokers":["k.example.com:9092"],"topic":"a b"}`, "destination.topic"},
		{"kafka bad mechanism", reg, `{"type":"kafka","brokers":["k.example.com:9092"],"topic":"t","sasl":{"mechanism":"gssapi","username":"u","password":"p"}}`,
			"destination.sasl.mechanism"},
		{"sqs", reg, `{"type":"sqs","queue_url":"https://sqs.eu-west-1.amazonaws.com/1/q.fifo","region":"eu-west-1",
			"access_key_id":"AKIA","secret_access_key":"secret-key-of-forty-characters-or-so-xx"}`, ""},
		{"sqs http queue", reg, `{"type":"sqs","queue_url":"http://sqs.example.com/1/q","region":"eu-west-1","access_key_id":"a","secret_access_key":"s"}`,
			"destination.queue_url"},
		{"sqs bad region", reg, `{"type":"sqs","queue_url":"https://sqs.example.com/1/q","region":"Europe","access_key_id":"a","secret_access_key":"s"}`,
			"destination.region"},
		{"sqs no secret", reg, `{"type":"sqs","queue_url":"https://sqs.example.com/1/q","region":"eu-west-1","access_key_id":"a"}`,
			"destination.secret_access_key"},
		{"gcp_pubsub", reg, destJSON(t, map[string]any{"type": "gcp_pubsub", "project_id": "my-project", "topic_id": "webhooks",
			"credentials_json": serviceAccount(t, rsaPEM(t, 2048), nil)}), ""},
		{"gcp_pubsub no credentials", reg, `{"type":"gcp_pubsub","project_id":"my-project","topic_id":"webhooks"}`, "destination.credentials_json"},
		{"gcp_pubsub bad credentials", reg, `{"type":"gcp_pubsub","project_id":"my-project","topic_id":"webhooks","credentials_json":"key"}`,
			"destination.credentials_json"},
		{"gcp_pubsub bad project", reg, `{"type":"gcp_pubsub","project_id":"P","topic_id":"webhooks","credentials_json":"{}"}`, "destination.project_id"},
		{"poll", reg, `{"type":"poll"}`, ""},
		{"poll with a field", reg, `{"type":"poll","url":"https://example.com/h"}`, "destination.url"},
		{"poll turned off", publicReg, `{"type":"poll"}`, "destination.type"},
		{"turned off", publicReg, `{"type":"rabbitmq","url":"amqp://mq.example.com/","routing_key":"q"}`, "destination.type"},
		{"webhook turned off", publicReg, `null`, "destination.type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := subscriptions.Draft{Events: []string{"*"}, Destination: json.RawMessage(tc.dest)}
			if tc.dest == "null" {
				d.URL = ptr("https://example.com/h")
			}
			sub, _, err := tc.reg.Create(context.Background(), "m1", d)
			if tc.param != "" {
				if e := invalid.As(err); e == nil || e.Param != tc.param {
					t.Fatalf("Create = %v, want a fault of %s", err, tc.param)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			shown, _ := json.Marshal(sub.Destination.Summary)
			for _, secret := range []string{"pw", "pw-kafka", "secret-key-of", "PRIVATE KEY"} {
				if strings.Contains(string(shown), ":"+secret+"@") || strings.Contains(string(shown), `"`+secret) || strings.Contains(sub.URL, secret+"@") {
					t.Errorf("summary %s or url %q shows %q", shown, sub.URL, secret)
				}
			}
			sealer, err := signer.NewSealer(masterKey())
			if err != nil {
				t.Fatal(err)
			}
			opened, err := subscriptions.OpenDestination(sealer, sub.Destination.Sealed)
			if err != nil || opened.Type != sub.Destination.Type() {
				t.Fatalf("OpenDestination = %v, %v", opened, err)
			}
		})
	}
}

// FuzzParseDestination: whatever a merchant sends, ParseDestination
// answers with a destination or a fault of the destination's, never
// panics, and a refusal never quotes a credential.
func FuzzParseDestination(f *testing.F) {
	f.Add(`{"type":"rabbitmq","url":"amqp://u:hunter2@h/","routing_key":"q"}`)
	f.Add(`{"type":"kafka","brokers":["h:1"],"topic":"t","sasl":{"mechanism":"plain","username":"u","password":"hunter2"}}`)
	f.Add(`{"type":"sqs","queue_url":1}`)
	f.Add(`{"type":"webhook"}`)
	f.Add(`null`)
	f.Add(`[]`)
	f.Add(`{"type":"rabbitmq","url":"amqps://u:hunter2@h:5671/v?cacertfile=/etc/hostname","routing_key":"q"}`)
	f.Add(`{"type":"rabbitmq","url":"amqp://u:hunter2@[::1]/%2F#f","exchange":"x"}`)
	f.Add(`{"type":"gcp_pubsub","project_id":"my-project","topic_id":"webhooks","credentials_json":"{\"type\":\"external_account\",\"credential_source\":{\"file\":\"/etc/hostname\"}}"}`)
	f.Add(`{"type":"gcp_pubsub","project_id":"my-project","topic_id":"webhooks","endpoint":"h:8085"}`)
	f.Add(`{"type":"sqs","queue_url":"https://sqs.example.com/1/q","region":"eu-west-1","endpoint":"http://h/?a=b","access_key_id":"a","secret_access_key":"hunter2"}`)
	// The fault of a field, whichever rule finds it: the parse's, the
	// shape's (Destination.Check, what an attempt asks again) or the
	// transport's.
	fault := func(t *testing.T, raw string, err error) {
		t.Helper()
		e := invalid.As(err)
		if e == nil || !strings.HasPrefix(e.Param, "destination") {
			t.Fatalf("%q: %v, want a fault of destination", raw, err)
		}
		for _, secret := range credentials(raw) {
			if strings.Contains(e.Message, secret) {
				t.Fatalf("the fault quotes a credential: %s", e.Message)
			}
		}
	}
	f.Fuzz(func(t *testing.T, raw string) {
		d, err := subscriptions.ParseDestination("destination", json.RawMessage(raw))
		if err != nil {
			fault(t, raw, err)
			return
		}
		if d == nil {
			return
		}
		if d.Type == "" {
			t.Fatalf("ParseDestination(%q) = a destination without a type", raw)
		}
		if err := d.Check("destination"); err != nil {
			fault(t, raw, err)
			return
		}
		if err := d.CheckTransport(false); err != nil {
			if !errors.Is(err, subscriptions.ErrDestinationPlaintext) {
				t.Fatalf("CheckTransport = %v, want ErrDestinationPlaintext", err)
			}
			fault(t, raw, err)
		}
		if d.Type == subscriptions.DestinationRabbitMQ {
			// What the dispatcher dials: the url's typed parts, no option.
			if u, err := subscriptions.ParseAMQPURL("destination.url", d.URL); err != nil || strings.ContainsAny(d.URL, "?#") || u.Port == 0 {
				t.Fatalf("a checked url %q reads as %+v, %v", d.URL, u, err)
			}
		}
	})
}

// credentials are the values of raw's credential fields (the AMQP URL,
// the SASL password, the AWS secret key, the service account key) long
// enough to be told apart in a message.
func credentials(raw string) []string {
	var fields struct {
		Type            any `json:"type"`
		URL             any `json:"url"`
		SecretAccessKey any `json:"secret_access_key"`
		CredentialsJSON any `json:"credentials_json"`
		SASL            struct {
			Password any `json:"password"`
		} `json:"sasl"`
	}
	_ = json.Unmarshal([]byte(raw), &fields)
	var out []string
	for _, v := range []any{fields.URL, fields.SecretAccessKey, fields.CredentialsJSON, fields.SASL.Password} {
		if s, ok := v.(string); ok && len(s) >= 6 && s != fields.Type {
			out = append(out, s)
		}
	}
	return out
}
