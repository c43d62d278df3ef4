package payloadschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/invalid"
)

// Rule is the rule a payload that does not match its schema breaks, as it
// names itself in an *invalid.Error and in
// webhookd_events_refused_total{rule}.
const Rule = "payload_schema"

// logEvery is how often, at most, warn mode logs a mismatch of one event
// type: a producer that sends every event wrong must not flood the log;
// the counter counts every one.
const logEvery = time.Minute

// Config is what a Validator needs.
type Config struct {
	// Mode is WEBHOOKD_PAYLOAD_VALIDATION; "" is DefaultMode.
	Mode Mode
	// Types are the entries whose schemas are checked
	// (catalogue.Catalogue.Entries): every publishable type and ping.test.
	Types []catalogue.EventType
	// Registerer receives webhookd_payload_schema_mismatches_total; nil:
	// nowhere.
	Registerer prometheus.Registerer
	// Logger receives warn mode's lines; nil discards them.
	Logger *slog.Logger
	// Clock paces warn mode's lines; nil is the system clock.
	Clock clock.Clock
}

// Validator checks payloads against their type's schema. Every schema is
// compiled once, by New; Check is safe for concurrent use.
type Validator struct {
	mode    Mode
	schemas map[string]*jsonschema.Schema
	// mismatches counts the payloads that did not match, by type, in warn
	// and enforce mode alike.
	mismatches *prometheus.CounterVec
	logger     *slog.Logger
	clock      clock.Clock
	// logged is when each type's mismatch was last logged (warn mode).
	mu     sync.Mutex
	logged map[string]time.Time
}

// New compiles the schema of every type of cfg.Types: a schema that does
// not compile is an error (a build's fault, caught by its tests), in every
// mode, so that turning validation on later cannot fail.
func New(cfg Config) (*Validator, error) {
	mode := cfg.Mode
	if mode == "" {
		mode = DefaultMode
	}
	if _, err := ParseMode(string(mode)); err != nil {
		return nil, fmt.Errorf("payload validation: %w", err)
	}
	v := &Validator{mode: mode, schemas: make(map[string]*jsonschema.Schema, len(cfg.Types)),
		logger: cfg.Logger, clock: clock.Or(cfg.Clock), logged: map[string]time.Time{},
		mismatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_payload_schema_mismatches_total",
			Help: "Published payloads that did not match their event type's schema, by type: published anyway in warn mode, refused in enforce mode (WEBHOOKD_PAYLOAD_VALIDATION).",
		}, []string{"type"})}
	if v.logger == nil {
		v.logger = slog.New(slog.DiscardHandler)
	}
	for _, et := range cfg.Types {
		s, err := Compile(et)
		if err != nil {
			return nil, err
		}
		v.schemas[et.Name] = s
		v.mismatches.WithLabelValues(et.Name)
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(v.mismatches); err != nil {
			return nil, fmt.Errorf("register payload validation metrics: %w", err)
		}
	}
	return v, nil
}

