package transform_test

import (
	"bufio"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/transform"
)

// hostileLimits are the defaults but for a longer CPU time, so that the
// allocation bombs reach the memory bound first even with the race
// detector on a loaded machine.
var hostileLimits = transform.Limits{TimePerCall: 500 * time.Millisecond}

// The stated bounds of one hostile call (docs/transformations.md,
// "Limits"): the Go heap it allocates (wazero's own stack, up to 8 MiB at
// the recursion bound, and copies of the input and output), and the
// growth of the process's peak resident memory (the instance's memory,
// which is MemoryPerCall at most, and the Go heap).
const (
	maxGoAllocated = 16 << 20
	maxPeakGrowth  = transform.DefaultMemoryPerCall + 24<<20
)

func TestHostileScripts(t *testing.T) {
	s := sandbox(t, hostileLimits)
	cases := []struct {
		name  string
		code  string
		kinds []transform.Kind // any of them
		text  string
	}{
		{name: "an endless loop", code: "for (;;) {}", kinds: kinds(transform.KindTimeLimit)},
		{name: "an endless loop at the top level", code: "}\nwhile (true) {}\n{", kinds: kinds(transform.KindTimeLimit)},
		{name: "a loop in a builtin", code: "return Array.prototype.indexOf.call({length: 2 ** 53 - 1}, 1)",
			kinds: kinds(transform.KindTimeLimit)},
		{name: "a regular expression that backtracks", code: "return /(a+)+$/.test('a'.repeat(40) + 'b')",
			kinds: kinds(transform.KindTimeLimit)},
		{name: "eval of an endless loop", code: "eval('for (;;) {}')", kinds: kinds(transform.KindTimeLimit)},
		{name: "'x'.repeat(2**30)", code: "return {payload: 'x'.repeat(2 ** 30)}",
			kinds: kinds(transform.KindThrown, transform.KindMemoryLimit)},
		{name: "'x'.repeat(2**27)", code: "return {payload: 'x'.repeat(2 ** 27)}", kinds: kinds(transform.KindMemoryLimit)},
		{name: "a string doubling", code: "let s = 'x'; for (;;) s += s", kinds: kinds(transform.KindMemoryLimit, transform.KindThrown)},
		{name: "an array growing", code: "const a = []; for (;;) a.push({n: a.length})",
			// QuickJS may fail to make the error and throw null instead.
			kinds: kinds(transform.KindMemoryLimit, transform.KindTimeLimit, transform.KindThrown)},
		{name: "arrays of arrays", code: "const a = []; for (;;) a.push(new Array(1000).fill(1.5))", kinds: kinds(transform.KindMemoryLimit, transform.KindTimeLimit)},
		{name: "a typed array", code: "return {payload: new Float64Array(2 ** 24).length}", kinds: kinds(transform.KindMemoryLimit, transform.KindThrown)},
		{name: "an array buffer", code: "new ArrayBuffer(2 ** 30)", kinds: kinds(transform.KindMemoryLimit, transform.KindThrown)},
		{name: "deep recursion", code: "function f(n) { return f(n + 1) + 1 }\nreturn f(0)", kinds: kinds(transform.KindStackLimit)},
		{name: "deep recursion caught and retried", code: "function f() { try { return f() } catch (e) { return f() } }\nreturn f()",
			kinds: kinds(transform.KindTimeLimit, transform.KindStackLimit)},
		{name: "a deeply nested value", code: "w.payload = JSON.parse('['.repeat(1e5) + ']'.repeat(1e5)); return w",
			kinds: kinds(transform.KindStackLimit)},
		{name: "a deeply nested return value", code: "let o = {}; for (let i = 0; i < 1e5; i++) o = [o]; w.payload = o; return w",
			kinds: kinds(transform.KindStackLimit, transform.KindTimeLimit)},
		{name: "a huge return value", code: "w.payload = 'x'.repeat(1 << 20); return w", kinds: kinds(transform.KindOutputTooLarge, transform.KindMemoryLimit)},
		{name: "a huge error message", code: "throw new Error('x'.repeat(1 << 20))",
			kinds: kinds(transform.KindThrown, transform.KindMemoryLimit, transform.KindTimeLimit)},
		{name: "fetch", code: "return fetch('https://evil.example/')", kinds: kinds(transform.KindThrown), text: "'fetch' is not defined"},
		{name: "XMLHttpRequest", code: "new XMLHttpRequest()", kinds: kinds(transform.KindThrown), text: "is not defined"},
		{name: "WebSocket", code: "new WebSocket('wss://evil.example')", kinds: kinds(transform.KindThrown), text: "is not defined"},
		{name: "require", code: "require('fs').readFileSync('/etc/passwd')", kinds: kinds(transform.KindThrown), text: "'require' is not defined"},
		{name: "std and os of qjs", code: "return std.loadFile('/etc/passwd') || os.exec(['sh'])", kinds: kinds(transform.KindThrown), text: "is not defined"},
		{name: "process", code: "return process.env", kinds: kinds(transform.KindThrown), text: "is not defined"},
		{name: "dynamic import", code: "return import('os')", kinds: kinds(transform.KindShape)},
		{name: "setTimeout", code: "setTimeout(() => {}, 0)", kinds: kinds(transform.KindThrown), text: "'setTimeout' is not defined"},
		{name: "setInterval", code: "setInterval(() => {}, 1)", kinds: kinds(transform.KindThrown), text: "'setInterval' is not defined"},
		{name: "queueMicrotask", code: "queueMicrotask(() => {})", kinds: kinds(transform.KindThrown), text: "is not defined"},
		{name: "Atomics.wait", code: "Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0)", kinds: kinds(transform.KindThrown)},
		{name: "the Function constructor", code: "return new Function('return fetch')()('x')", kinds: kinds(transform.KindThrown), text: "is not defined"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			grew, allocated := measure(t, func() {
				_, err = run(t, s, "function handler(w) {"+c.code+"\n}", testInput)
			})
			te := asError(t, err)
			if !slices.Contains(c.kinds, te.Kind) || !strings.Contains(te.Message, c.text) {
				t.Fatalf("error %#v, want one of %v with %q", te, c.kinds, c.text)
			}
			if allocated > maxGoAllocated || grew > maxPeakGrowth {
				t.Fatalf("the call allocated %d MiB of Go heap (bound %d) and grew the peak RSS by %d MiB (bound %d)",
					allocated>>20, maxGoAllocated>>20, grew>>20, maxPeakGrowth>>20)
			}
			t.Logf("%s: %v; Go heap allocated %d KiB, peak RSS grew %d KiB", c.name, te, allocated>>10, grew>>10)
		})
	}
}

