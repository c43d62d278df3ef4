package transform_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/transform"
)

// testLimits are the defaults but for time, which the race detector
// slows: the contract tests are no time tests.
var testLimits = transform.Limits{TimePerCall: time.Second}

// sandboxes are shared by the package's tests: compiling the engine takes
// about half a second (seconds with the race detector).
var sandboxes = struct {
	sync.Mutex
	byLimits map[transform.Limits]*transform.Sandbox
}{byLimits: map[transform.Limits]*transform.Sandbox{}}

// testClock is the clock the tests' sandboxes read: Date.now is it.
var testClock = clock.Func(func() time.Time { return time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC) })

func sandbox(t testing.TB, l transform.Limits) *transform.Sandbox {
	t.Helper()
	sandboxes.Lock()
	defer sandboxes.Unlock()
	if s := sandboxes.byLimits[l]; s != nil {
		return s
	}
	s, err := transform.New(context.Background(), transform.Config{Limits: l, CheckURL: checkURL, Clock: testClock})
	if err != nil {
		t.Fatal(err)
	}
	sandboxes.byLimits[l] = s
	return s
}

// checkURL stands for the subscription URL rules: https on two hosts.
func checkURL(u string) error {
	if strings.HasPrefix(u, "https://hooks.example/") || strings.HasPrefix(u, "https://other.example/") {
		return nil
	}
	return invalid.Value("url", "url_invalid", "url must be an https URL of a public host.")
}

// testInput is a payout event as the catalogue has it, shortened.
var testInput = transform.Input{
	EventType: "payout.paid",
	Payload:   json.RawMessage(`{"id":"3f1c9a52","amount":"1250.00","currency":"EUR","metadata":{"order_id":"A-1009"}}`),
	URL:       "https://hooks.example/in",
	Headers:   map[string]string{"X-Tenant": "t1"},
}

// run compiles code and runs it on in.
func run(t testing.TB, s *transform.Sandbox, code string, in transform.Input) (transform.Output, error) {
	t.Helper()
	p, err := s.Compile(context.Background(), code)
	if err != nil {
		return transform.Output{}, err
	}
	return s.Run(context.Background(), p, in)
}

// asError is err as a *transform.Error, failing the test otherwise.
func asError(t testing.TB, err error) *transform.Error {
	t.Helper()
	var te *transform.Error
	if !errors.As(err, &te) {
		t.Fatalf("error %v (%T) is no *transform.Error", err, err)
	}
	return te
}

