package mqtt_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/mqtt"
	"github.com/webhookd/webhookd/internal/invalid"
)

// TestParseAccepts: what an mqtt destination may be, and how it reads
// back, shows its target and names its plaintext field.
func TestParseAccepts(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		summary   map[string]any
		target    string
		plaintext string
	}{
		{"TLS with credentials",
			`{"type": "mqtt", "broker": "mqtt.example.com:8883", "topic": "webhooks/payouts", "tls": true, "username": "shop", "password": "hunter2"}`,
			map[string]any{"broker": "mqtt.example.com:8883", "topic": "webhooks/payouts", "tls": true, "username": "shop", "password": destination.Masked},
			"mqtts://mqtt.example.com:8883/webhooks/payouts", ""},
		{"in clear, anonymous (tls absent is false)",
			`{"type": "mqtt", "broker": "10.0.0.7:1883", "topic": "orders"}`,
			map[string]any{"broker": "10.0.0.7:1883", "topic": "orders", "tls": false},
			"mqtt://10.0.0.7:1883/orders", "tls"},
		{"an IPv6 broker, a topic of empty levels and UTF-8",
			`{"type": "mqtt", "broker": "[2001:db8::1]:8883", "topic": "/ventes//été", "tls": true}`,
			map[string]any{"broker": "[2001:db8::1]:8883", "topic": "/ventes//été", "tls": true},
			"mqtts://[2001:db8::1]:8883//ventes//été", ""},
		{"a topic of 255 bytes",
			`{"type": "mqtt", "broker": "mqtt.example.com:8883", "topic": "` + strings.Repeat("t", 255) + `", "tls": true}`,
			map[string]any{"broker": "mqtt.example.com:8883", "topic": strings.Repeat("t", 255), "tls": true},
			"mqtts://mqtt.example.com:8883/" + strings.Repeat("t", 255), ""},
		{"a $ inside a topic (only a leading one is the broker's)",
			`{"type": "mqtt", "broker": "mqtt.example.com:8883", "topic": "prices/$usd", "tls": true}`,
			map[string]any{"broker": "mqtt.example.com:8883", "topic": "prices/$usd", "tls": true},
			"mqtts://mqtt.example.com:8883/prices/$usd", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := mqtt.New().Parse("destination", json.RawMessage(tc.raw))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if got := cfg.Summary(); !reflect.DeepEqual(got, tc.summary) {
				t.Errorf("summary %v, want %v", got, tc.summary)
			}
			if got := cfg.Target(); got != tc.target {
				t.Errorf("target %q, want %q", got, tc.target)
			}
			if got := cfg.Plaintext(); got != tc.plaintext {
				t.Errorf("plaintext %q, want %q", got, tc.plaintext)
			}
			host := strings.TrimSuffix(strings.TrimPrefix(tc.summary["broker"].(string)[:strings.LastIndex(tc.summary["broker"].(string), ":")], "["), "]")
			if got := cfg.Addresses(); len(got) != 1 || got[0] != (destination.Address{Field: "broker", Host: host}) {
				t.Errorf("addresses %v, want the broker's host %s", got, host)
			}
		})
	}
}

