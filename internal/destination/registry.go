package destination

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/webhookd/webhookd/internal/invalid"
)

// Registry holds the kinds this build delivers to, by type. It is built
// once at wiring (kinds.Default) and read only after.
type Registry struct {
	kinds map[string]Kind
	order []string
	// builtin are the engine's own kinds by type, chosen by the
	// subscription's kind (chosen) or by their stored type.
	builtin map[string]Kind
	chosen  map[string]string
}

// NewRegistry returns a registry of kinds, in the order the
// documentation lists them. Two kinds of the same type are a wiring
// error.
func NewRegistry(kinds ...Kind) (*Registry, error) {
	r := &Registry{kinds: make(map[string]Kind, len(kinds))}
	for _, k := range kinds {
		typ := k.Metadata().Type
		if typ == "" {
			return nil, fmt.Errorf("destination registry: a kind without a type")
		}
		if _, dup := r.kinds[typ]; dup {
			return nil, fmt.Errorf("destination registry: type %q registered twice", typ)
		}
		if k.Metadata().Builtin {
			return nil, fmt.Errorf("destination registry: %q is a built-in kind (WithBuiltin)", typ)
		}
		r.kinds[typ] = k
		r.order = append(r.order, typ)
	}
	return r, nil
}

// WithBuiltin is r with the engine's own kinds added (the HTTP endpoint,
// the listener, poll: Metadata.Builtin), which the worker builds on its
// sender and relay. No merchant writes their types: they are chosen by
// the subscription (For), and a read of r's types, metadata or a
// destination object knows only r's own kinds. r is left as it was.
func (r *Registry) WithBuiltin(kinds ...Kind) (*Registry, error) {
	out := &Registry{kinds: r.kinds, order: r.order, builtin: maps.Clone(r.builtin), chosen: maps.Clone(r.chosen)}
	if out.builtin == nil {
		out.builtin, out.chosen = map[string]Kind{}, map[string]string{}
	}
	for _, k := range kinds {
		md := k.Metadata()
		_, dup := r.kinds[md.Type]
		_, dupBuiltin := out.builtin[md.Type]
		_, dupChosen := out.chosen[md.ChosenBy]
		switch {
		case !md.Builtin || md.Type == "":
			return nil, fmt.Errorf("destination registry: %q is not a built-in kind", md.Type)
		case dup || dupBuiltin || (md.ChosenBy != "" && dupChosen):
			return nil, fmt.Errorf("destination registry: type %q or its subscription kind %q registered twice", md.Type, md.ChosenBy)
		}
		out.builtin[md.Type] = k
		if md.ChosenBy != "" {
			out.chosen[md.ChosenBy] = md.Type
		}
	}
	return out, nil
}

// Builtin are the built-in kinds, by type.
func (r *Registry) Builtin() map[string]Kind { return maps.Clone(r.builtin) }

// chosenBy is the built-in kind a subscription of kind subscriptionKind
// without a stored destination is sent by.
func (r *Registry) chosenBy(subscriptionKind string) (string, Kind, bool) {
	typ, ok := r.chosen[subscriptionKind]
	if !ok {
		return "", nil, false
	}
	return typ, r.builtin[typ], true
}

// Types are the registered types, in order.
func (r *Registry) Types() []string { return slices.Clone(r.order) }

// Kind is the kind of typ.
func (r *Registry) Kind(typ string) (Kind, bool) {
	k, ok := r.kinds[typ]
	return k, ok
}

// Metadata is every kind's, in order.
func (r *Registry) Metadata() []Metadata {
	out := make([]Metadata, 0, len(r.order))
	for _, typ := range r.order {
		out = append(out, r.kinds[typ].Metadata())
	}
	return out
}

// TypeOf reads the "type" of a destination object; "" when it has none.
func TypeOf(raw json.RawMessage) string {
	var head struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(raw, &head) != nil {
		return ""
	}
	return head.Type
}

// Parse reads a destination of a registered kind by allow-list: an object
// with a known type, only the members its Metadata lists, then the kind's
// own rules (Kind.Parse). param names the field ("destination"); every
// refusal is an *invalid.Error naming the field at fault.
func (r *Registry) Parse(param string, raw json.RawMessage) (string, Config, error) {
	raw = bytes.TrimSpace(raw)
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return "", nil, invalid.Value(param, "destination_not_object",
			param+` must be an object such as {"type": "rabbitmq", ...}.`)
	}
	var typ string
	if rawType, ok := fields["type"]; !ok || json.Unmarshal(rawType, &typ) != nil || typ == "" {
		return "", nil, invalid.Missing(param + ".type")
	}
	k, ok := r.kinds[typ]
	if !ok {
		// A built-in kind with a stored form ({"type": "poll"}): read
		// back from storage, never from a merchant (the subscription's
		// rules refuse every type that is not r's own before this).
		k, ok = r.builtin[typ]
	}
	if !ok {
		return "", nil, invalid.Value(param+".type", "destination_type_unknown", fmt.Sprintf("%s.type must be one of %s; %s is not a destination type.",
			param, strings.Join(r.order, ", "), invalid.Quote(typ)))
	}
	allowed := k.Metadata().Fields
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		if name != "type" && !slices.ContainsFunc(allowed, func(f Field) bool { return f.Name == name }) {
			return "", nil, invalid.Value(param+"."+name, "destination_field_unknown",
				fmt.Sprintf("A %s destination has no field %s.", typ, invalid.Quote(name)))
		}
	}
	cfg, err := k.Parse(param, raw)
	if err != nil {
		return "", nil, err
	}
	return typ, cfg, nil
}

// Encode is cfg's stored form: its JSON with its type, what Parse reads
// back.
func Encode(typ string, cfg Config) ([]byte, error) {
	plain, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encode %s destination: %w", typ, err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(plain, &fields); err != nil {
		return nil, fmt.Errorf("encode %s destination: %w", typ, err)
	}
	fields["type"], _ = json.Marshal(typ)
	return json.Marshal(fields)
}

// Open makes the publisher of a destination Parse returned.
func (r *Registry) Open(typ string, cfg Config, env Env) (Publisher, error) {
	k, ok := r.kinds[typ]
	if !ok {
		k, ok = r.builtin[typ]
	}
	if !ok {
		return nil, Fail(CodeInvalid, "the destination's type is not delivered by this server", nil)
	}
	return k.Open(cfg, env)
}
