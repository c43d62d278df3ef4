// Package desttest is the conformance suite every destination kind runs,
// in the spirit of receivertest: a kind that passes it is done. A kind's
// test gives Run a Case, the kind and a real server to deliver to (the
// machine's RabbitMQ, NATS or Mosquitto, or one in process), and the
// suite checks what every kind promises:
//
//   - a message arrives whole and its signature verifies with package
//     receiver, from what arrived (body and headers);
//   - a target that is down fails as broker_unreachable in words that
//     name no address of this server, and a message sent once it is back
//     arrives (the engine's retry is the same Send again);
//   - wrong credentials fail as auth_failed;
//   - the deliveries of one ordering key arrive in order, where the kind
//     keeps order;
//   - hostile values are refused at Parse naming their field, never
//     quoting the value;
//   - a read's summary masks every secret field;
//   - every field Parse accepts is in the kind's Metadata, and the stored
//     form reads back to the same summary;
//   - a closed publisher sends nothing.
//
// A built-in kind (the HTTP endpoint, the listener, poll) runs it too:
// its case opens its publisher itself (Case.Open) since its settings are
// the subscription's, names its own error codes (Case.Codes), and says
// of each check it has no notion of why (Case.NotApplicable), which the
// run reports as a skip with that reason.
package desttest

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/receiver"
	"github.com/webhookd/webhookd/signer"
)

// Arrived is a message as the target holds it: what a consumer reads.
type Arrived struct {
	// Body is the message's body.
	Body []byte
	// Headers are its headers, properties or attributes, names in
	// lowercase.
	Headers map[string]string
	// Key is the partition, group or routing key it came with, "" when
	// the kind has none.
	Key string
}

// Hostile is a value a merchant may send that the kind must refuse.
type Hostile struct {
	// Name says what it tries ("a query smuggling a file path").
	Name string
	// Config is the whole destination object, type included.
	Config string
	// Field is the field the refusal must name ("destination.url").
	Field string
	// Secret is a part of the value that must not be quoted in the
	// refusal ("/etc/passwd"); "" to skip that check.
	Secret string
}

// Case is one kind's conformance run.
type Case struct {
	// Kind is the kind under test.
	Kind destination.Kind
	// Config is a destination object (type included) of the kind that
	// reaches the test's server and is read by Receive.
	Config string
	// Receive waits for the next message at the target Config names and
	// returns it; it fails t when none arrives before ctx ends.
	Receive func(ctx context.Context, t testing.TB) Arrived
	// WrongCredentials is Config with credentials the server refuses;
	// "" for a kind whose test server checks none (say why in the
	// kind's test).
	WrongCredentials string
	// Down makes the target unreachable and returns what brings it back;
	// nil to use Unreachable instead.
	Down func(t testing.TB) (up func())
	// Unreachable is a destination object naming a target where nothing
	// listens, used when Down is nil.
	Unreachable string
	// Hostile are values of the kind's own fields that it must refuse,
	// beside those the suite tries on every kind.
	Hostile []Hostile
	// Oversized, for a kind that speaks HTTP, is a destination object
	// whose endpoint is url, a server answering every request with an
	// endless body: the send must fail as response_too_large once
	// MaxServiceAnswer is read. nil for a kind whose protocol bounds its
	// own frames (say which bound in the kind's test).
	Oversized func(url string) string
	// Env replaces the default Env (a plain dialer, 5 s, the real clock).
	Env *destination.Env

	// Open, for a built-in kind (Metadata.Builtin: the HTTP endpoint,
	// the listener, poll), opens the publisher of config, one of the
	// case's own strings (Config, WrongCredentials, Unreachable) which
	// it reads as it likes (an endpoint's URL, its credentials): a
	// built-in kind's settings are the subscription's, not a destination
	// object. nil: the registry opens the parsed destination object.
	Open func(t testing.TB, config string) destination.Publisher
	// Codes are the attempt error codes the kind fails with, where they
	// are not the brokers' (an HTTP endpoint's connection_refused,
	// oauth_token); a nil list keeps the suite's.
	Codes Codes
	// Fetched, for a kind the engine never sends to (poll), replaces
	// sending: it makes a delivery available the way the engine does and
	// returns what the merchant fetches of it, with the subscription's
	// signing secret. The suite verifies it with package receiver.
	Fetched func(t testing.TB) (secret string, got Arrived)
	// NotApplicable names the suite's checks (by their subtest name)
	// that the kind has no notion of, each with the reason, which the
	// run reports: no check is left out in silence.
	NotApplicable map[string]string
}

