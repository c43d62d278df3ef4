package filter

import (
	"strings"
	"testing"
)

func compile(t testing.TB, expr string) *Program {
	t.Helper()
	c, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Compile(expr)
	if err != nil {
		t.Fatalf("compile %s: %v", expr, err)
	}
	return p
}

func event(t testing.TB, payload string) Event {
	t.Helper()
	e, err := Decode([]byte(`{"id":"0193c1d0-0000-7000-8000-000000000000","type":"payout.paid","api_version":"2026-05-01","payload":` +
		payload + `,"date":"2026-11-23T04:00:00.000Z"}`))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestMatch: the envelope's fields, decimal comparisons of strings, and
// every way an expression can fail to judge an event (which never
// matches).
func TestMatch(t *testing.T) {
	tests := []struct {
		expr, payload string
		want, err     bool
	}{
		{`payload.currency in ["EUR", "GBP"] && payload.amount > "1000"`, `{"currency":"EUR","amount":"1250.00"}`, true, false},
		{`payload.currency in ["EUR", "GBP"] && payload.amount > "1000"`, `{"currency":"EUR","amount":"999.5"}`, false, false},
		{`payload.amount > "1000"`, `{"amount":"1000.00"}`, false, false},
		{`payload.amount >= "1000"`, `{"amount":"1000.00"}`, true, false},
		{`payload.amount < "10"`, `{"amount":"9.99"}`, true, false},
		{`payload.amount <= "-1"`, `{"amount":"-1.5"}`, true, false},
		{`payload.amount > "100000000000000000000.01"`, `{"amount":"100000000000000000000.02"}`, true, false},
		{`payload.name < "b"`, `{"name":"abc"}`, true, false}, // not decimals: text order
		{`payload.n > 3`, `{"n":4}`, true, false},
		{`type == "payout.paid" && api_version == "2026-05-01"`, `{}`, true, false},
		{`type.startsWith("payout.")`, `{}`, true, false},
		{`has(payload.tags) && "vip" in payload.tags`, `{"tags":["vip"]}`, true, false},
		{`has(payload.tags) && "vip" in payload.tags`, `{}`, false, false},
		{`payload.missing == "x"`, `{}`, false, true},
		{`payload.amount > "1000"`, `{"amount":1250}`, false, true}, // a number against a string
		{`payload.n`, `{"n":1}`, false, true},                       // not a bool at run time
	}
	for _, tt := range tests {
		t.Run(tt.expr+" "+tt.payload, func(t *testing.T) {
			got, err := compile(t, tt.expr).Match(event(t, tt.payload))
			if got != tt.want || (err != nil) != tt.err {
				t.Fatalf("Match = %v, %v; want %v, error %v", got, err, tt.want, tt.err)
			}
		})
	}
}

// TestCompileRefuses: what Compile refuses, with a message a merchant can
// act on.
func TestCompileRefuses(t *testing.T) {
	c, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ expr, message string }{
		{``, "empty"},
		{`  `, "empty"},
		{`payload.amount >`, "Syntax error"},
		{`amount > "1"`, "undeclared reference"},
		{`"EUR"`, "must be true or false"},
		{`1 + 1`, "must be true or false"},
		{`payload.a.all(x, payload.a.all(y, payload.a.all(z, x == y && y == z)))`, "more than the limit"},
		{strings.Repeat("true && ", 300) + "true", "longer than"},
		{"true\x00", "NUL"},
	}
	for _, tt := range tests {
		if _, err := c.Compile(tt.expr); err == nil || !strings.Contains(err.Error(), tt.message) {
			t.Errorf("Compile(%.40q) = %v, want an error saying %q", tt.expr, err, tt.message)
		}
	}
}

// TestRuntimeCostLimit: an expression whose estimate passes but whose run
// on a large event goes over the limit is stopped and does not match.
func TestRuntimeCostLimit(t *testing.T) {
	p := compile(t, `payload.s.contains("needle")`)
	big := `{"s":"` + strings.Repeat("a", 240<<10) + `"}`
	if ok, err := p.Match(event(t, big)); ok {
		t.Fatalf("matched: %v", err)
	}
	p = compile(t, `payload.items.exists(x, x == "z")`)
	items := `{"items":[` + strings.Repeat(`"a",`, 50000) + `"z"]}`
	ok, err := p.Match(event(t, items))
	if ok || err == nil || !strings.Contains(err.Error(), "cost") {
		t.Fatalf("Match over the cost limit = %v, %v; want stopped", ok, err)
	}
}

// BenchmarkMatch is the per-event cost of a compiled filter on a decoded
// event, and of decoding the event (once per fan-out).
func BenchmarkMatch(b *testing.B) {
	p := compile(b, `payload.currency in ["EUR", "GBP"] && payload.amount > "1000"`)
	body := []byte(`{"id":"0193c1d0-0000-7000-8000-000000000000","type":"payout.paid","api_version":"2026-05-01",` +
		`"payload":{"id":"po_1","currency":"EUR","amount":"1250.00","destination":"ba_123"},"date":"2026-11-23T04:00:00.000Z"}`)
	b.Run("match", func(b *testing.B) {
		e, err := Decode(body)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if ok, err := p.Match(e); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			if _, err := Decode(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("compile", func(b *testing.B) {
		c, err := NewCompiler()
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := c.Compile(`payload.currency in ["EUR", "GBP"] && payload.amount > "1000"`); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzCompile: any text either compiles or is refused with an error;
// a compiled one never panics on an event and never matches with an
// error.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{`payload.amount > "1000"`, `type == "x"`, `payload.a.exists(x, x > 1)`, `"a" < "b"`, `has(payload.x)`, `(`} {
		f.Add(s)
	}
	c, err := NewCompiler()
	if err != nil {
		f.Fatal(err)
	}
	e := event(f, `{"amount":"12.5","a":[1,2,3],"x":{"y":"z"}}`)
	f.Fuzz(func(t *testing.T, expr string) {
		p, err := c.Compile(expr)
		if err != nil {
			return
		}
		if ok, err := p.Match(e); ok && err != nil {
			t.Fatalf("matched with an error: %v", err)
		}
	})
}

// TestCompareStrings: decimal strings by value, anything else as text.
func TestCompareStrings(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"1250.00", "1000", 1},
		{"999.5", "1000", -1},
		{"1000.00", "1000", 0},
		{"0001000", "1000.0", 0},
		{"0.05", "0.5", -1},
		{"0.51", "0.5", 1},
		{"-1.5", "-1", -1},
		{"-1", "-1.5", 1},
		{"-0", "0.00", 0},
		{"-2", "1", -1},
		{"123456789012345678901234567890.01", "123456789012345678901234567890.001", 1},
		{"1.", "1", 1},  // not a decimal: text order
		{".5", "1", -1}, // not a decimal: text order
		{"1e3", "2", -1},
		{"abc", "abd", -1},
	}
	for _, tt := range tests {
		if got := compareStrings(tt.a, tt.b); got != tt.want {
			t.Errorf("compareStrings(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := compareStrings(tt.b, tt.a); got != -tt.want {
			t.Errorf("compareStrings(%q, %q) = %d, want %d", tt.b, tt.a, got, -tt.want)
		}
	}
}
