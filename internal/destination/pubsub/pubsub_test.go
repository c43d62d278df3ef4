package pubsub_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/grpc/codes"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/desttest"
	"github.com/webhookd/webhookd/internal/destination/pubsub"
	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/testfixtures/tcpproxy"
)

// destJSON is a destination as a merchant sends it.
func destJSON(t testing.TB, fields map[string]any) string {
	t.Helper()
	b, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// emulator is a destination of the test topic at an emulator's address.
func emulator(t testing.TB, addr string) string {
	return destJSON(t, map[string]any{"type": "gcp_pubsub", "project_id": project, "topic_id": topic, "endpoint": addr})
}

// keyed is a destination of the test topic at addr, over TLS, with key.
func keyed(t testing.TB, addr, key string) string {
	return destJSON(t, map[string]any{"type": "gcp_pubsub", "project_id": project, "topic_id": topic, "endpoint": addr, "credentials_json": key})
}

// TestConformance: the conformance suite against pstest, Google's own
// in-process Pub/Sub server, as an emulator behind a TCP proxy the test
// takes down and brings back. Wrong credentials are a service account
// key of another private key, sent over TLS to the same server, which
// checks the JWT the key signs as Pub/Sub does (server_test.go).
// Oversized is nil: the answers are gRPC messages, which the client reads
// up to gRPC's bound of 4 MiB (a larger one is ResourceExhausted,
// broker_refused).
func TestConformance(t *testing.T) {
	srv := newPubSub(t)
	proxy := tcpproxy.New(t, srv.Addr)
	otherKey, _ := rsaKey(t)
	desttest.Run(t, desttest.Case{
		Kind:             pubsub.New(),
		Config:           emulator(t, proxy.Addr),
		Receive:          srv.receiver(),
		WrongCredentials: keyed(t, srv.TLSAddr, serviceAccount(t, otherKey, nil)),
		Down: func(t testing.TB) func() {
			proxy.Down()
			return func() { proxy.Up(t) }
		},
		Hostile: hostile(t),
	})
}

// hostile are values the kind refuses, naming their field and never
// quoting them.
func hostile(t testing.TB) []desttest.Hostile {
	key, _ := rsaKey(t)
	pubsubKey := func(creds string) string {
		return destJSON(t, map[string]any{"type": "gcp_pubsub", "project_id": "my-project", "topic_id": "webhooks", "credentials_json": creds})
	}
	return []desttest.Hostile{
		{Name: "an external_account reading a file", Config: pubsubKey(`{"type":"external_account","credential_source":{"file":"/etc/hostname"}}`),
			Field: "destination.credentials_json", Secret: "/etc/hostname"},
		{Name: "a token_uri elsewhere", Config: pubsubKey(serviceAccount(t, key, map[string]any{"token_uri": "http://169.254.169.254/token"})),
			Field: "destination.credentials_json", Secret: "169.254.169.254"},
		{Name: "an endpoint with a query", Config: `{"type":"gcp_pubsub","project_id":"my-project","topic_id":"webhooks","endpoint":"h.example.com:443?x=/etc/passwd"}`,
			Field: "destination.endpoint", Secret: "/etc/passwd"},
		{Name: "an endpoint of a path", Config: `{"type":"gcp_pubsub","project_id":"my-project","topic_id":"webhooks","endpoint":"unix:///etc/passwd"}`,
			Field: "destination.endpoint", Secret: "/etc/passwd"},
		{Name: "a topic of Google's", Config: `{"type":"gcp_pubsub","project_id":"my-project","topic_id":"goog-internal","endpoint":"h.example.com:443"}`,
			Field: "destination.topic_id", Secret: "goog-internal"},
		{Name: "oversized credentials", Config: pubsubKey(serviceAccount(t, key, map[string]any{"client_id": strings.Repeat("1", 16<<10)})),
			Field: "destination.credentials_json"},
	}
}

// TestParse: the rules of each field, as a spec: the field named, the
// rule, and the words the API answers (which never quote the value).
func TestParse(t *testing.T) {
	t.Parallel()
	reg, err := destination.NewRegistry(pubsub.New())
	if err != nil {
		t.Fatal(err)
	}
	good, _ := rsaKey(t)
	short, _ := rsaPEM(t, 1024)
	oversized, err := os.ReadFile("../../keybounds/testdata/rsa4608.pem")
	if err != nil {
		t.Fatal(err)
	}
	withKey := func(creds string) string {
		return destJSON(t, map[string]any{"type": "gcp_pubsub", "project_id": "my-project", "topic_id": "webhooks", "credentials_json": creds})
	}
	dest := func(change map[string]any) string {
		fields := map[string]any{"type": "gcp_pubsub", "project_id": "my-project", "topic_id": "webhooks", "credentials_json": serviceAccount(t, good, nil)}
		for k, v := range change {
			if v == nil {
				delete(fields, k)
				continue
			}
			fields[k] = v
		}
		return destJSON(t, fields)
	}
	const keyWords = `destination.credentials_json must be a service account key as Google gives it: a JSON object with "type": "service_account", ` +
		`"client_email" and "private_key", and no other member than Google puts in one.`
	for _, tc := range []struct {
		name, dest, param, rule string // rule "" accepted
		message                 string // the refusal's words, when checked whole
	}{
		{"service account key", dest(nil), "", "", ""},
		{"service account key without Google's endpoints", withKey(serviceAccount(t, good, map[string]any{"token_uri": nil, "universe_domain": nil})), "", "", ""},
		{"an emulator", dest(map[string]any{"credentials_json": nil, "endpoint": "127.0.0.1:8085"}), "", "", ""},
		{"another endpoint with a key", dest(map[string]any{"endpoint": "pubsub.example.com:443"}), "", "", ""},
		{"no project", dest(map[string]any{"project_id": nil}), "destination.project_id", invalid.RuleMissing, "destination.project_id is required."},
		{"a project of another shape", dest(map[string]any{"project_id": "P"}), "destination.project_id", "destination_project_invalid",
			"destination.project_id must be a Google Cloud project id: 6 to 30 lowercase letters, digits or hyphens."},
		{"no topic", dest(map[string]any{"topic_id": nil}), "destination.topic_id", invalid.RuleMissing, "destination.topic_id is required."},
		{"a topic of a path", dest(map[string]any{"topic_id": "projects/other/topics/t"}), "destination.topic_id", "destination_topic_invalid",
			"destination.topic_id must be a Pub/Sub topic id: 3 to 255 characters, starting with a letter, not with goog."},
		{"a topic of Google's", dest(map[string]any{"topic_id": "google-x"}), "destination.topic_id", "destination_topic_invalid", ""},
		{"no credentials", dest(map[string]any{"credentials_json": nil}), "destination.credentials_json", invalid.RuleMissing, ""},
		{"credentials of one word", dest(map[string]any{"credentials_json": "key"}), "destination.credentials_json", "destination_credentials_invalid", keyWords},
		{"credentials of the wrong JSON type", dest(map[string]any{"credentials_json": map[string]any{"type": "service_account"}}),
			"destination.credentials_json", "destination_field_invalid", ""},
		{"external_account", withKey(serviceAccount(t, good, map[string]any{"type": "external_account"})),
			"destination.credentials_json", "destination_credentials_type", `destination.credentials_json must be a key of "type": "service_account"; ` +
				`other kinds of Google credentials (external_account, authorized_user, impersonation) are not accepted.`},
		{"authorized_user", withKey(serviceAccount(t, good, map[string]any{"type": "authorized_user"})),
			"destination.credentials_json", "destination_credentials_type", ""},
		{"a credential_source file", withKey(serviceAccount(t, good, map[string]any{"credential_source": map[string]any{"file": "/etc/hostname"}})),
			"destination.credentials_json", "destination_credentials_invalid", keyWords},
		{"an impersonation URL", withKey(serviceAccount(t, good, map[string]any{"service_account_impersonation_url": "https://evil.example.com/"})),
			"destination.credentials_json", "destination_credentials_invalid", ""},
		{"another token_uri", withKey(serviceAccount(t, good, map[string]any{"token_uri": "http://127.0.0.1:8080/token"})),
			"destination.credentials_json", "destination_credentials_endpoint",
			"destination.credentials_json may name only Google's own token_uri (https://oauth2.googleapis.com/token) and universe_domain (googleapis.com)."},
		{"another universe", withKey(serviceAccount(t, good, map[string]any{"universe_domain": "evil.example.com"})),
			"destination.credentials_json", "destination_credentials_endpoint", ""},
		{"no private key", withKey(serviceAccount(t, good, map[string]any{"private_key": nil})), "destination.credentials_json", "destination_credentials_invalid", ""},
		{"no client_email", withKey(serviceAccount(t, good, map[string]any{"client_email": nil})), "destination.credentials_json", "destination_credentials_invalid", ""},
		{"a control character in a member", withKey(serviceAccount(t, good, map[string]any{"client_id": "1\n2"})),
			"destination.credentials_json", "destination_credentials_invalid", ""},
		{"a short RSA key", withKey(serviceAccount(t, short, nil)), "destination.credentials_json", "key_size", ""},
		{"an RSA key beyond the bound", withKey(serviceAccount(t, string(oversized), nil)), "destination.credentials_json", "key_size", ""},
		{"two JSON values", withKey(serviceAccount(t, good, nil) + "{}"), "destination.credentials_json", "destination_credentials_invalid", ""},
		{"over 16 KiB", withKey(serviceAccount(t, good, map[string]any{"client_id": strings.Repeat("1", 14<<10)})),
			"destination.credentials_json", "destination_credentials_invalid", ""},
		{"an endpoint without a port", dest(map[string]any{"endpoint": "pubsub.example.com"}), "destination.endpoint", "destination_broker_invalid",
			"destination.endpoint must be host:port, such as pubsub.googleapis.com:443."},
		{"an endpoint with a port of letters", dest(map[string]any{"endpoint": "pubsub.example.com:https"}), "destination.endpoint", "destination_port",
			"destination.endpoint has an invalid port."},
		{"an endpoint with a zoned IPv6 host", dest(map[string]any{"endpoint": "[fe80::1%eth0]:443"}), "destination.endpoint", "destination_host_invalid", ""},
		{"an endpoint of a URL", dest(map[string]any{"endpoint": "https://pubsub.example.com:443"}), "destination.endpoint", "destination_broker_invalid", ""},
		{"a member the kind does not have", dest(map[string]any{"api_key": "x"}), "destination.api_key", "destination_field_unknown", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, cfg, err := reg.Parse("destination", json.RawMessage(tc.dest))
			if tc.rule == "" {
				if err != nil {
					t.Fatalf("Parse = %v, want accepted", err)
				}
				if cfg.Target() != "gcp-pubsub://projects/my-project/topics/webhooks" {
					t.Errorf("target %q", cfg.Target())
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
			for _, quoted := range []string{"/etc/hostname", "evil.example.com", "PRIVATE KEY", "127.0.0.1:8080"} {
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
	reg, err := destination.NewRegistry(pubsub.New())
	if err != nil {
		t.Fatal(err)
	}
	key, _ := rsaKey(t)
	_, cfg, err := reg.Parse("destination", json.RawMessage(keyed(t, "pubsub.example.com:443", serviceAccount(t, key, nil))))
	if err != nil {
		t.Fatal(err)
	}
	summary, _ := json.Marshal(cfg.Summary())
	if want := `{"client_email":"w@my-project.iam.gserviceaccount.com","credentials_json":"••••••","endpoint":"pubsub.example.com:443",` +
		`"project_id":"webhookd-test","topic_id":"webhooks","type":"gcp_pubsub"}`; string(summary) != want {
		t.Errorf("summary %s, want %s", summary, want)
	}
	if a := cfg.Addresses(); len(a) != 1 || a[0] != (destination.Address{Field: "endpoint", Host: "pubsub.example.com"}) {
		t.Errorf("addresses %+v, want the endpoint's host", a)
	}
	if cfg.Plaintext() != "" {
		t.Errorf("plaintext %q with a key (TLS)", cfg.Plaintext())
	}
	for _, printed := range []string{cfg.(interface{ String() string }).String(), cfg.(interface{ GoString() string }).GoString()} {
		if strings.Contains(printed, "PRIVATE") || strings.Contains(printed, "client_email") {
			t.Errorf("printed %q shows the key", printed)
		}
	}
	stored, err := destination.Encode("gcp_pubsub", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, again, err := reg.Parse("destination", stored); err != nil || again.Summary()["client_email"] != "w@my-project.iam.gserviceaccount.com" {
		t.Errorf("the stored form reads back as %v, %v", again, err)
	}

	_, emu, err := reg.Parse("destination", json.RawMessage(emulator(t, "10.0.0.1:8085")))
	if err != nil {
		t.Fatal(err)
	}
	if emu.Plaintext() != "endpoint" || len(emu.Addresses()) != 1 || emu.Addresses()[0].Host != "10.0.0.1" {
		t.Errorf("an emulator: plaintext %q, addresses %+v", emu.Plaintext(), emu.Addresses())
	}
	if _, _, err := reg.Parse("destination", json.RawMessage(`{"type":"gcp_pubsub","project_id":"my-project","topic_id":"webhooks","credentials_json":`+
		jsonString(serviceAccount(t, key, nil))+`}`)); err != nil {
		t.Fatal(err)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// testEnv is a plain dialer's Env.
func testEnv() destination.Env {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return destination.Env{Dial: d.DialContext, Timeout: 5 * time.Second, Clock: clock.Or(nil), Version: "test"}
}

// open parses raw and opens its publisher.
func open(t *testing.T, raw string) destination.Publisher {
	t.Helper()
	reg, err := destination.NewRegistry(pubsub.New())
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

func message(id, key string) destination.Message {
	return destination.Message{DeliveryID: "dlv_" + id, EventID: id, Body: []byte(`{"id":"` + id + `"}`), ContentType: "application/json",
		Headers: map[string]string{"webhook-id": id, "content-type": "application/json"}, OrderingKey: key, Size: 1}
}

func send(t *testing.T, p destination.Publisher, m destination.Message) (destination.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.Send(ctx, m)
}

// TestServiceAccountKey: with a key, the publisher speaks TLS and signs
// each call with a JWT of the key (the server checks both), and the
// message arrives with its ordering key.
func TestServiceAccountKey(t *testing.T) {
	t.Parallel()
	srv := newPubSub(t)
	p := open(t, keyed(t, srv.TLSAddr, srv.Key))
	res, err := send(t, p, message("evt_keyed", "acct_a"))
	if err != nil || !strings.HasPrefix(res.Answer, "confirmed by broker (message id ") {
		t.Fatalf("send: %q, %v", res.Answer, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got := srv.receiver()(ctx, t); got.Headers["webhook-id"] != "evt_keyed" || got.Key != "acct_a" {
		t.Errorf("arrived %v with key %q", got.Headers, got.Key)
	}
	// The emulator's plaintext port with a key: TLS is refused there.
	_, err = send(t, open(t, keyed(t, srv.Addr, srv.Key)), message("evt_plain", ""))
	// Google's library retries Unavailable within the send's deadline.
	if code, said := destination.Classify(err); err == nil || (code != destination.CodeUnreachable && code != destination.CodeNotConfirmed) {
		t.Errorf("a key sent to a server without TLS: %s %q (%v), want broker_unreachable or not_confirmed", code, said, err)
	}
}

// TestFailures: a status of the service gives the code and the
// merchant's words, its code's name and never its message. A status
// Google's library retries (Unavailable, Internal, ResourceExhausted,
// Aborted…) is retried until the send's deadline, which ends it as
// not_confirmed, "timed out": the service may have taken the message.
func TestFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code codes.Code
		want string
		said string
	}{
		{codes.Unauthenticated, destination.CodeAuthFailed, "Pub/Sub: Unauthenticated"},
		{codes.PermissionDenied, destination.CodeAuthFailed, "Pub/Sub: PermissionDenied"},
		{codes.NotFound, destination.CodeRefused, "Pub/Sub: NotFound"},
		{codes.InvalidArgument, destination.CodeRefused, "Pub/Sub: InvalidArgument"},
		{codes.FailedPrecondition, destination.CodeRefused, "Pub/Sub: FailedPrecondition"},
		{codes.Unavailable, destination.CodeNotConfirmed, "timed out"},
	} {
		t.Run(tc.code.String(), func(t *testing.T) {
			t.Parallel()
			srv := pstest.NewServer(pstest.WithErrorInjection("Publish", tc.code, "the service's own words at 10.1.2.3"))
			t.Cleanup(func() { srv.Close() })
			_, err := send(t, open(t, emulator(t, srv.Addr)), message("evt_"+tc.code.String(), "acct_a"))
			code, said := destination.Classify(err)
			if code != tc.want || said != tc.said {
				t.Errorf("send: %s %q (%v), want %s %q", code, said, err, tc.want, tc.said)
			}
			desttest.CheckMerchantWords(t, said)
		})
	}
	t.Run("no such topic", func(t *testing.T) {
		t.Parallel()
		srv := pstest.NewServer()
		t.Cleanup(func() { srv.Close() })
		_, err := send(t, open(t, emulator(t, srv.Addr)), message("evt_nf", ""))
		if code, said := destination.Classify(err); code != destination.CodeRefused || said != "Pub/Sub: NotFound" {
			t.Errorf("send: %s %q (%v), want broker_refused, Pub/Sub: NotFound", code, said, err)
		}
	})
}

// TestKeyGoesOnAfterAFailure: a failed publish of an ordering key does
// not pause the key: the next Send of it (the retry) is published.
func TestKeyGoesOnAfterAFailure(t *testing.T) {
	t.Parallel()
	srv := newPubSub(t)
	proxy := tcpproxy.New(t, srv.Addr)
	p := open(t, emulator(t, proxy.Addr))
	proxy.Down()
	if _, err := send(t, p, message("evt_1", "acct_a")); err == nil {
		t.Fatal("a send with the server down succeeded")
	}
	proxy.Up(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := send(t, p, message("evt_2", "acct_a"))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the key's next send still fails after 30 s: %v", err)
		}
		time.Sleep(200 * time.Millisecond) // kept: the pace of the retries
	}
}
