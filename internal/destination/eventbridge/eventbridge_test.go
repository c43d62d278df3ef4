package eventbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/desttest"
	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/testfixtures/eventbridgetest"
	"github.com/webhookd/webhookd/receiver"
	"github.com/webhookd/webhookd/signer"
)

// account is the account members of a destination on AWS's own
// endpoint, for Parse's rows.
const account = `"region": "eu-west-1", "access_key_id": "AKIAEXAMPLE", "secret_access_key": "s3cr3t-key"`

// parseRows are Parse's rules, row by row: a destination object and the
// field its refusal names with its rule ("" when it is accepted), and
// the part of the value the refusal must not quote.
var parseRows = []struct {
	name, raw, field, rule, secret string
}{
	{name: "a bus by name", raw: `{"type": "eventbridge", "event_bus": "webhooks", ` + account + `}`},
	{name: "the default bus", raw: `{"type": "eventbridge", "event_bus": "default", ` + account + `}`},
	{name: "a bus name of every allowed character", raw: `{"type": "eventbridge", "event_bus": "acme/prod.web_hooks-1", ` + account + `}`},
	{name: "a bus by ARN in the destination's region", raw: `{"type": "eventbridge", "event_bus": "arn:aws:events:eu-west-1:123456789012:event-bus/webhooks", ` + account + `}`},
	{name: "a bus ARN of another partition, its region the destination's",
		raw: `{"type": "eventbridge", "event_bus": "arn:aws-us-gov:events:us-gov-west-1:123456789012:event-bus/webhooks", "region": "us-gov-west-1", "access_key_id": "AKIAEXAMPLE", "secret_access_key": "s3cr3t-key"}`},
	{name: "a source of its own", raw: `{"type": "eventbridge", "event_bus": "webhooks", "source": "com.acme.payouts", ` + account + `}`},
	{name: "a source of 256 characters", raw: `{"type": "eventbridge", "event_bus": "webhooks", "source": "` + strings.Repeat("s", 256) + `", ` + account + `}`},
	{name: "a bus name of 256 characters", raw: `{"type": "eventbridge", "event_bus": "` + strings.Repeat("b", 256) + `", ` + account + `}`},
	{name: "an https endpoint", raw: `{"type": "eventbridge", "event_bus": "webhooks", "endpoint": "https://vpce-1.events.eu-west-1.vpce.amazonaws.com", ` + account + `}`},

	{name: "no bus", raw: `{"type": "eventbridge", ` + account + `}`, field: "destination.event_bus", rule: invalid.RuleMissing},
	{name: "a bus ARN of another region", raw: `{"type": "eventbridge", "event_bus": "arn:aws:events:us-east-1:123456789012:event-bus/webhooks", ` + account + `}`,
		field: "destination.event_bus", rule: "destination_event_bus_region", secret: "us-east-1"},
	{name: "a bus ARN of another service", raw: `{"type": "eventbridge", "event_bus": "arn:aws:sqs:eu-west-1:123456789012:event-bus/webhooks", ` + account + `}`,
		field: "destination.event_bus", rule: "destination_event_bus_invalid", secret: "arn:aws:sqs"},
	{name: "a bus ARN with an account of eleven digits", raw: `{"type": "eventbridge", "event_bus": "arn:aws:events:eu-west-1:98765432109:event-bus/webhooks", ` + account + `}`,
		field: "destination.event_bus", rule: "destination_event_bus_invalid", secret: "98765432109"},
	{name: "a bus ARN naming a rule, not a bus", raw: `{"type": "eventbridge", "event_bus": "arn:aws:events:eu-west-1:123456789012:rule/webhooks", ` + account + `}`,
		field: "destination.event_bus", rule: "destination_event_bus_invalid", secret: "rule/webhooks"},
	{name: "a bus name with a control character", raw: `{"type": "eventbridge", "event_bus": "web\u0000hooks", ` + account + `}`,
		field: "destination.event_bus", rule: "destination_event_bus_invalid"},
	{name: "a bus name with a newline", raw: `{"type": "eventbridge", "event_bus": "webhooks\nX-Amz-Target: AWSEvents.DeleteRule", ` + account + `}`,
		field: "destination.event_bus", rule: "destination_event_bus_invalid", secret: "DeleteRule"},
	{name: "a bus name with a query", raw: `{"type": "eventbridge", "event_bus": "webhooks?Action=DeleteEventBus", ` + account + `}`,
		field: "destination.event_bus", rule: "destination_event_bus_invalid", secret: "DeleteEventBus"},
	{name: "a bus name of 257 characters", raw: `{"type": "eventbridge", "event_bus": "` + strings.Repeat("b", 257) + `", ` + account + `}`,
		field: "destination.event_bus", rule: "destination_event_bus_invalid", secret: strings.Repeat("b", 257)},
	{name: "a bus that is not a string", raw: `{"type": "eventbridge", "event_bus": {"name": "webhooks"}, ` + account + `}`,
		field: "destination.event_bus", rule: "destination_field_invalid"},
	{name: "a source starting with aws.", raw: `{"type": "eventbridge", "event_bus": "webhooks", "source": "aws.s3", ` + account + `}`,
		field: "destination.source", rule: "destination_source_reserved", secret: "aws.s3"},
	{name: "a source starting with AWS. in capitals", raw: `{"type": "eventbridge", "event_bus": "webhooks", "source": "AWS.events", ` + account + `}`,
		field: "destination.source", rule: "destination_source_reserved", secret: "AWS.events"},
	{name: "a source with a control character", raw: `{"type": "eventbridge", "event_bus": "webhooks", "source": "web\u001bhookd", ` + account + `}`,
		field: "destination.source", rule: "destination_source_invalid"},
	{name: "a source with a space", raw: `{"type": "eventbridge", "event_bus": "webhooks", "source": "acme payouts", ` + account + `}`,
		field: "destination.source", rule: "destination_source_invalid", secret: "acme payouts"},
	{name: "a source beyond ASCII", raw: `{"type": "eventbridge", "event_bus": "webhooks", "source": "acmé", ` + account + `}`,
		field: "destination.source", rule: "destination_source_invalid", secret: "acmé"},
	{name: "a source of 257 characters", raw: `{"type": "eventbridge", "event_bus": "webhooks", "source": "` + strings.Repeat("s", 257) + `", ` + account + `}`,
		field: "destination.source", rule: "destination_source_invalid", secret: strings.Repeat("s", 257)},
	{name: "a source that is a number", raw: `{"type": "eventbridge", "event_bus": "webhooks", "source": 7, ` + account + `}`,
		field: "destination.source", rule: "destination_field_invalid"},
	{name: "an endpoint with a query", raw: `{"type": "eventbridge", "event_bus": "webhooks", "endpoint": "https://events.example.com/?X-Amz-Target=AWSEvents.DeleteRule", ` + account + `}`,
		field: "destination.endpoint", rule: "destination_endpoint_invalid", secret: "DeleteRule"},
	{name: "an endpoint with credentials", raw: `{"type": "eventbridge", "event_bus": "webhooks", "endpoint": "https://admin:hunter2@events.example.com", ` + account + `}`,
		field: "destination.endpoint", rule: "destination_endpoint_invalid", secret: "hunter2"},
	{name: "an endpoint that is a file", raw: `{"type": "eventbridge", "event_bus": "webhooks", "endpoint": "file:///etc/passwd", ` + account + `}`,
		field: "destination.endpoint", rule: "destination_endpoint_invalid", secret: "/etc/passwd"},
	{name: "an endpoint with a control character", raw: `{"type": "eventbridge", "event_bus": "webhooks", "endpoint": "https://events.example.com/\r\nHost: evil", ` + account + `}`,
		field: "destination.endpoint", rule: "destination_endpoint_invalid", secret: "evil"},
	{name: "a role to assume, a field the kind has not", raw: `{"type": "eventbridge", "event_bus": "webhooks", "role_arn": "arn:aws:iam::123456789012:role/Admin", ` + account + `}`,
		field: "destination.role_arn", rule: "destination_field_unknown", secret: "role/Admin"},
	{name: "a session token, a field the kind has not", raw: `{"type": "eventbridge", "event_bus": "webhooks", "session_token": "FwoGZXIvYXdzEXAMPLE", ` + account + `}`,
		field: "destination.session_token", rule: "destination_field_unknown", secret: "FwoGZXIvYXdzEXAMPLE"},
	{name: "no region", raw: `{"type": "eventbridge", "event_bus": "webhooks", "access_key_id": "AKIAEXAMPLE", "secret_access_key": "s3cr3t-key"}`,
		field: "destination.region", rule: invalid.RuleMissing},
	{name: "a region with a newline", raw: `{"type": "eventbridge", "event_bus": "webhooks", "region": "eu-west-1\n", "access_key_id": "AKIAEXAMPLE", "secret_access_key": "s3cr3t-key"}`,
		field: "destination.region", rule: "destination_region_invalid"},
	{name: "no secret key", raw: `{"type": "eventbridge", "event_bus": "webhooks", "region": "eu-west-1", "access_key_id": "AKIAEXAMPLE"}`,
		field: "destination.secret_access_key", rule: invalid.RuleMissing},
	{name: "an access key with a control character", raw: `{"type": "eventbridge", "event_bus": "webhooks", "region": "eu-west-1", "access_key_id": "AKIA\u0007EXAMPLE", "secret_access_key": "s3cr3t-key"}`,
		field: "destination.access_key_id", rule: "destination_name_invalid", secret: "EXAMPLE"},
	{name: "a secret key of 256 characters", raw: `{"type": "eventbridge", "event_bus": "webhooks", "region": "eu-west-1", "access_key_id": "AKIAEXAMPLE", "secret_access_key": "` + strings.Repeat("k", 256) + `"}`,
		field: "destination.secret_access_key", rule: "destination_name_invalid", secret: strings.Repeat("k", 256)},
}

