package nats_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/desttest"
	"github.com/webhookd/webhookd/internal/destination/nats"
	"github.com/webhookd/webhookd/internal/invalid"
)

// refusal is a destination Parse refuses: the field it names, the rule,
// and the part of the value the refusal must not quote.
type refusal struct {
	name, config, field, rule, secret string
}

// refusals are the spec of what a nats destination may not be.
var refusals = []refusal{
	{"no servers", `{"type": "nats", "subject": "a.b"}`, "destination.servers", invalid.RuleMissing, ""},
	{"an empty list of servers", `{"type": "nats", "servers": [], "subject": "a.b"}`, "destination.servers", invalid.RuleMissing, ""},
	{"servers as a string", `{"type": "nats", "servers": "nats.example.com:4222", "subject": "a.b"}`,
		"destination.servers", "destination_field_invalid", ""},
	{"six servers", `{"type": "nats", "servers": ["a:1", "b:1", "c:1", "d:1", "e:1", "f:1"], "subject": "a.b"}`,
		"destination.servers", "destination_servers_count", ""},
	{"a server with a URL scheme", `{"type": "nats", "servers": ["nats://evil.example.com:4222"], "subject": "a.b"}`,
		"destination.servers[0]", "destination_broker_invalid", "evil.example.com"},
	{"a server with credentials", `{"type": "nats", "servers": ["user:hunter2@nats.example.com:4222"], "subject": "a.b"}`,
		"destination.servers[0]", "destination_broker_invalid", "hunter2"},
	{"a server with a query smuggling a file", `{"type": "nats", "servers": ["nats.example.com:4222?tls_ca=/etc/passwd"], "subject": "a.b"}`,
		"destination.servers[0]", "destination_port", "/etc/passwd"},
	{"a server without a port", `{"type": "nats", "servers": ["nats.example.com"], "subject": "a.b"}`,
		"destination.servers[0]", "destination_broker_invalid", ""},
	{"a server with a path in its host", `{"type": "nats", "servers": ["a.example.com:1", "evil/x:4222"], "subject": "a.b"}`,
		"destination.servers[1]", "destination_host_invalid", "evil/x"},
	{"a server named twice", `{"type": "nats", "servers": ["a.example.com:1", "a.example.com:1"], "subject": "a.b"}`,
		"destination.servers[1]", "destination_server_repeated", ""},
	{"no subject", `{"type": "nats", "servers": ["a:1"]}`, "destination.subject", invalid.RuleMissing, ""},
	{"a subject with a full wildcard", `{"type": "nats", "servers": ["a:1"], "subject": "orders.>"}`,
		"destination.subject", "destination_subject_invalid", ""},
	{"a subject with a token wildcard", `{"type": "nats", "servers": ["a:1"], "subject": "orders.*.paid"}`,
		"destination.subject", "destination_subject_invalid", ""},
	{"a subject with a space", `{"type": "nats", "servers": ["a:1"], "subject": "orders paid"}`,
		"destination.subject", "destination_subject_invalid", "orders paid"},
	{"a subject with a line feed (a second protocol line)", `{"type": "nats", "servers": ["a:1"], "subject": "a\r\nPUB evil 1"}`,
		"destination.subject", "destination_subject_invalid", "PUB evil"},
	{"a subject with a NUL", `{"type": "nats", "servers": ["a:1"], "subject": "a\u0000b"}`,
		"destination.subject", "destination_subject_invalid", ""},
	{"a subject not ASCII", `{"type": "nats", "servers": ["a:1"], "subject": "commandes.payées"}`,
		"destination.subject", "destination_subject_invalid", "payées"},
	{"a subject with an empty token", `{"type": "nats", "servers": ["a:1"], "subject": "orders..paid"}`,
		"destination.subject", "destination_subject_invalid", ""},
	{"a subject ending in a dot", `{"type": "nats", "servers": ["a:1"], "subject": "orders."}`,
		"destination.subject", "destination_subject_invalid", ""},
	{"a subject of 256 characters", `{"type": "nats", "servers": ["a:1"], "subject": "` + strings.Repeat("s", 256) + `"}`,
		"destination.subject", "destination_subject_invalid", ""},
	{"JetStream's API (a purge)", `{"type": "nats", "servers": ["a:1"], "subject": "$JS.API.STREAM.PURGE.ORDERS"}`,
		"destination.subject", "destination_subject_reserved", "PURGE"},
	{"the system account", `{"type": "nats", "servers": ["a:1"], "subject": "$SYS.REQ.SERVER.PING"}`,
		"destination.subject", "destination_subject_reserved", ""},
	{"another client's replies", `{"type": "nats", "servers": ["a:1"], "subject": "_INBOX.abc.1"}`,
		"destination.subject", "destination_subject_reserved", "abc"},
	{"a subject as a number", `{"type": "nats", "servers": ["a:1"], "subject": 7}`, "destination.subject", "destination_field_invalid", ""},
	{"tls as a string", `{"type": "nats", "servers": ["a:1"], "subject": "a.b", "tls": "yes"}`, "destination.tls", "destination_field_invalid", ""},
	{"a username without a password", `{"type": "nats", "servers": ["a:1"], "subject": "a.b", "username": "webhookd"}`,
		"destination.password", "destination_password_missing", ""},
	{"a password without a username", `{"type": "nats", "servers": ["a:1"], "subject": "a.b", "password": "hunter2"}`,
		"destination.username", "destination_username_missing", "hunter2"},
	{"a token and a user", `{"type": "nats", "servers": ["a:1"], "subject": "a.b", "username": "u", "password": "p", "token": "s3cret"}`,
		"destination.token", "destination_credentials_both", "s3cret"},
	{"a password with a control character", `{"type": "nats", "servers": ["a:1"], "subject": "a.b", "username": "u", "password": "hun\u0007ter2"}`,
		"destination.password", "destination_name_invalid", "ter2"},
	{"a token of 256 characters", `{"type": "nats", "servers": ["a:1"], "subject": "a.b", "token": "` + strings.Repeat("t", 256) + `"}`,
		"destination.token", "destination_name_invalid", strings.Repeat("t", 20)},
	{"a credentials file", `{"type": "nats", "servers": ["a:1"], "subject": "a.b", "creds_file": "/etc/nats/user.creds"}`,
		"destination.creds_file", "destination_field_unknown", "/etc/nats"},
	{"an nkey seed file", `{"type": "nats", "servers": ["a:1"], "subject": "a.b", "nkey_seed_file": "/root/.nkeys/seed"}`,
		"destination.nkey_seed_file", "destination_field_unknown", "/root"},
}