// Compile compiles the schema of et (catalogue.EventType.Schema), with
// formats (uuid, date-time) asserted, not only annotated.
func Compile(et catalogue.EventType) (*jsonschema.Schema, error) {
	if len(et.Schema) == 0 {
		return nil, fmt.Errorf("event type %s has no schema", et.Name)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(et.Schema))
	if err != nil {
		return nil, fmt.Errorf("schema of %s: %w", et.Name, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	url := "urn:webhookd:event-type:" + et.Name
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("schema of %s: %w", et.Name, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("schema of %s: %w", et.Name, err)
	}
	return s, nil
}

// Mode is the validator's mode.
func (v *Validator) Mode() Mode { return v.mode }

// Check judges payload, a JSON object of at most the publisher's payload
// limit (the publisher checked both), against the schema of eventType.
// In enforce mode a mismatch is an *invalid.Error of Rule naming the
// member at fault (payload.amount); in warn mode it is counted and logged
// and Check returns nil; off checks nothing. A type without a schema
// passes: the publisher refused unknown types already.
//
// The cost is bounded by the payload's size: the schemas are webhookd's
// own, hold no $ref, and their patterns are RE2 expressions, which match
// in linear time.
func (v *Validator) Check(merchantID, eventType string, payload json.RawMessage) *invalid.Error {
	s := v.schemas[eventType]
	if v.mode == Off || s == nil {
		return nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return nil // the publisher's JSON rule refuses it, before this
	}
	var verr *jsonschema.ValidationError
	if err := s.Validate(doc); !errors.As(err, &verr) {
		return nil
	}
	bad := Refusal(eventType, doc, verr)
	v.mismatches.WithLabelValues(eventType).Inc()
	if v.mode == Enforce {
		return bad
	}
	if v.shouldLog(eventType) {
		v.logger.Warn("payload does not match its event type's schema; published anyway (WEBHOOKD_PAYLOAD_VALIDATION=warn)",
			"merchant_id", merchantID, "event_type", eventType, "param", bad.Param, "reason", bad.Message)
	}
	return nil
}

// shouldLog tells whether a mismatch of eventType is logged now: the first
// one, then one each logEvery.
func (v *Validator) shouldLog(eventType string) bool {
	now := v.clock.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	if last, ok := v.logged[eventType]; ok && now.Sub(last) < logEvery {
		return false
	}
	v.logged[eventType] = now
	return true
}

// Refusal is the *invalid.Error of a payload doc of eventType that failed
// its schema with err: the first leaf error's member, named as the HTTP
// API names a field's parts (payload.destination.iban,
// payload.items[0]). Its message names the schema's rule, never the
// payload's value.
func Refusal(eventType string, doc any, err *jsonschema.ValidationError) *invalid.Error {
	leaf := err
	for len(leaf.Causes) > 0 {
		leaf = leaf.Causes[0]
	}
	param := memberName(doc, leaf.InstanceLocation)
	where := " (GET /v1/event_types/" + eventType + " shows the schema)."
	switch k := leaf.ErrorKind.(type) {
	case *kind.Required:
		param += "." + invalid.Cut(k.Missing[0])
		return invalid.Value(param, Rule, param+" is required by the "+eventType+" schema"+where)
	case *kind.Type:
		return invalid.Value(param, Rule, param+" must be "+strings.Join(k.Want, " or ")+where)
	case *kind.Const:
		return invalid.Value(param, Rule, param+" must be "+jsonText(k.Want)+where)
	case *kind.Enum:
		return invalid.Value(param, Rule, param+" must be one of "+jsonText(k.Want)+where)
	case *kind.Format:
		return invalid.Value(param, Rule, param+" must be a "+k.Want+where)
	}
	keyword := "its schema"
	if path := leaf.ErrorKind.KeywordPath(); len(path) > 0 {
		keyword = "the schema's " + path[len(path)-1]
	}
	return invalid.Value(param, Rule, param+" breaks "+keyword+" in the "+eventType+" schema"+where)
}

// memberName names the member of doc at loc (a JSON pointer's tokens)
// under "payload": .key for an object's member, [i] for an array's
// element, each key cut so that a huge one cannot make a huge message.
func memberName(doc any, loc []string) string {
	var b strings.Builder
	b.WriteString("payload")
	for _, tok := range loc {
		switch d := doc.(type) {
		case []any:
			b.WriteString("[" + tok + "]")
			if i, err := strconv.Atoi(tok); err == nil && i < len(d) {
				doc = d[i]
			}
		case map[string]any:
			b.WriteString("." + invalid.Cut(tok))
			doc = d[tok]
		}
	}
	return b.String()
}

// jsonText is a schema's value as a message shows it.
func jsonText(v any) string {
	b, _ := json.Marshal(v) // a schema's values are JSON values
	return string(b)
}