// TestParse is the spec of an eventbridge destination's fields.
func TestParse(t *testing.T) {
	registry, err := destination.NewRegistry(New())
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range parseRows {
		t.Run(row.name, func(t *testing.T) {
			_, cfg, err := registry.Parse("destination", json.RawMessage(row.raw))
			if row.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if c := cfg.(Config); c.Source == "" || c.EventBus == "" {
					t.Fatalf("accepted as %v", c)
				}
				return
			}
			var bad *invalid.Error
			if !errors.As(err, &bad) {
				t.Fatalf("Parse: %v, want %s on %s", err, row.rule, row.field)
			}
			if bad.Param != row.field || bad.Rule != row.rule {
				t.Errorf("refused on %s by %s (%s), want %s by %s", bad.Param, bad.Rule, bad.Message, row.field, row.rule)
			}
			if row.secret != "" && strings.Contains(bad.Message, row.secret) {
				t.Errorf("the refusal %q quotes the value", bad.Message)
			}
		})
	}
}

func TestParseDefaultsAndTarget(t *testing.T) {
	for _, tc := range []struct{ raw, source, target string }{
		{`{"event_bus": "webhooks", ` + account + `}`, "webhookd", "eventbridge://eu-west-1/webhooks"},
		{`{"event_bus": "arn:aws:events:eu-west-1:123456789012:event-bus/webhooks", "source": "com.acme", ` + account + `}`,
			"com.acme", "arn:aws:events:eu-west-1:123456789012:event-bus/webhooks"},
	} {
		cfg, err := New().Parse("destination", json.RawMessage(tc.raw))
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.(Config).Source; got != tc.source {
			t.Errorf("source %q, want %q", got, tc.source)
		}
		if got := cfg.Target(); got != tc.target {
			t.Errorf("target %q, want %q", got, tc.target)
		}
		if cfg.Plaintext() != "" || cfg.Addresses() != nil {
			t.Errorf("AWS's own endpoint: plaintext %q, addresses %v", cfg.Plaintext(), cfg.Addresses())
		}
	}
	cfg, err := New().Parse("destination", json.RawMessage(`{"event_bus": "webhooks", "endpoint": "http://events.example.com", `+account+`}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Plaintext() != "endpoint" || len(cfg.Addresses()) != 1 || cfg.Addresses()[0].URL != "http://events.example.com" {
		t.Errorf("an http endpoint: plaintext %q, addresses %v", cfg.Plaintext(), cfg.Addresses())
	}
}

// TestConfigNeverPrintsTheSecret: no way of printing a destination shows
// its secret key.
func TestConfigNeverPrintsTheSecret(t *testing.T) {
	cfg, err := New().Parse("destination", json.RawMessage(`{"event_bus": "webhooks", "endpoint": "https://events.example.com", `+account+`}`))
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("destination", "cfg", cfg)
	summary, _ := json.Marshal(cfg.Summary())
	for what, text := range map[string]string{
		"%v": fmt.Sprintf("%v", cfg), "%+v": fmt.Sprintf("%+v", cfg), "%#v": fmt.Sprintf("%#v", cfg), "%s": fmt.Sprintf("%s", cfg),
		"slog": logged.String(), "summary": string(summary), "target": cfg.Target(),
	} {
		if strings.Contains(text, "s3cr3t-key") {
			t.Errorf("%s shows the secret key: %s", what, text)
		}
	}
	if !strings.Contains(string(summary), destination.Masked) {
		t.Errorf("the summary %s does not show the secret key masked", summary)
	}
}

// TestConformance runs desttest's suite against the stand-in (see
// standin_test.go for why it is one and what it checks).
func TestConformance(t *testing.T) {
	s := eventbridgetest.New(t)
	var hostile []desttest.Hostile
	for _, row := range parseRows {
		if row.field != "" && row.field != "destination.region" {
			hostile = append(hostile, desttest.Hostile{Name: row.name, Config: row.raw, Field: row.field, Secret: row.secret})
		}
	}
	desttest.Run(t, desttest.Case{
		Kind:    New(),
		Config:  s.Config(""),
		Receive: s.Receive,
		WrongCredentials: fmt.Sprintf(`{"type": "eventbridge", "event_bus": %q, "region": %q, "access_key_id": "AKIAWRONGKEY0000000", "secret_access_key": "wrong", "endpoint": %q}`,
			eventbridgetest.Bus, eventbridgetest.Region, s.URL()),
		Down:    s.Down,
		Hostile: hostile,
		Oversized: func(url string) string {
			return fmt.Sprintf(`{"type": "eventbridge", "event_bus": %q, "region": %q, "access_key_id": %q, "secret_access_key": %q, "endpoint": %q}`,
				eventbridgetest.Bus, eventbridgetest.Region, eventbridgetest.Key, eventbridgetest.Secret, url)
		},
	})
}

// message is a message signed as the engine signs one, with a fresh
// secret; eventType "" is a batch's.
func message(t testing.TB, id, eventType string, body []byte, contentType string, at time.Time) (string, destination.Message) {
	t.Helper()
	secret, err := signer.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	key, err := signer.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("Content-Type", contentType)
	h.Set("User-Agent", "webhookd/test")
	h.Set("X-Merchant-Header", "kept")
	signer.SetHeaders(h, id, at, body, key)
	headers := map[string]string{}
	for name := range h {
		headers[strings.ToLower(name)] = h.Get(name)
	}
	return secret, destination.Message{DeliveryID: "dlv_" + id, EventID: id, EventType: eventType, Body: body,
		ContentType: contentType, Headers: headers, SignedAt: at, Size: 1}
}

// envelope is an event's envelope as the engine sends it.
func envelope(id string, at time.Time, extra string) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"type":"payout.paid","created_at":%q,"data":{"object":{"id":"po_1","amount":1250,"currency":"EUR","memo":"<b>&amp; ü \u2028</b>"%s}}}`,
		id, at.UTC().Format(time.RFC3339), extra))
}

