package payloadschema_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/payloadschema"
)

// entries is every type a default deployment knows, ping.test included,
// plus one the operator added.
func entries() []catalogue.EventType {
	return catalogue.New(append(catalogue.Names(), "card.captured")).Entries()
}

func newValidator(t *testing.T, mode payloadschema.Mode, clk clock.Clock, logs *bytes.Buffer) *payloadschema.Validator {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(logs, nil))
	v, err := payloadschema.New(payloadschema.Config{Mode: mode, Types: entries(), Registerer: prometheus.NewRegistry(), Logger: logger, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Every catalogue type has a schema, in the dialect, that compiles and
// that its own example matches: a new type without one, or whose example
// drifts from it, fails here.
func TestEveryTypeHasASchemaItsExampleMatches(t *testing.T) {
	v := newValidator(t, payloadschema.Enforce, nil, &bytes.Buffer{})
	for _, et := range entries() {
		var s struct {
			Dialect string `json:"$schema"`
			Type    string `json:"type"`
		}
		if err := json.Unmarshal(et.Schema, &s); err != nil || s.Dialect != catalogue.SchemaDialect || s.Type != "object" {
			t.Errorf("%s: schema %s (%v): want an object schema of %s", et.Name, et.Schema, err, catalogue.SchemaDialect)
			continue
		}
		if bad := v.Check("m_1", et.Name, et.Example); bad != nil {
			t.Errorf("%s: its example does not match its schema: %v", et.Name, bad)
		}
	}
}

// Every object a schema describes says whether it takes members it does
// not list: the choice is made, not defaulted.
func TestEveryObjectSchemaDecidesAdditionalProperties(t *testing.T) {
	var walk func(name, at string, s any)
	walk = func(name, at string, s any) {
		switch n := s.(type) {
		case map[string]any:
			if types, _ := json.Marshal(n["type"]); strings.Contains(string(types), `"object"`) {
				if _, ok := n["additionalProperties"]; !ok {
					t.Errorf("%s: %s is an object schema without additionalProperties", name, at)
				}
			}
			for k, sub := range n {
				walk(name, at+"/"+k, sub)
			}
		case []any:
			for _, sub := range n {
				walk(name, at+"/[]", sub)
			}
		}
	}
	for _, et := range entries() {
		var s any
		if err := json.Unmarshal(et.Schema, &s); err != nil {
			t.Fatal(err)
		}
		walk(et.Name, "#", s)
	}
}

// example is the catalogue's example of typ with edit applied.
func example(t *testing.T, typ string, edit func(map[string]any)) json.RawMessage {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(catalogue.New(catalogue.Names()).Example(typ), &p); err != nil {
		t.Fatal(err)
	}
	edit(p)
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Enforce refuses a mismatch naming the member at fault and the schema's
// rule, never the value sent.
func TestEnforceNamesTheMemberAtFault(t *testing.T) {
	v := newValidator(t, payloadschema.Enforce, nil, &bytes.Buffer{})
	for _, tc := range []struct {
		typ       string
		edit      func(map[string]any)
		param     string
		message   string // a part of the message
		wantError bool
	}{
		{"payout.paid", func(p map[string]any) { p["amount"] = 12.5 }, "payload.amount", "payload.amount must be string", true},
		{"payout.paid", func(p map[string]any) { p["amount"] = "12,50" }, "payload.amount", "the schema's pattern", true},
		{"payout.paid", func(p map[string]any) { delete(p, "reference") }, "payload.reference", "payload.reference is required by the payout.paid schema", true},
		{"payout.paid", func(p map[string]any) { p["status"] = "failed" }, "payload.status", `payload.status must be "paid"`, true},
		{"payout.paid", func(p map[string]any) { p["currency"] = "JPY" }, "payload.currency", `must be one of ["EUR","GBP","USD","USDC"]`, true},
		{"payout.paid", func(p map[string]any) { p["id"] = "not-a-uuid" }, "payload.id", "payload.id must be a uuid", true},
		{"payout.paid", func(p map[string]any) { p["destination"].(map[string]any)["iban"] = "x" }, "payload.destination.iban", "pattern", true},
		{"payout.paid", func(p map[string]any) { delete(p["destination"].(map[string]any), "iban") }, "payload.destination.iban", "is required", true},
		{"payout.paid", func(p map[string]any) { p["metadata"] = map[string]any{"order_id": 7} }, "payload.metadata.order_id", "must be string", true},
		{"payout.failed", func(p map[string]any) { p["failure"] = nil }, "payload.failure", "must be object", true},
		{"payout.paid", func(p map[string]any) { p["failure"] = map[string]any{"code": "x"} }, "payload.failure", "must be null", true},
		{"deposit.received", func(p map[string]any) { p["rail"] = "carrier_pigeon" }, "payload.rail", "must be one of", true},
		{"deposit.received", func(p map[string]any) { p["rail"] = nil }, "", "", false},
		// Members the schema does not list are additions the API may make
		// without a new version: accepted.
		{"payout.paid", func(p map[string]any) { p["tracking_reference"] = "UETR-1" }, "", "", false},
		{"conversion.succeeded", func(p map[string]any) { p["created_at"] = "yesterday" }, "payload.created_at", "must be a date-time", true},
	} {
		bad := v.Check("m_1", tc.typ, example(t, tc.typ, tc.edit))
		if !tc.wantError {
			if bad != nil {
				t.Errorf("%s %s: refused: %v", tc.typ, tc.param, bad)
			}
			continue
		}
		if bad == nil || bad.Param != tc.param || bad.Rule != payloadschema.Rule || !strings.Contains(bad.Message, tc.message) ||
			!strings.Contains(bad.Message, "GET /v1/event_types/"+tc.typ) {
			t.Errorf("%s: got %+v, want param %s and a message with %q", tc.typ, bad, tc.param, tc.message)
		}
	}
	// An array's element is named by its index; a huge key is cut.
	long := strings.Repeat("k", 500)
	bad := v.Check("m_1", "payout.paid", example(t, "payout.paid", func(p map[string]any) { p["metadata"] = map[string]any{long: 1} }))
	if bad == nil || bad.Param != "payload.metadata."+invalid.Cut(long) || len(bad.Param) > 100 {
		t.Errorf("a long key: %+v", bad)
	}
	// An added type's schema is any object.
	if bad := v.Check("m_1", "card.captured", json.RawMessage(`{"anything":[1,2]}`)); bad != nil {
		t.Errorf("an added type: %v", bad)
	}
}

// Warn accepts and counts every mismatch, and logs one line per type a
// minute; off checks nothing.
func TestWarnCountsAndLogsAndOffChecksNothing(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	clk := clock.Func(func() time.Time { return now })
	wrong := example(t, "payout.paid", func(p map[string]any) { p["amount"] = 1 })
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	warn, err := payloadschema.New(payloadschema.Config{Mode: payloadschema.Warn, Types: entries(), Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if bad := warn.Check("m_1", "payout.paid", wrong); bad != nil {
			t.Fatalf("warn refused: %v", bad)
		}
	}
	if n := strings.Count(logs.String(), "does not match"); n != 1 {
		t.Errorf("logged %d lines in a minute, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "param=payload.amount") || strings.Contains(logs.String(), "amount=1") {
		t.Errorf("log line: %s", logs.String())
	}
	now = now.Add(time.Minute)
	warn.Check("m_1", "payout.paid", wrong)
	if n := strings.Count(logs.String(), "does not match"); n != 2 {
		t.Errorf("logged %d lines after a minute, want 2", n)
	}
	if got := mismatches(t, reg, "payout.paid"); got != 4 {
		t.Errorf("mismatches = %v, want 4", got)
	}
	if got := mismatches(t, reg, "payout.created"); got != 0 {
		t.Errorf("another type's series = %v, want 0", got)
	}

	off := newValidator(t, payloadschema.Off, clk, &logs)
	if bad := off.Check("m_1", "payout.paid", wrong); bad != nil || off.Mode() != payloadschema.Off {
		t.Errorf("off refused: %v", bad)
	}
}

// mismatches is the value of the mismatch counter's series of typ in reg.
func mismatches(t *testing.T, reg *prometheus.Registry, typ string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "webhookd_payload_schema_mismatches_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetLabel()[0].GetValue() == typ {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no series for %s", typ)
	return 0
}

func TestParseModeIsStrict(t *testing.T) {
	for _, s := range []string{"off", "warn", "enforce"} {
		if m, err := payloadschema.ParseMode(s); err != nil || string(m) != s {
			t.Errorf("ParseMode(%q) = %q, %v", s, m, err)
		}
	}
	for _, s := range []string{"", "Enforce", "on", "true", " warn"} {
		if _, err := payloadschema.ParseMode(s); err == nil {
			t.Errorf("ParseMode(%q) passed", s)
		}
	}
	if _, err := payloadschema.New(payloadschema.Config{Mode: "strict"}); err == nil {
		t.Error("New took an unknown mode")
	}
	if _, err := payloadschema.New(payloadschema.Config{Types: []catalogue.EventType{{Name: "x.y"}}}); err == nil {
		t.Error("New took a type without a schema")
	}
}