// Codes are the error codes a kind's failures take.
type Codes struct {
	// Unreachable: a target that is down (default broker_unreachable or
	// not_confirmed).
	Unreachable []string
	// Auth: wrong credentials (default auth_failed).
	Auth []string
}

// failed is the code and the merchant's words of a send's failure: its
// error's (Classify) or, from a built-in kind, its Result's; ok when it
// succeeded.
func failed(res destination.Result, err error) (code, said string, ok bool) {
	switch {
	case err != nil:
		code, said = destination.Classify(err)
		return code, said, false
	case res.Code != nil && res.Answer == "":
		// No answer: the code is all the merchant reads (an HTTP
		// endpoint's connection_refused).
		return *res.Code, *res.Code, false
	case res.Code != nil:
		return *res.Code, res.Answer, false
	}
	return "", "", true
}

// builtinReason is why the checks of a destination object do not apply
// to a built-in kind.
const builtinReason = "a built-in kind has no destination object: its settings are the subscription's (a url and its authentication, " +
	"a listener, a poll line), read by internal/subscriptions' rules and tested there"

// Run runs the suite.
func Run(t *testing.T, c Case) {
	t.Helper()
	env := defaultEnv()
	if c.Env != nil {
		env = *c.Env
	}
	md := c.Kind.Metadata()
	registry, err := destination.NewRegistry(c.Kind)
	if md.Builtin {
		registry, err = destination.NewRegistry()
		if err == nil {
			registry, err = registry.WithBuiltin(c.Kind)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	notApplicable := func(t *testing.T, name string) bool {
		t.Helper()
		if why, ok := c.NotApplicable[name]; ok {
			t.Skipf("not applicable to %s: %s", md.Type, why)
			return true
		}
		if md.Builtin && c.Open == nil && c.Fetched == nil {
			t.Fatal("a built-in kind's case gives Open or Fetched")
		}
		return false
	}
	unreachableCodes := []string{destination.CodeUnreachable, destination.CodeNotConfirmed}
	if c.Codes.Unreachable != nil {
		unreachableCodes = c.Codes.Unreachable
	}
	authCodes := []string{destination.CodeAuthFailed}
	if c.Codes.Auth != nil {
		authCodes = c.Codes.Auth
	}
	parse := func(t *testing.T, raw string) destination.Config {
		t.Helper()
		_, cfg, err := registry.Parse("destination", json.RawMessage(raw))
		if err != nil {
			t.Fatalf("parse %s destination: %v", md.Type, err)
		}
		return cfg
	}
	open := func(t *testing.T, raw string) destination.Publisher {
		t.Helper()
		if c.Open != nil {
			return c.Open(t, raw)
		}
		p, err := registry.Open(md.Type, parse(t, raw), env)
		if err != nil {
			t.Fatalf("open %s destination: %v", md.Type, err)
		}
		t.Cleanup(func() { _ = p.Close() })
		return p
	}

	objectChecks := func(t *testing.T, name string) bool {
		t.Helper()
		if notApplicable(t, name) {
			return true
		}
		if md.Builtin {
			t.Skipf("not applicable to %s: %s", md.Type, builtinReason)
			return true
		}
		return false
	}
	t.Run("metadata", func(t *testing.T) {
		if md.Builtin {
			checkBuiltinMetadata(t, md)
			return
		}
		checkMetadata(t, md, parse(t, c.Config))
	})
	t.Run("stored form reads back", func(t *testing.T) {
		if objectChecks(t, "stored form reads back") {
			return
		}
		cfg := parse(t, c.Config)
		stored, err := destination.Encode(md.Type, cfg)
		if err != nil {
			t.Fatal(err)
		}
		again := parse(t, string(stored))
		a, _ := json.Marshal(cfg.Summary())
		b, _ := json.Marshal(again.Summary())
		if string(a) != string(b) {
			t.Errorf("summary of the stored form %s, want %s", b, a)
		}
	})
	t.Run("summary masks secrets", func(t *testing.T) {
		if objectChecks(t, "summary masks secrets") {
			return
		}
		checkMasked(t, md, c.Config, parse(t, c.Config))
	})
	t.Run("hostile values refused", func(t *testing.T) {
		if objectChecks(t, "hostile values refused") {
			return
		}
		checkHostile(t, registry, md, c)
	})

	t.Run("delivers a verifiable message", func(t *testing.T) {
		if notApplicable(t, "delivers a verifiable message") {
			return
		}
		if c.Fetched != nil {
			secret, got := c.Fetched(t)
			verifySigned(t, secret, got)
			return
		}
		p := open(t, c.Config)
		secret, m := signedMessage(t, "evt_conformance_1", "", env.Clock.Now())
		sendOK(t, p, m)
		got := receive(t, c)
		verify(t, secret, m, got)
	})
	t.Run("target down, then back", func(t *testing.T) {
		if notApplicable(t, "target down, then back") {
			return
		}
		if c.Down != nil {
			p := open(t, c.Config)
			up := c.Down(t)
			_, m := signedMessage(t, "evt_conformance_down", "", env.Clock.Now())
			sendFails(t, p, m, unreachableCodes...)
			up()
			secret, m := signedMessage(t, "evt_conformance_back", "", env.Clock.Now())
			eventuallySent(t, p, m)
			verify(t, secret, m, receiveFor(t, c, m))
			return
		}
		if c.Unreachable == "" {
			t.Fatal("the case gives neither Down nor Unreachable")
		}
		p := open(t, c.Unreachable)
		_, m := signedMessage(t, "evt_conformance_down", "", env.Clock.Now())
		sendFails(t, p, m, unreachableCodes[0])
	})
	t.Run("wrong credentials", func(t *testing.T) {
		if notApplicable(t, "wrong credentials") {
			return
		}
		if c.WrongCredentials == "" {
			t.Skip("the kind's test server checks no credentials (see the kind's test)")
		}
		p := open(t, c.WrongCredentials)
		_, m := signedMessage(t, "evt_conformance_creds", "", env.Clock.Now())
		sendFails(t, p, m, authCodes...)
	})
	t.Run("ordered", func(t *testing.T) {
		if notApplicable(t, "ordered") {
			return
		}
		if !md.Ordered {
			t.Skip("the kind does not keep order (Metadata.Ordered)")
		}
		p := open(t, c.Config)
		const n = 5
		var sent []string
		for i := range n {
			_, m := signedMessage(t, "evt_conformance_ordered_"+strconv.Itoa(i), "payout_42", env.Clock.Now())
			sendOK(t, p, m)
			sent = append(sent, m.Headers["webhook-id"])
		}
		for i := range n {
			got := receive(t, c)
			if id := got.Headers["webhook-id"]; id != sent[i] {
				t.Fatalf("message %d of the ordering key is %s, want %s", i, id, sent[i])
			}
		}
	})
	t.Run("answer past the read bound", func(t *testing.T) {
		if notApplicable(t, "answer past the read bound") {
			return
		}
		if c.Oversized == nil {
			t.Skip("the kind's protocol bounds its own frames (see the kind's test)")
		}
		srv := endlessServer(t)
		p := open(t, c.Oversized(srv.URL))
		_, m := signedMessage(t, "evt_conformance_large", "", env.Clock.Now())
		sendFails(t, p, m, destination.CodeTooLarge)
		if n := srv.written.Load(); n > 4*destination.MaxServiceAnswer+16<<20 {
			t.Errorf("the server wrote %d bytes before the client stopped reading", n)
		}
	})
	t.Run("closed publisher sends nothing", func(t *testing.T) {
		if notApplicable(t, "closed publisher sends nothing") {
			return
		}
		p, err := registry.Open(md.Type, parse(t, c.Config), env)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		_, m := signedMessage(t, "evt_conformance_closed", "", env.Clock.Now())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, _, ok := failed(p.Send(ctx, m)); ok {
			t.Fatal("a closed publisher sent a message")
		}
	})
}

// endless is an HTTP server whose every answer is an endless body.
type endless struct {
	URL     string
	written atomic.Int64
}

func endlessServer(t testing.TB) *endless {
	e := &endless{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		chunk := []byte(strings.Repeat("{", 64<<10))
		for range 1024 { // 64 MiB at most
			n, err := w.Write(chunk)
			e.written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	e.URL = srv.URL
	return e
}

func defaultEnv() destination.Env {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return destination.Env{Dial: d.DialContext, Timeout: 5 * time.Second, Clock: clock.Or(nil), Version: "conformance"}
}

// signedMessage is a message signed as the engine signs an attempt, with
// a fresh secret.
func signedMessage(t testing.TB, eventID, orderingKey string, now time.Time) (string, destination.Message) {
	t.Helper()
	secret, err := signer.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	key, err := signer.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"id": eventID, "type": "payout.paid", "created_at": now.UTC().Format(time.RFC3339),
		"data": map[string]any{"object": map[string]any{"id": "po_1", "amount": 1250, "currency": "EUR"}}})
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "webhookd/conformance")
	h.Set("X-Merchant-Header", "kept")
	signer.SetHeaders(h, eventID, now, body, key)
	headers := map[string]string{}
	for name := range h {
		headers[strings.ToLower(name)] = h.Get(name)
	}
	return secret, destination.Message{DeliveryID: "dlv_" + eventID, EventID: eventID, EventType: "payout.paid", Body: body,
		ContentType: "application/json", Headers: headers, OrderingKey: orderingKey, SignedAt: now, Size: 1,
		Header: h, Custom: map[string]string{"X-Merchant-Header": "kept"}}
}

func sendOK(t testing.TB, p destination.Publisher, m destination.Message) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if code, said, ok := failed(p.Send(ctx, m)); !ok {
		t.Fatalf("send: %s: %s", code, said)
	}
}