func TestHandlerContract(t *testing.T) {
	s := sandbox(t, testLimits)
	noURL := testInput
	noURL.URL = ""
	tooMany := "for (let i = 0; i < 21; i++) w.headers['X-H' + i] = 'v'; return w"
	cases := []struct {
		name string
		code string // the body of handler(w)
		in   *transform.Input
		want func(transform.Output) bool // when it succeeds
		kind transform.Kind              // when it fails
		text string                      // in the error's message
	}{
		{name: "returned unchanged", code: "return w", want: func(o transform.Output) bool {
			return string(o.Payload) == string(testInput.Payload) && o.URL == testInput.URL &&
				maps.Equal(o.Headers, testInput.Headers) && !o.Cancel
		}},
		{name: "payload an object", code: "w.payload = {text: w.event_type + ' ' + w.payload.amount}; return w",
			want: payloadIs(`{"text":"payout.paid 1250.00"}`)},
		{name: "payload an array", code: "w.payload = [1, 'a', null]; return w", want: payloadIs(`[1,"a",null]`)},
		{name: "payload a string", code: "w.payload = 'hi'; return w", want: payloadIs(`"hi"`)},
		{name: "payload a number", code: "w.payload = 4.5; return w", want: payloadIs(`4.5`)},
		{name: "payload null", code: "w.payload = null; return w", want: payloadIs(`null`)},
		{name: "a new object", code: "return {payload: {a: 1}}", want: func(o transform.Output) bool {
			return string(o.Payload) == `{"a":1}` && o.URL == testInput.URL && maps.Equal(o.Headers, testInput.Headers)
		}},
		{name: "url changed", code: "w.url = 'https://other.example/eu'; return w",
			want: func(o transform.Output) bool { return o.URL == "https://other.example/eu" }},
		{name: "url refused by the subscription rules", code: "w.url = 'http://169.254.169.254/'; return w",
			kind: transform.KindURL, text: "url must be an https URL of a public host."},
		{name: "url set where the destination has none", code: "w.url = 'https://hooks.example/x'; return w", in: &noURL,
			kind: transform.KindURL, text: "no url"},
		{name: "url not a string", code: "w.url = 3; return w", kind: transform.KindURL, text: "a number"},
		{name: "headers added, changed, removed", code: "w.headers = {'X-Account': 'a1', 'Authorization': 'Bearer x'}; return w",
			want: func(o transform.Output) bool {
				return maps.Equal(o.Headers, map[string]string{"X-Account": "a1", "Authorization": "Bearer x"})
			}},
		{name: "header webhook-id", code: "w.headers['webhook-id'] = 'x'; return w", kind: transform.KindHeaders, text: "cannot be set"},
		{name: "header Webhook-Signature", code: "w.headers['Webhook-Signature'] = 'v1,x'; return w", kind: transform.KindHeaders},
		{name: "header Host", code: "w.headers.Host = 'evil.example'; return w", kind: transform.KindHeaders},
		{name: "header Content-Length", code: "w.headers['Content-Length'] = '0'; return w", kind: transform.KindHeaders},
		{name: "header Connection", code: "w.headers.Connection = 'close'; return w", kind: transform.KindHeaders},
		{name: "header Keep-Alive", code: "w.headers['Keep-Alive'] = '1'; return w", kind: transform.KindHeaders},
		{name: "header Proxy-Authorization", code: "w.headers['Proxy-Authorization'] = 'x'; return w", kind: transform.KindHeaders},
		{name: "header TE", code: "w.headers.TE = 'trailers'; return w", kind: transform.KindHeaders},
		{name: "header Trailer", code: "w.headers.Trailer = 'X'; return w", kind: transform.KindHeaders},
		{name: "header Transfer-Encoding", code: "w.headers['Transfer-Encoding'] = 'chunked'; return w", kind: transform.KindHeaders},
		{name: "header Upgrade", code: "w.headers.Upgrade = 'h2c'; return w", kind: transform.KindHeaders},
		{name: "header value splitting the request", code: "w.headers['X-A'] = 'a\\r\\nHost: b'; return w", kind: transform.KindHeaders},
		{name: "header value not a string", code: "w.headers['X-A'] = 1; return w", kind: transform.KindHeaders, text: "must be a string"},
		{name: "header value too long", code: "w.headers['X-A'] = 'a'.repeat(4097); return w", kind: transform.KindHeaders},
		{name: "too many headers", code: tooMany, kind: transform.KindHeaders, text: "at most 20"},
		{name: "headers not an object", code: "w.headers = 'x'; return w", kind: transform.KindHeaders},
		{name: "cancel", code: "w.cancel = w.payload.amount === '1250.00'; return w",
			want: func(o transform.Output) bool { return o.Cancel }},
		{name: "cancel not a boolean", code: "w.cancel = 'yes'; return w", kind: transform.KindShape, text: "true or false"},
		{name: "event_type changed", code: "w.event_type = 'payout.failed'; return w", kind: transform.KindShape, text: "event_type"},
		{name: "a field of its own", code: "w.body = 1; return w", kind: transform.KindShape, text: `"body"`},
		{name: "no payload", code: "delete w.payload; return w", kind: transform.KindShape, text: "no payload"},
		{name: "undefined payload", code: "w.payload = undefined; return w", kind: transform.KindShape, text: "no payload"},
		{name: "nothing returned", code: "w.payload = 1", kind: transform.KindShape, text: "undefined"},
		{name: "a string returned", code: "return 'ok'", kind: transform.KindShape, text: "a string"},
		{name: "null returned", code: "return null", kind: transform.KindShape, text: "null"},
		{name: "an array returned", code: "return [w]", kind: transform.KindShape, text: "an array"},
		{name: "a promise returned", code: "return Promise.resolve(w)", kind: transform.KindShape},
		{name: "a throw", code: "\n  throw new Error('no amount')", kind: transform.KindThrown, text: "Error: no amount"},
		{name: "a thrown string", code: "throw 'oops'", kind: transform.KindThrown, text: "oops"},
		{name: "a TypeError", code: "return w.payload.nope.x", kind: transform.KindThrown, text: "TypeError"},
		{name: "a BigInt", code: "w.payload = 1n; return w", kind: transform.KindThrown, text: "BigInt"},
		{name: "a cycle", code: "w.payload = {}; w.payload.self = w.payload; return w", kind: transform.KindThrown, text: "circular"},
		{name: "its own toJSON", code: "w.payload = {toJSON() { return 'mine' }}; return w", want: payloadIs(`"mine"`)},
		{name: "payload over MaxOutputBytes", code: "w.payload = 'a'.repeat(300000); return w", kind: transform.KindOutputTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := testInput
			if c.in != nil {
				in = *c.in
			}
			out, err := run(t, s, "function handler(w) {"+c.code+"\n}", in)
			if c.want != nil {
				if err != nil {
					t.Fatalf("failed: %v", err)
				}
				if !c.want(out) {
					t.Fatalf("output %+v (payload %s)", out, out.Payload)
				}
				return
			}
			te := asError(t, err)
			if te.Kind != c.kind || !strings.Contains(te.Message, c.text) {
				t.Fatalf("error %#v, want kind %s with %q", te, c.kind, c.text)
			}
		})
	}
}