// hostile are the refusals as desttest's rows.
func hostile() []desttest.Hostile {
	out := make([]desttest.Hostile, 0, len(refusals))
	for _, r := range refusals {
		out = append(out, desttest.Hostile{Name: r.name, Config: r.config, Field: r.field, Secret: r.secret})
	}
	return out
}

func TestParseRefuses(t *testing.T) {
	registry, err := destination.NewRegistry(nats.New())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			_, _, err := registry.Parse("destination", json.RawMessage(r.config))
			var bad *invalid.Error
			if !errors.As(err, &bad) {
				t.Fatalf("Parse: %v, want an *invalid.Error", err)
			}
			if bad.Param != r.field || bad.Rule != r.rule {
				t.Errorf("refused as %s on %s (%s), want %s on %s", bad.Rule, bad.Param, bad.Message, r.rule, r.field)
			}
			if r.secret != "" && strings.Contains(bad.Message, r.secret) {
				t.Errorf("the refusal %q quotes the value", bad.Message)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	registry, err := destination.NewRegistry(nats.New())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, config, target, plaintext string
		addresses                       []destination.Address
		summary                         map[string]any
	}{
		{"one server in clear, no credentials", `{"type": "nats", "servers": ["nats.example.com:4222"], "subject": "webhooks.payouts"}`,
			"nats://nats.example.com:4222/webhooks.payouts", "tls",
			[]destination.Address{{Field: "servers[0]", Host: "nats.example.com"}},
			map[string]any{"servers": []string{"nats.example.com:4222"}, "subject": "webhooks.payouts", "tls": false}},
		{"a cluster over TLS with a user", `{"type": "nats", "servers": ["n1.example.com:4222", "[2001:db8::1]:4222"], "subject": "acme-corp.webhooks_v1.Payout",
			"tls": true, "username": "webhookd", "password": "hunter2"}`,
			"tls://n1.example.com:4222,[2001:db8::1]:4222/acme-corp.webhooks_v1.Payout", "",
			[]destination.Address{{Field: "servers[0]", Host: "n1.example.com"}, {Field: "servers[1]", Host: "2001:db8::1"}},
			map[string]any{"servers": []string{"n1.example.com:4222", "[2001:db8::1]:4222"}, "subject": "acme-corp.webhooks_v1.Payout",
				"tls": true, "username": "webhookd", "password": destination.Masked}},
		{"a token", `{"type": "nats", "servers": ["10.0.0.7:4222"], "subject": "w", "tls": true, "token": "s3cret-token"}`,
			"tls://10.0.0.7:4222/w", "", []destination.Address{{Field: "servers[0]", Host: "10.0.0.7"}},
			map[string]any{"servers": []string{"10.0.0.7:4222"}, "subject": "w", "tls": true, "token": destination.Masked}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			typ, cfg, err := registry.Parse("destination", json.RawMessage(tc.config))
			if err != nil || typ != "nats" {
				t.Fatalf("Parse: %q, %v", typ, err)
			}
			if got := cfg.Target(); got != tc.target {
				t.Errorf("target %q, want %q", got, tc.target)
			}
			if got := cfg.Plaintext(); got != tc.plaintext {
				t.Errorf("plaintext %q, want %q", got, tc.plaintext)
			}
			if got := cfg.Addresses(); !reflect.DeepEqual(got, tc.addresses) {
				t.Errorf("addresses %v, want %v", got, tc.addresses)
			}
			if got := cfg.Summary(); !reflect.DeepEqual(got, tc.summary) {
				t.Errorf("summary %v, want %v", got, tc.summary)
			}
			for _, printed := range []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg)} {
				if strings.Contains(printed, "hunter2") || strings.Contains(printed, "s3cret") {
					t.Errorf("the printed config %q shows a credential", printed)
				}
			}
		})
	}
}