func kinds(k ...transform.Kind) []transform.Kind { return k }

// measure runs f and returns how much it grew the process's peak resident
// memory (VmHWM, reset first through /proc/self/clear_refs) and how many
// bytes of Go heap it allocated (MemStats.TotalAlloc, an upper bound of
// the heap's growth).
func measure(t *testing.T, f func()) (peakGrowth, goAllocated int64) {
	t.Helper()
	runtime.GC()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Logf("peak RSS not measured: %v", err)
	}
	before := procStatus(t, "VmRSS")
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	f()
	runtime.ReadMemStats(&m1)
	return procStatus(t, "VmHWM") - before, int64(m1.TotalAlloc - m0.TotalAlloc)
}

// procStatus reads a field of /proc/self/status, in bytes.
func procStatus(t *testing.T, field string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		// The bounds are measured from /proc; a machine without it
		// cannot pass these tests, it does not skip them.
		t.Fatalf("read /proc/self/status, where the memory bounds are measured: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kib << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// TestNoStateBetweenCalls: a global, a tampered prototype or builtin, of
// one call is gone at the next.
func TestNoStateBetweenCalls(t *testing.T) {
	s := sandbox(t, testLimits)
	code := `
var count = (globalThis.count || 0) + 1;
function handler(w) {
  const before = count;
  globalThis.count = count + 1;
  const seen = {
    count: before,
    objectTampered: typeof Object.prototype.tampered,
    arrayPush: Array.prototype.push === Array.prototype.tamperedPush,
    stringify: typeof JSON.stringify.tampered,
  };
  Object.prototype.tampered = 1;
  Array.prototype.tamperedPush = Array.prototype.push;
  JSON.stringify = Object.assign(() => '{}', {tampered: true});
  w.payload = seen;
  return w;
}`
	p, err := s.Compile(t.Context(), code)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"count":1,"objectTampered":"undefined","arrayPush":false,"stringify":"undefined"}`
	for i := range 3 {
		out, err := s.Run(t.Context(), p, testInput)
		if err != nil {
			t.Fatal(err)
		}
		if string(out.Payload) != want {
			t.Fatalf("call %d saw %s", i, out.Payload)
		}
	}
}

// TestPrototypeTampering: whatever the script does to the builtins, the
// webhook returned is read by webhookd's rules, not the script's.
func TestPrototypeTampering(t *testing.T) {
	s := sandbox(t, testLimits)
	cases := []struct {
		name, code string
		payload    string
		kind       transform.Kind
	}{
		{"JSON.stringify replaced", "JSON.stringify = () => '{\"payload\":0,\"url\":\"https://evil.example/\"}'; w.payload = 1; return w", "1", ""},
		{"JSON.parse replaced at the top level", "return w", string(testInput.Payload), ""},
		{"a url getter on Object.prototype", "Object.defineProperty(Object.prototype, 'url', {get() { return 'https://evil.example/' }, enumerable: true}); return {payload: 1}", "1", ""},
		{"Object.prototype.toJSON", "Object.prototype.toJSON = function () { return {payload: 'x', url: 'https://evil.example/'} }; return w", "", transform.KindURL},
		{"Array.prototype.map broken", "Array.prototype.map = null; w.payload = [1].map(x => x); return w", "", transform.KindThrown},
		{"a getter that never ends", "w.payload = {get x() { for (;;) {} }}; return w", "", transform.KindTimeLimit},
		{"a Proxy returned", "return new Proxy(w, {get(t, k) { return k === 'payload' ? 2 : t[k] }})", "2", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code := "function handler(w) {" + c.code + "}"
			if c.name == "JSON.parse replaced at the top level" {
				code = "JSON.parse = () => ({payload: 'forged'});\n" + code
			}
			out, err := run(t, sandbox(t, hostileLimits), code, testInput)
			if c.kind != "" {
				if te := asError(t, err); te.Kind != c.kind {
					t.Fatalf("error %#v, want %s", te, c.kind)
				}
				return
			}
			if err != nil || string(out.Payload) != c.payload || out.URL != testInput.URL {
				t.Fatalf("payload %s url %s error %v", out.Payload, out.URL, err)
			}
		})
	}
	_ = s
}