func payloadIs(want string) func(transform.Output) bool {
	return func(o transform.Output) bool { return string(o.Payload) == want }
}

// TestHandlerDeclared: handler may be a function declaration or a const
// or let binding of the top level; anything else is no handler.
func TestHandlerDeclared(t *testing.T) {
	s := sandbox(t, testLimits)
	for _, c := range []struct {
		code string
		ok   bool
	}{
		{"function handler(w) { return w }", true},
		{"const handler = (w) => w", true},
		{"let handler = function (w) { return w }", true},
		{"var handler = (w) => w", true},
		{"globalThis.handler = (w) => w", true},
		{"const handler = 3", false},
		{"function handle(w) { return w }", false},
		{"", false},
	} {
		_, err := run(t, s, c.code, testInput)
		if c.ok != (err == nil) {
			t.Errorf("%q: error %v", c.code, err)
		}
		if err != nil && asError(t, err).Kind != transform.KindNoHandler {
			t.Errorf("%q: kind %s", c.code, asError(t, err).Kind)
		}
	}
}

// TestErrorsLocated: a syntax error or a throw names its line and column
// in the merchant's code, not in webhookd's.
func TestErrorsLocated(t *testing.T) {
	s := sandbox(t, testLimits)
	for _, c := range []struct {
		name         string
		code         string
		kind         transform.Kind
		line, column int
	}{
		{"syntax", "function handler(w) {\n  return w.\n}", transform.KindSyntax, 3, 1},
		{"throw in handler", "function handler(w) {\n  const a = 1;\n  return w.payload.x.y;\n}", transform.KindThrown, 3, 21},
		{"throw in a function it calls", "function f(p) { return p.x.y }\nfunction handler(w) {\n  return f(w.payload)\n}", transform.KindThrown, 1, 27},
		{"throw at the top level", "const x = null;\nx.y;\nfunction handler(w) { return w }", transform.KindThrown, 2, 2},
		{"a builtin's throw", "function handler(w) {\n  return JSON.parse('{')\n}", transform.KindThrown, 2, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := run(t, s, c.code, testInput)
			te := asError(t, err)
			if te.Kind != c.kind || te.Line != c.line || te.Column != c.column {
				t.Fatalf("error %#v, want %s at %d:%d", te, c.kind, c.line, c.column)
			}
			if want := fmt.Sprintf("line %d, column %d: ", c.line, c.column); !strings.HasPrefix(te.Error(), want) {
				t.Fatalf("text %q", te.Error())
			}
		})
	}
}

// TestCompileRules: the code's size and text are checked before it runs.
func TestCompileRules(t *testing.T) {
	s := sandbox(t, testLimits)
	big := "function handler(w) { return w }\n//" + strings.Repeat("x", transform.DefaultMaxCodeBytes)
	for _, c := range []struct {
		name, code string
		kind       transform.Kind
	}{
		{"over 64 KiB", big, transform.KindCodeTooLarge},
		{"not UTF-8", "function handler(w) { return w } // \xff", transform.KindCodeTooLarge},
		{"a module import", "import x from 'os'\nfunction handler(w) { return w }", transform.KindSyntax},
		{"a top level that never ends", "for (;;) {}\nfunction handler(w) { return w }", transform.KindTimeLimit},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.Compile(context.Background(), c.code)
			if te := asError(t, err); te.Kind != c.kind {
				t.Fatalf("error %#v, want %s", te, c.kind)
			}
		})
	}
}

// TestDateReadsTheClock: Date.now is the sandbox's clock; Math.random is
// there.
func TestDateReadsTheClock(t *testing.T) {
	out, err := run(t, sandbox(t, testLimits),
		"function handler(w) { const r = Math.random(); w.payload = [Date.now(), new Date().toISOString(), r >= 0 && r < 1]; return w }", testInput)
	if err != nil {
		t.Fatal(err)
	}
	want := `[1795600800000,"2026-11-25T10:00:00.000Z",true]`
	if string(out.Payload) != want {
		t.Fatalf("payload %s, want %s", out.Payload, want)
	}
}

// TestCallerCancels: a call whose context ends fails with webhookd's error,
// not the merchant's.
func TestCallerCancels(t *testing.T) {
	s := sandbox(t, testLimits)
	p, err := s.Compile(context.Background(), "function handler(w) { for (;;) {} }")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = s.Run(ctx, p, testInput)
	var te *transform.Error
	if err == nil || errors.As(err, &te) || !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v", err)
	}
}

func jsonValid(s string) bool { return json.Valid([]byte(s)) }