// TestParseRefuses: each refusal names its field and its rule, and never
// quotes the value.
func TestParseRefuses(t *testing.T) {
	const base = `"type": "mqtt", "broker": "mqtt.example.com:8883"`
	for _, tc := range []struct {
		name, raw, field, rule, secret string
	}{
		{"a wildcard #", `{` + base + `, "topic": "a/#"}`, "destination.topic", "destination_topic_wildcard", ""},
		{"a wildcard +", `{` + base + `, "topic": "a/+/b"}`, "destination.topic", "destination_topic_wildcard", ""},
		{"a $ topic", `{` + base + `, "topic": "$share/group/orders"}`, "destination.topic", "destination_topic_reserved", "share/group"},
		{"a tab", `{` + base + `, "topic": "a\tsecret"}`, "destination.topic", "destination_topic_invalid", "secret"},
		{"DEL", `{` + base + `, "topic": "a\u007fsecret"}`, "destination.topic", "destination_topic_invalid", "secret"},
		{"256 bytes of two-byte characters", `{` + base + `, "topic": "` + strings.Repeat("é", 128) + `"}`, "destination.topic", "destination_topic_invalid", ""},
		{"an empty topic", `{` + base + `, "topic": ""}`, "destination.topic", invalid.RuleMissing, ""},
		{"a number for the topic", `{` + base + `, "topic": 7}`, "destination.topic", "destination_field_invalid", ""},
		{"a broker URL", `{"type": "mqtt", "broker": "tcp://mqtt.example.com:1883", "topic": "a"}`, "destination.broker", "destination_broker_invalid", "tcp://"},
		{"a broker with a zone", `{"type": "mqtt", "broker": "[fe80::1%eth0]:1883", "topic": "a"}`, "destination.broker", "destination_host_invalid", "eth0"},
		{"a broker of 300 characters", `{"type": "mqtt", "broker": "` + strings.Repeat("a", 295) + `:1883", "topic": "a"}`, "destination.broker", "destination_broker_invalid", strings.Repeat("a", 295)},
		{"a port 0", `{"type": "mqtt", "broker": "mqtt.example.com:0", "topic": "a"}`, "destination.broker", "destination_port", ""},
		{"an empty broker", `{"type": "mqtt", "broker": "", "topic": "a"}`, "destination.broker", invalid.RuleMissing, ""},
		{"tls as a string", `{` + base + `, "topic": "a", "tls": "true"}`, "destination.tls", "destination_field_invalid", ""},
		{"a password of 256 characters", `{` + base + `, "topic": "a", "username": "u", "password": "` + strings.Repeat("s", 256) + `"}`, "destination.password", "destination_name_invalid", strings.Repeat("s", 256)},
		{"a username with a NUL", `{` + base + `, "topic": "a", "username": "u\u0000root"}`, "destination.username", "destination_name_invalid", "root"},
		{"a client id", `{` + base + `, "topic": "a", "client_id": "victim"}`, "destination", "destination_field_invalid", "victim"},
		{"a will", `{` + base + `, "topic": "a", "will_topic": "a/dead"}`, "destination", "destination_field_invalid", "a/dead"},
		{"an array", `[{` + base + `, "topic": "a"}]`, "destination", "destination_not_object", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := mqtt.New().Parse("destination", json.RawMessage(tc.raw))
			var bad *invalid.Error
			if !errors.As(err, &bad) {
				t.Fatalf("parse: %v, want an *invalid.Error", err)
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

// TestConfigNeverPrintsThePassword: fmt's verbs and slog show the target
// and the user, never the password.
func TestConfigNeverPrintsThePassword(t *testing.T) {
	cfg, err := mqtt.New().Parse("destination", json.RawMessage(
		`{"type": "mqtt", "broker": "mqtt.example.com:8883", "topic": "a", "tls": true, "username": "shop", "password": "hunter2-secret"}`))
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	slog.New(slog.NewJSONHandler(&log, nil)).Info("open", "destination", cfg)
	for verb, text := range map[string]string{
		"%v": fmt.Sprintf("%v", cfg), "%+v": fmt.Sprintf("%+v", cfg), "%#v": fmt.Sprintf("%#v", cfg),
		"%s": fmt.Sprintf("%s", cfg), "slog": log.String(), "target": cfg.Target(),
	} {
		if strings.Contains(text, "hunter2") {
			t.Errorf("%s shows the password: %s", verb, text)
		}
		if !strings.Contains(text, "mqtt.example.com:8883") {
			t.Errorf("%s does not show the broker: %s", verb, text)
		}
	}
}

// TestMetadata: the form's fields, the password secret, the required
// ones required.
func TestMetadata(t *testing.T) {
	md := mqtt.New().Metadata()
	if md.Type != "mqtt" || !md.Ordered {
		t.Errorf("type %q, ordered %v", md.Type, md.Ordered)
	}
	want := map[string][2]bool{ // required, secret
		"broker": {true, false}, "topic": {true, false}, "tls": {false, false}, "username": {false, false}, "password": {false, true},
	}
	if len(md.Fields) != len(want) {
		t.Errorf("%d fields, want %d", len(md.Fields), len(want))
	}
	for _, f := range md.Fields {
		w, ok := want[f.Name]
		if !ok {
			t.Errorf("field %s is not an mqtt field", f.Name)
			continue
		}
		if f.Required != w[0] || f.Secret != w[1] {
			t.Errorf("field %s: required %v, secret %v; want %v, %v", f.Name, f.Required, f.Secret, w[0], w[1])
		}
	}
}