// eventuallySent sends m until it is taken: the engine's retries, made
// at once.
func eventuallySent(t testing.TB, p destination.Publisher, m destination.Message) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		code, said, ok := failed(p.Send(ctx, m))
		cancel()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the target came back but a send still fails after 30 s: %s: %s", code, said)
		}
		time.Sleep(200 * time.Millisecond) // kept: the pace of the retries
	}
}

// sendFails sends m and checks that it fails with one of codes, in words
// that name nothing of this server (no address, port or path).
func sendFails(t testing.TB, p destination.Publisher, m destination.Message, codes ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := p.Send(ctx, m)
	code, said, sent := failed(res, err)
	if sent {
		t.Fatalf("send succeeded, want one of %v", codes)
	}
	ok := false
	for _, c := range codes {
		ok = ok || c == code
	}
	if !ok {
		t.Errorf("send failed as %s (%s; %v), want one of %v", code, said, err, codes)
	}
	CheckMerchantWords(t, said)
}

// CheckMerchantWords fails t when what a merchant reads of a failure
// names an internal detail: an IP address, a port, a file path, a Go
// error's wording of the network.
func CheckMerchantWords(t testing.TB, said string) {
	t.Helper()
	for _, leak := range []string{"127.0.0.1", "::1", "localhost", "dial tcp", "/etc/", "/tmp/", "/proc/", "lookup ", "read tcp", "write tcp", ".go:"} {
		if strings.Contains(said, leak) {
			t.Errorf("the merchant's words %q name an internal detail (%q)", said, leak)
		}
	}
	if said == "" {
		t.Error("the merchant's words are empty")
	}
}

