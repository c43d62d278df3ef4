package subscriptions_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/internal/testfixtures/kindstest"
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
			// What is sealed reads back, by the kind's rules, as the same
			// destination: what a worker opens.
			fields := stored(t, sub.Destination.Sealed)
			if fields["type"] != sub.Destination.Type() {
				t.Fatalf("stored %v, want type %s", fields["type"], sub.Destination.Type())
			}
			if sub.Destination.Type() != subscriptions.DestinationPoll {
				raw, _ := json.Marshal(fields)
				if _, _, err := kindstest.Registry(t, nil).Parse("destination", raw); err != nil {
					t.Fatalf("the stored destination does not read back: %v", err)
				}
			}
		})
	}
}