func testEnv() destination.Env {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return destination.Env{Dial: d.DialContext, Timeout: 5 * time.Second, Clock: clock.Or(nil), Version: "test"}
}

func open(t testing.TB, raw string) destination.Publisher {
	t.Helper()
	cfg, err := New().Parse("destination", json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New().Open(cfg, testEnv())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func send(p destination.Publisher, m destination.Message) (destination.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.Send(ctx, m)
}

func verifies(t testing.TB, secret string, got desttest.Arrived) {
	t.Helper()
	v, err := receiver.NewVerifier(receiver.VerifierConfig{Secrets: []string{secret}, Tolerance: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.VerifyMessage(got.Headers, got.Body); err != nil {
		t.Fatalf("the event as a target gets it does not verify: %v", err)
	}
}

func jsonEqual(t testing.TB, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

// TestEventAsATargetGetsIt: the entry's fields as rules match them, and a
// detail that verifies after EventBridge rendered it again.
func TestEventAsATargetGetsIt(t *testing.T) {
	s := eventbridgetest.New(t)
	at := time.Now().Truncate(time.Second)
	for _, tc := range []struct {
		name, extra, bus, source string
	}{
		{"a bus by name, the default source", "", eventbridgetest.Bus, DefaultSource},
		{"a bus by ARN, a source of its own", `, "event_bus": "` + eventbridgetest.ARN + `", "source": "com.acme.payouts"`, eventbridgetest.ARN, "com.acme.payouts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := s.Config("")
			if tc.extra != "" {
				var fields map[string]any
				_ = json.Unmarshal([]byte(s.Config(tc.extra)), &fields) // the later event_bus wins
				b, _ := json.Marshal(fields)
				raw = string(b)
			}
			p := open(t, raw)
			body := envelope("evt_1", at, "")
			secret, m := message(t, "evt_1", "payout.paid", body, "application/json", at)
			res, err := send(p, m)
			if err != nil {
				t.Fatal(err)
			}
			e := s.Next(context.Background(), t)
			if want := "confirmed by EventBridge (event id " + e.ID + ")"; res.Answer != want {
				t.Errorf("answer %q, want %q", res.Answer, want)
			}
			if e.DetailType != "payout.paid" || e.Source != tc.source || e.Bus != tc.bus {
				t.Errorf("detail-type %q, source %q, bus %q; want payout.paid, %q, %q", e.DetailType, e.Source, e.Bus, tc.source, tc.bus)
			}
			if want := at.UTC().Format(time.RFC3339); e.Time != want {
				t.Errorf("the event's time %s, want the signed time %s", e.Time, want)
			}
			var d struct {
				Webhook map[string]string `json:"webhook"`
				Body    string            `json:"body"`
				Event   json.RawMessage   `json:"event"`
			}
			if err := json.Unmarshal(e.Detail, &d); err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, d.Event, body) {
				t.Errorf("detail.event is %s, want the envelope %s", d.Event, body)
			}
			if !reflect.DeepEqual(d.Webhook, m.Headers) {
				t.Errorf("detail.webhook is %v, want every header %v", d.Webhook, m.Headers)
			}
			got := eventbridgetest.Unframe(t, e)
			if !bytes.Equal(got.Body, body) {
				t.Fatalf("detail.body is %q, want %q", got.Body, body)
			}
			verifies(t, secret, got)
		})
	}
}

// TestBatchAndEncryptedBodies: a batch's detail-type, and a body that is
// not a JSON object travelling without "event".
func TestBatchAndEncryptedBodies(t *testing.T) {
	s := eventbridgetest.New(t)
	p := open(t, s.Config(""))
	at := time.Now()

	batch := []byte(`{"data":[` + string(envelope("evt_a", at, "")) + `,` + string(envelope("evt_b", at, "")) + `]}`)
	secret, m := message(t, "batch_1", "", batch, "application/json", at)
	m.Headers["webhook-batch-size"] = "2"
	m.Size = 2
	if _, err := send(p, m); err != nil {
		t.Fatal(err)
	}
	e := s.Next(context.Background(), t)
	if e.DetailType != BatchDetailType {
		t.Errorf("a batch's detail-type %q, want %q", e.DetailType, BatchDetailType)
	}
	var d map[string]json.RawMessage
	_ = json.Unmarshal(e.Detail, &d)
	if !jsonEqual(t, d["event"], batch) {
		t.Errorf("a batch's detail.event is %s, want the batch", d["event"])
	}
	got := eventbridgetest.Unframe(t, e)
	verifies(t, secret, got)
	if got.Headers["webhook-batch-size"] != "2" {
		t.Errorf("webhook-batch-size arrived as %q", got.Headers["webhook-batch-size"])
	}

	jwe := []byte("eyJhbGciOiJSU0EtT0FFUC0yNTYiLCJlbmMiOiJBMjU2R0NNIn0.c2VjcmV0a2V5.aXY.Y2lwaGVydGV4dA.dGFn")
	secret, m = message(t, "evt_jwe", "payout.paid", jwe, "application/jose", at)
	if _, err := send(p, m); err != nil {
		t.Fatal(err)
	}
	e = s.Next(context.Background(), t)
	d = nil
	_ = json.Unmarshal(e.Detail, &d)
	if _, ok := d["event"]; ok {
		t.Errorf("an encrypted body's detail has an event: %s", e.Detail)
	}
	verifies(t, secret, eventbridgetest.Unframe(t, e))
}

// TestFailedEntry: PutEvents answers 200 with FailedEntryCount 1; the
// attempt fails by the entry's ErrorCode, in words that show the code
// and never the ErrorMessage (it names the account's user).
func TestFailedEntry(t *testing.T) {
	s := eventbridgetest.New(t)
	p := open(t, s.Config(""))
	for _, tc := range []struct{ errorCode, code, said string }{
		{"AccessDeniedException", destination.CodeAuthFailed, "EventBridge failed the entry: AccessDeniedException"},
		{"NotAuthorizedForSourceException", destination.CodeAuthFailed, "EventBridge failed the entry: NotAuthorizedForSourceException"},
		{"NotAuthorizedForDetailTypeException", destination.CodeAuthFailed, "EventBridge failed the entry: NotAuthorizedForDetailTypeException"},
		{"ThrottlingException", destination.CodeNotConfirmed, "EventBridge failed the entry: ThrottlingException"},
		{"InternalFailure", destination.CodeNotConfirmed, "EventBridge failed the entry: InternalFailure"},
		{"MalformedDetail", destination.CodeRefused, "EventBridge failed the entry: MalformedDetail"},
		{"InvalidArgument", destination.CodeRefused, "EventBridge failed the entry: InvalidArgument"},
		{"Not a code: see https://evil.example/", destination.CodeRefused, "EventBridge failed the entry"},
	} {
		t.Run(tc.errorCode, func(t *testing.T) {
			s.FailNext(tc.errorCode)
			_, m := message(t, "evt_f", "payout.paid", envelope("evt_f", time.Now(), ""), "application/json", time.Now())
			_, err := send(p, m)
			code, said := destination.Classify(err)
			if code != tc.code || said != tc.said {
				t.Errorf("failed as %s: %s, want %s: %s", code, said, tc.code, tc.said)
			}
			desttest.CheckMerchantWords(t, said)
		})
	}
}

// TestUnknownBus: a bus that does not exist is EventBridge's 400
// ResourceNotFoundException, broker_refused in its code's words.
func TestUnknownBus(t *testing.T) {
	s := eventbridgetest.New(t)
	p := open(t, strings.Replace(s.Config(""), `"event_bus": "webhooks"`, `"event_bus": "nope"`, 1))
	_, m := message(t, "evt_u", "payout.paid", envelope("evt_u", time.Now(), ""), "application/json", time.Now())
	_, err := send(p, m)
	code, said := destination.Classify(err)
	if code != destination.CodeRefused || said != "EventBridge answered HTTP 400 ResourceNotFoundException" {
		t.Errorf("failed as %s: %s", code, said)
	}
}

// TestEntrySizeBound: an entry of exactly 256 KiB as EventBridge counts
// it is sent and taken (the stand-in counts it again from the wire); one
// byte more is broker_refused before anything is sent.
func TestEntrySizeBound(t *testing.T) {
	s := eventbridgetest.New(t)
	p := open(t, s.Config(""))
	pub := p.(*publisher)
	at := time.Now()
	// Each byte of "pad" in the envelope is two of the entry (the body
	// string and the event object); each byte of the x-pad header one.
	build := func(pad, headerPad int) (string, destination.Message) {
		secret, m := message(t, "evt_big", "payout.paid", envelope("evt_big", at, `,"pad":"`+strings.Repeat("a", pad)+`"`), "application/json", at)
		m.Headers["x-pad"] = strings.Repeat("h", headerPad)
		return secret, m
	}
	size := func(m destination.Message) int {
		e, err := pub.entry(m)
		if err != nil {
			var f *destination.Failure
			if errors.As(err, &f) && f.Code == destination.CodeRefused {
				return MaxEntry + 1
			}
			t.Fatal(err)
		}
		return entrySize(e)
	}
	_, small := build(0, 0)
	missing := MaxEntry - size(small)
	secret, exact := build(missing/2, missing%2)
	if n := size(exact); n != MaxEntry {
		t.Fatalf("the exact entry is %d bytes, want %d", n, MaxEntry)
	}
	if _, err := send(p, exact); err != nil {
		code, said := destination.Classify(err)
		t.Fatalf("an entry of exactly 256 KiB: %s: %s", code, said)
	}
	e := s.Next(context.Background(), t)
	if e.Size != MaxEntry {
		t.Errorf("the stand-in counted %d bytes, want %d", e.Size, MaxEntry)
	}
	verifies(t, secret, eventbridgetest.Unframe(t, e))

	_, over := build(missing/2, missing%2+1)
	before := s.Requests()
	_, err := send(p, over)
	code, said := destination.Classify(err)
	if code != destination.CodeRefused || !strings.Contains(said, "an entry is at most 256 KiB") {
		t.Errorf("an entry of 256 KiB and a byte failed as %s: %s", code, said)
	}
	// Send refused before any request: none can be in flight after it
	// returned.
	if n := s.Requests() - before; n != 0 {
		t.Errorf("%d requests reached EventBridge for an entry over the bound", n)
	}
}

// TestRefusedBeforeSending: what EventBridge could not carry unchanged
// is broker_refused in fixed words, and nothing is sent.
func TestRefusedBeforeSending(t *testing.T) {
	s := eventbridgetest.New(t)
	p := open(t, s.Config(""))
	for _, tc := range []struct {
		name  string
		edit  func(*destination.Message)
		words string
	}{
		{"a body that is not UTF-8", func(m *destination.Message) { m.Body = []byte("{\"id\":\"\xff\xfe\"}") }, "the body is not UTF-8 text"},
		{"a header that is not UTF-8", func(m *destination.Message) { m.Headers["x-merchant-header"] = "\xc3\x28" }, "a header is not UTF-8 text"},
		{"an event type over 128 characters", func(m *destination.Message) { m.EventType = strings.Repeat("t", 129) }, "128 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, m := message(t, "evt_r", "payout.paid", envelope("evt_r", time.Now(), ""), "application/json", time.Now())
			tc.edit(&m)
			before := s.Requests()
			_, err := send(p, m)
			code, said := destination.Classify(err)
			if code != destination.CodeRefused || !strings.Contains(said, tc.words) {
				t.Errorf("failed as %s: %s, want %s naming %q", code, said, destination.CodeRefused, tc.words)
			}
			if n := s.Requests() - before; n != 0 {
				t.Errorf("%d requests sent", n)
			}
		})
	}
}

// TestConcurrentSends: one publisher, many goroutines; every event
// arrives once and verifies.
func TestConcurrentSends(t *testing.T) {
	s := eventbridgetest.New(t)
	p := open(t, s.Config(""))
	const n = 24
	secrets := make(map[string]string, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			at := time.Now()
			id := fmt.Sprintf("evt_c%d", i)
			secret, m := message(t, id, "payout.paid", envelope(id, at, ""), "application/json", at)
			mu.Lock()
			secrets[m.Headers["webhook-id"]] = secret
			mu.Unlock()
			if _, err := send(p, m); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for range n {
		got := eventbridgetest.Unframe(t, s.Next(context.Background(), t))
		id := got.Headers["webhook-id"]
		if seen[id] {
			t.Errorf("%s arrived twice", id)
		}
		seen[id] = true
		verifies(t, secrets[id], got)
	}
}

// TestAnswer: what an answer without the entry's result, or with an
// event id unlike EventBridge's, becomes.
func TestAnswer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		out    eventbridge.PutEventsOutput
		code   string
		answer string
	}{
		{"no entries", eventbridge.PutEventsOutput{}, destination.CodeNotConfirmed, ""},
		{"two entries for one", eventbridge.PutEventsOutput{Entries: []types.PutEventsResultEntry{{EventId: aws.String("a")}, {EventId: aws.String("b")}}},
			destination.CodeNotConfirmed, ""},
		{"an entry without an event id", eventbridge.PutEventsOutput{Entries: []types.PutEventsResultEntry{{}}}, destination.CodeNotConfirmed, ""},
		{"a failed count without a code", eventbridge.PutEventsOutput{Entries: []types.PutEventsResultEntry{{}}, FailedEntryCount: 1}, destination.CodeRefused, ""},
		{"an event id that is not one", eventbridge.PutEventsOutput{Entries: []types.PutEventsResultEntry{{EventId: aws.String("see https://evil.example/\n")}}},
			"", "confirmed by EventBridge"},
		{"an event id", eventbridge.PutEventsOutput{Entries: []types.PutEventsResultEntry{{EventId: aws.String("11710aed-b79e-4468-a20b-bb3c0c3b4860")}}},
			"", "confirmed by EventBridge (event id 11710aed-b79e-4468-a20b-bb3c0c3b4860)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := answer(&tc.out)
			if tc.code == "" {
				if err != nil || res.Answer != tc.answer {
					t.Errorf("answer %q, %v; want %q", res.Answer, err, tc.answer)
				}
				return
			}
			code, said := destination.Classify(err)
			if code != tc.code {
				t.Errorf("failed as %s: %s, want %s", code, said, tc.code)
			}
			desttest.CheckMerchantWords(t, said)
		})
	}
}