func receive(t testing.TB, c Case) Arrived {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return c.Receive(ctx, t)
}

// receiveFor receives until m arrives (a message sent while the target
// was down may arrive too, since the target may have taken it before
// the failure was seen).
func receiveFor(t testing.TB, c Case, m destination.Message) Arrived {
	t.Helper()
	for range 10 {
		got := receive(t, c)
		if got.Headers["webhook-id"] == m.Headers["webhook-id"] {
			return got
		}
	}
	t.Fatalf("message %s never arrived", m.Headers["webhook-id"])
	return Arrived{}
}

// verify checks with package receiver that what arrived is m, signed.
func verify(t testing.TB, secret string, m destination.Message, got Arrived) {
	t.Helper()
	if string(got.Body) != string(m.Body) {
		t.Fatalf("body arrived as %q, want %q", got.Body, m.Body)
	}
	verifySigned(t, secret, got)
	if got.Headers["x-merchant-header"] != "kept" {
		t.Errorf("the subscription's own header arrived as %q, want %q", got.Headers["x-merchant-header"], "kept")
	}
}

// verifySigned checks with package receiver that got is signed with
// secret.
func verifySigned(t testing.TB, secret string, got Arrived) {
	t.Helper()
	v, err := receiver.NewVerifier(receiver.VerifierConfig{Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.VerifyValues(got.Headers["webhook-id"], got.Headers["webhook-timestamp"], got.Headers["webhook-signature"], got.Body); err != nil {
		t.Fatalf("the message that arrived does not verify: %v (headers %v)", err, got.Headers)
	}
}

// checkBuiltinMetadata: a built-in kind's type and labels, and no field
// (its settings are the subscription's).
func checkBuiltinMetadata(t *testing.T, md destination.Metadata) {
	if md.Type == "" || md.Label == "" || md.Short == "" || md.Delivers == "" || len(md.Fields) != 0 {
		t.Errorf("metadata %+v lacks its type, label, short label or what a delivery becomes, or lists fields", md)
	}
}

// checkMetadata: a type, labels, and every field of the stored form
// listed.
func checkMetadata(t *testing.T, md destination.Metadata, cfg destination.Config) {
	if md.Type == "" || md.Label == "" || md.Short == "" || md.Delivers == "" {
		t.Errorf("metadata %+v lacks its type, label, short label or what a delivery becomes", md)
	}
	plain, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(plain, &fields); err != nil {
		t.Fatal(err)
	}
	for name := range fields {
		if !hasField(md.Fields, name) {
			t.Errorf("the stored form has field %q that Metadata does not list", name)
		}
	}
	for _, f := range md.Fields {
		if f.Label == "" || f.Type == "" {
			t.Errorf("field %q has no label or type", f.Name)
		}
	}
}

func hasField(fields []destination.Field, name string) bool {
	for _, f := range fields {
		if f.Name == name {
			return true
		}
	}
	return false
}

// checkMasked: no value of a secret field appears in the summary, nor in
// the target or the config's printed form.
func checkMasked(t *testing.T, md destination.Metadata, raw string, cfg destination.Config) {
	var fields map[string]any
	if err := json.Unmarshal([]byte(raw), &fields); err != nil {
		t.Fatal(err)
	}
	summary, _ := json.Marshal(cfg.Summary())
	for _, secret := range secretValues(md.Fields, fields) {
		if secret == "" {
			continue
		}
		for what, text := range map[string]string{"summary": string(summary), "target": cfg.Target()} {
			if strings.Contains(text, secret) {
				t.Errorf("the %s shows a secret field's value", what)
			}
		}
	}
}

func secretValues(fields []destination.Field, values map[string]any) []string {
	var out []string
	for _, f := range fields {
		v, ok := values[f.Name]
		if !ok {
			continue
		}
		switch {
		case f.Secret:
			if s, ok := v.(string); ok {
				out = append(out, secretPart(s))
			}
		case f.Type == destination.FieldObject:
			if m, ok := v.(map[string]any); ok {
				out = append(out, secretValues(f.Fields, m)...)
			}
		}
	}
	return out
}

// secretPart is what of a secret field must not show: a URL's password,
// else the whole value.
func secretPart(s string) string {
	if i := strings.Index(s, "://"); i >= 0 {
		if at := strings.LastIndex(s, "@"); at > i {
			if colon := strings.Index(s[i+3:at], ":"); colon >= 0 {
				return s[i+3+colon+1 : at]
			}
			return ""
		}
	}
	return s
}

// commonHostile are values every kind refuses.
var commonHostile = []Hostile{
	{Name: "an unknown field", Config: `{"type": "%s", "cacertfile": "/etc/passwd"}`, Field: "destination.cacertfile", Secret: "/etc/passwd"},
	{Name: "not an object", Config: `["%s"]`, Field: "destination"},
}

func checkHostile(t *testing.T, registry *destination.Registry, md destination.Metadata, c Case) {
	rows := append([]Hostile{}, c.Hostile...)
	for _, h := range commonHostile {
		h.Config = strings.Replace(h.Config, "%s", md.Type, 1)
		rows = append(rows, h)
	}
	for _, h := range rows {
		t.Run(h.Name, func(t *testing.T) {
			_, _, err := registry.Parse("destination", json.RawMessage(h.Config))
			var bad *invalid.Error
			if !errors.As(err, &bad) {
				t.Fatalf("parse: %v, want an *invalid.Error naming %s", err, h.Field)
			}
			if bad.Param != h.Field {
				t.Errorf("refusal names %s (%s), want %s", bad.Param, bad.Message, h.Field)
			}
			if h.Secret != "" && strings.Contains(bad.Message, h.Secret) {
				t.Errorf("refusal %q quotes the value", bad.Message)
			}
		})
	}
}
