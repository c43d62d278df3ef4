package subscriptions_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/internal/testfixtures/kindstest"
)

// serviceAccount is a service account key as Google gives it, with
// change applied to its members (a nil value deletes one).
func serviceAccount(t *testing.T, privateKey string, change map[string]any) string {
	t.Helper()
	key := map[string]any{"type": "service_account", "project_id": "my-project", "private_key_id": "0123abcd",
		"private_key": privateKey, "client_email": "w@my-project.iam.gserviceaccount.com", "client_id": "1234567890",
		"auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": "https://oauth2.googleapis.com/token",
		"auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
		"client_x509_cert_url":        "https://www.googleapis.com/robot/v1/metadata/x509/w%40my-project.iam.gserviceaccount.com",
		"universe_domain":             "googleapis.com"}
	for k, v := range change {
		if v == nil {
			delete(key, k)
			continue
		}
		key[k] = v
	}
	b, err := json.Marshal(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// rsaPEM is a new PKCS #8 PEM RSA key of bits.
func rsaPEM(t *testing.T, bits int) string {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// oversizedPEM is the 4,608-bit RSA key keybounds keeps for its tests
// (made once with openssl: generating one takes seconds).
func oversizedPEM(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../keybounds/testdata/rsa4608.pem")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// destJSON is a destination as a merchant sends it.
func destJSON(t *testing.T, fields map[string]any) string {
	t.Helper()
	b, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDestinationAllowList: every field a client library would read more
// into is taken by allow-list. A rabbitmq url is scheme, user, password,
// host, port and vhost, nothing else: each option of amqp091-go's query
// (files it would open, the SNI, the authentication, the timing) is
// refused, as is a fragment. A gcp_pubsub key is a service account key
// and no other kind of Google credentials (which name files, commands and
// token endpoints), with Google's own endpoints and an RSA key within
// bounds. An sqs endpoint has no query. A broker host is a DNS name or an
// IP address.
func TestDestinationAllowList(t *testing.T) {
	t.Parallel()
	lax, _ := registry(t, subscriptions.Rules{EventTypes: catalogue(), AllowHTTPTargets: true, AllowPrivateTargets: true}, "m1")
	rabbit := func(url string) string {
		return destJSON(t, map[string]any{"type": "rabbitmq", "url": url, "routing_key": "q"})
	}
	const broker = "amqps://guest:guest@127.0.0.1:5671/v"
	good := rsaPEM(t, 2048)
	pubsub := func(creds string) string {
		return destJSON(t, map[string]any{"type": "gcp_pubsub", "project_id": "my-project", "topic_id": "webhooks", "credentials_json": creds})
	}
	type tc struct {
		name, dest, param, rule string // rule "" accepted
	}
	cases := []tc{
		{"rabbitmq url of typed parts", rabbit(broker), "", ""},
		{"rabbitmq url without a vhost", rabbit("amqps://u:p@mq.example.com"), "", ""},
		{"rabbitmq url with a fragment", rabbit(broker + "#x"), "destination.url", "destination_url_options"},
		{"rabbitmq url with an empty query", rabbit(broker + "?"), "destination.url", "destination_url_options"},
		{"rabbitmq url with a zoned IPv6 host", rabbit("amqps://[fe80::1%25eth0]:5671/"), "destination.url", "destination_host_invalid"},
		{"rabbitmq url with a host of other characters", rabbit("amqps://u:p@mq!example.com/"), "destination.url", "destination_host_invalid"},
		{"rabbitmq url with port 0", rabbit("amqps://mq.example.com:0/"), "destination.url", "destination_port"},
		{"rabbitmq url of another scheme", rabbit("http://mq.example.com/"), "destination.url", "destination_url_invalid"},
		{"rabbitmq url with a control character in the vhost", rabbit("amqps://mq.example.com/%01"), "destination.url", "destination_url_invalid"},
	}
	for _, option := range []string{"cacertfile=/nonexistent/file", "certfile=/etc/hostname", "keyfile=/dev/zero",
		"server_name_indication=internal.example", "auth_mechanism=external", "heartbeat=1", "connection_timeout=1", "channel_max=1"} {
		cases = append(cases, tc{"rabbitmq url with ?" + option, rabbit(broker + "?" + option), "destination.url", "destination_url_options"})
	}
	cases = append(cases,
		tc{"service account key", pubsub(serviceAccount(t, good, nil)), "", ""},
		tc{"service account key without Google's endpoints", pubsub(serviceAccount(t, good, map[string]any{"token_uri": nil, "universe_domain": nil})), "", ""},
		tc{"external_account", pubsub(serviceAccount(t, good, map[string]any{"type": "external_account"})),
			"destination.credentials_json", "destination_credentials_type"},
		tc{"authorized_user", pubsub(serviceAccount(t, good, map[string]any{"type": "authorized_user"})),
			"destination.credentials_json", "destination_credentials_type"},
		tc{"a credential_source file", pubsub(serviceAccount(t, good, map[string]any{"credential_source": map[string]any{"file": "/etc/hostname"}})),
			"destination.credentials_json", "destination_credentials_invalid"},
		tc{"an impersonation URL", pubsub(serviceAccount(t, good, map[string]any{"service_account_impersonation_url": "https://evil.example.com/"})),
			"destination.credentials_json", "destination_credentials_invalid"},
		tc{"another token_uri", pubsub(serviceAccount(t, good, map[string]any{"token_uri": "http://127.0.0.1:8080/token"})),
			"destination.credentials_json", "destination_credentials_endpoint"},
		tc{"another universe", pubsub(serviceAccount(t, good, map[string]any{"universe_domain": "evil.example.com"})),
			"destination.credentials_json", "destination_credentials_endpoint"},
		tc{"no private key", pubsub(serviceAccount(t, good, map[string]any{"private_key": nil})), "destination.credentials_json", "destination_credentials_invalid"},
		tc{"a short RSA key", pubsub(serviceAccount(t, rsaPEM(t, 1024), nil)), "destination.credentials_json", "key_size"},
		tc{"an oversized RSA key", pubsub(serviceAccount(t, oversizedPEM(t), nil)), "destination.credentials_json", "key_size"},
		tc{"two JSON values", pubsub(serviceAccount(t, good, nil) + "{}"), "destination.credentials_json", "destination_credentials_invalid"},
		tc{"sqs endpoint with a query", destJSON(t, map[string]any{"type": "sqs", "queue_url": "https://sqs.example.com/1/q", "region": "eu-west-1",
			"access_key_id": "a", "secret_access_key": "s", "endpoint": "https://sqs.example.com/?Action=x"}), "destination.endpoint", "destination_endpoint_invalid"},
		tc{"kafka broker of other characters", destJSON(t, map[string]any{"type": "kafka", "brokers": []string{"k/1:9092"}, "topic": "t", "tls": true}),
			"destination.brokers[0]", "destination_host_invalid"},
		tc{"pubsub endpoint with a port of letters", destJSON(t, map[string]any{"type": "gcp_pubsub", "project_id": "my-project", "topic_id": "webhooks",
			"endpoint": "pubsub.example.com:https"}), "destination.endpoint", "destination_port"},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := lax.Create(context.Background(), "m1", subscriptions.Draft{Events: []string{"*"}, Destination: json.RawMessage(c.dest)})
			if c.rule == "" {
				if err != nil {
					t.Fatalf("Create = %v, want accepted", err)
				}
				return
			}
			e := invalid.As(err)
			if e == nil || e.Param != c.param || e.Rule != c.rule {
				t.Fatalf("Create = %v, want a fault of %s (%s)", err, c.param, c.rule)
			}
			for _, quoted := range []string{"/etc/hostname", "/nonexistent", "/dev/zero", "guest:guest", "evil.example.com", "PRIVATE KEY"} {
				if strings.Contains(e.Message, quoted) {
					t.Errorf("the refusal %q quotes %q", e.Message, quoted)
				}
			}
		})
	}
}

// TestDestinationPlaintextRefused: a destination whose connections carry
// credentials and payloads in clear (amqp://, kafka without tls, an http://
// sqs endpoint, a Pub/Sub emulator endpoint) is refused, naming the field,
// unless the operator allows plaintext (WEBHOOKD_ALLOW_HTTP_TARGETS); its
// TLS form is accepted either way.
func TestDestinationPlaintextRefused(t *testing.T) {
	t.Parallel()
	strict, st := registry(t, subscriptions.Rules{EventTypes: catalogue(), AllowPrivateTargets: true}, "m1")
	lifted := subscriptions.NewRegistry(st.Subscriptions, st.Listeners, masterKey(), subscriptions.Rules{EventTypes: catalogue(), AllowHTTPTargets: true, AllowPrivateTargets: true,
		Kinds: kindstest.Registry(t, nil)})
	sqs := func(endpoint string) string {
		return destJSON(t, map[string]any{"type": "sqs", "queue_url": "https://sqs.example.com/1/q", "region": "eu-west-1",
			"access_key_id": "a", "secret_access_key": "s", "endpoint": endpoint})
	}
	for _, c := range []struct {
		name, dest string
		param      string // "" accepted by the strict registry too
		rule       string
	}{
		{"amqp", `{"type":"rabbitmq","url":"amqp://u:p@127.0.0.1:5672/","routing_key":"q"}`, "destination.url", destination.CodePlaintext},
		{"amqps", `{"type":"rabbitmq","url":"amqps://u:p@127.0.0.1:5671/","routing_key":"q"}`, "", ""},
		{"kafka without tls", `{"type":"kafka","brokers":["127.0.0.1:9092"],"topic":"t"}`, "destination.tls", destination.CodePlaintext},
		{"kafka with tls", `{"type":"kafka","brokers":["127.0.0.1:9092"],"topic":"t","tls":true}`, "", ""},
		{"pubsub emulator", `{"type":"gcp_pubsub","project_id":"my-project","topic_id":"webhooks","endpoint":"127.0.0.1:8085"}`,
			"destination.endpoint", destination.CodePlaintext},
		{"sqs http endpoint", sqs("http://127.0.0.1:9324"), "destination.endpoint", "url_not_https"},
		{"sqs https endpoint", sqs("https://127.0.0.1:9324"), "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := subscriptions.Draft{Events: []string{"*"}, Destination: json.RawMessage(c.dest)}
			_, _, err := strict.Create(context.Background(), "m1", d)
			if c.param == "" {
				if err != nil {
					t.Fatalf("strict Create = %v, want accepted", err)
				}
			} else if e := invalid.As(err); e == nil || e.Param != c.param || e.Rule != c.rule {
				t.Fatalf("strict Create = %v, want a fault of %s (%s)", err, c.param, c.rule)
			}
			sub, _, err := lifted.Create(context.Background(), "m1", d)
			if err != nil {
				t.Fatalf("Create with plaintext allowed = %v", err)
			}
			// What an attempt asks of the stored value: the same rule,
			// under the dispatcher's switch (destination.Pool.Open).
			raw, _ := json.Marshal(stored(t, sub.Destination.Sealed))
			_, cfg, err := kindstest.Registry(t, nil).Parse("destination", raw)
			if err != nil {
				t.Fatal(err)
			}
			if bad := destination.CheckPlaintext("destination", cfg, true); bad != nil {
				t.Errorf("CheckPlaintext(allowed) = %v", bad)
			}
			// The sqs endpoint's rule is the URL's (https), applied when it
			// is set; a stored one in clear is the plaintext rule's too.
			bad := destination.CheckPlaintext("destination", cfg, false)
			if wantRefused := c.param != ""; wantRefused != (bad != nil) {
				t.Errorf("CheckPlaintext(not allowed) = %v, want refused %v", bad, wantRefused)
			}
		})
	}
}

// TestDestinationSecretsReadMasked: every secret field of every
// destination type reads as the same mask, no part of the secret shown.
func TestDestinationSecretsReadMasked(t *testing.T) {
	t.Parallel()
	reg, _ := registry(t, subscriptions.Rules{EventTypes: catalogue()}, "m1")
	const mask = "••••••"
	for _, c := range []struct {
		name, dest string
		path       []string // where the secret reads in the summary
	}{
		{"sqs secret_access_key", `{"type":"sqs","queue_url":"https://sqs.eu-west-1.amazonaws.com/1/q","region":"eu-west-1",
			"access_key_id":"AKIA","secret_access_key":"wJalrXUtnFEMI-secret"}`, []string{"secret_access_key"}},
		{"kafka sasl password", `{"type":"kafka","brokers":["k.example.com:9093"],"topic":"t","tls":true,
			"sasl":{"mechanism":"plain","username":"u","password":"wJalrXUtnFEMI-secret"}}`, []string{"sasl", "password"}},
		{"gcp_pubsub credentials_json", destJSON(t, map[string]any{"type": "gcp_pubsub", "project_id": "my-project", "topic_id": "webhooks",
			"credentials_json": serviceAccount(t, rsaPEM(t, 2048), nil)}), []string{"credentials_json"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sub, _, err := reg.Create(context.Background(), "m1", subscriptions.Draft{Events: []string{"*"}, Destination: json.RawMessage(c.dest)})
			if err != nil {
				t.Fatal(err)
			}
			var v any = map[string]any(sub.Destination.Summary)
			for _, k := range c.path {
				v = v.(map[string]any)[k]
			}
			if v != mask {
				t.Errorf("%v reads %q, want %q", c.path, v, mask)
			}
			shown, _ := json.Marshal(sub.Destination.Summary)
			if strings.Contains(string(shown), "wJal") || strings.Contains(string(shown), "PRIVATE") {
				t.Errorf("summary %s shows part of a secret", shown)
			}
		})
	}
	// The rabbitmq password reads as net/url's mask in the url.
	sub, _, err := reg.Create(context.Background(), "m1", subscriptions.Draft{Events: []string{"*"},
		Destination: json.RawMessage(`{"type":"rabbitmq","url":"amqps://u:wJalrXUtnFEMI@mq.example.com/","routing_key":"q"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got := sub.Destination.Summary["url"]; got != "amqps://u:xxxxx@mq.example.com/" {
		t.Errorf("rabbitmq url reads %q", got)
	}
}
