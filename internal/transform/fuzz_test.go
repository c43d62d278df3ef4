package transform_test

import (
	"errors"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/transform"
)

// fuzzLimits are tight, so that each input is quick.
var fuzzLimits = transform.Limits{TimePerCall: 20 * time.Millisecond, MemoryPerCall: 4 << 20, MaxCodeBytes: 4096, MaxOutputBytes: 4096}

// FuzzCompileRun: whatever the code, Compile and Run never panic, fail
// only with an *Error, and what succeeds keeps to the limits and rules.
func FuzzCompileRun(f *testing.F) {
	f.Add("function handler(w) { return w }", `{"a":1}`)
	f.Add("function handler(w) { w.payload = [w.payload, Date.now()]; return w }", `"x"`)
	f.Add("function handler(w) { for (;;) {} }", `null`)
	f.Add("function handler(w) { w.headers.Host = 'x'; return w }", `{}`)
	f.Add("const handler = w => ({payload: 'x'.repeat(1e6)})", `1`)
	f.Add("function handler(w) { return handler(w) }", `[[[]]]`)
	f.Add("function handler(w) {", `{}`)
	f.Add(transform.TemplateFlatForm, `{"a":{"b":[1,2,{"c":null}]}}`)
	f.Fuzz(func(t *testing.T, code, payload string) {
		s := sandbox(t, fuzzLimits)
		in := transform.Input{EventType: "payout.paid", URL: "https://hooks.example/in", Payload: []byte(payload)}
		if !jsonValid(payload) {
			in.Payload = nil
		}
		started := time.Now()
		out, err := run(t, s, code, in)
		var te *transform.Error
		switch {
		case err != nil && !errors.As(err, &te):
			t.Fatalf("not an *Error: %v", err)
		case err != nil:
			if te.Message == "" {
				t.Fatal("an error without a message")
			}
		case len(out.Payload) > fuzzLimits.MaxOutputBytes || !jsonValid(string(out.Payload)):
			t.Fatalf("payload %q", out.Payload)
		case out.URL != in.URL && checkURL(out.URL) != nil:
			t.Fatalf("url %q", out.URL)
		}
		// Two calls (compile and run), each bounded by its CPU time; the
		// wall time allows for a loaded machine and the race detector.
		if took := time.Since(started); took > 2*20*fuzzLimits.TimePerCall {
			t.Fatalf("took %v", took)
		}
	})
}
