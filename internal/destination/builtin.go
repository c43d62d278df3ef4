package destination

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/webhookd/webhookd/internal/invalid"
)

// Sender is the engine's own sending of a built-in kind: the HTTP
// sender of dispatcher/deliver (its one client, the address-checked
// dialer, the egress proxy, client certificates, OAuth2 tokens), or its
// listener relay. It answers with the attempt's whole Result; an error
// is internal and means nothing was sent.
type Sender interface {
	Send(ctx context.Context, m Message) (Result, error)
}

// Builtin is a kind of the engine's own (Metadata.Builtin): md
// describes it, s sends its messages; nil s makes a kind that is never
// sent to (poll), whose every send fails as destination_invalid. Its
// stored form, when it has one, is {"type": md.Type} and nothing else.
func Builtin(md Metadata, s Sender) Kind {
	md.Builtin = true
	return builtinKind{md: md, sender: s}
}

type builtinKind struct {
	md     Metadata
	sender Sender
}

// builtinConfig is a built-in kind's stored form: its type alone (the
// subscription holds the rest: its url, its authentication).
type builtinConfig struct{ typ string }

// Summary implements Config: nothing to show.
func (c builtinConfig) Summary() map[string]any { return map[string]any{} }

// Target implements Config: the type.
func (c builtinConfig) Target() string { return c.typ }

// Addresses implements Config: the subscription's url is checked by its own rules.
func (c builtinConfig) Addresses() []Address { return nil }

// Plaintext implements Config.
func (c builtinConfig) Plaintext() string { return "" }

// MarshalJSON is the stored form's fields besides the type: none.
func (c builtinConfig) MarshalJSON() ([]byte, error) { return []byte("{}"), nil }

// Metadata implements Kind.
func (k builtinKind) Metadata() Metadata { return k.md }

// Parse reads the stored form, {"type": …} alone.
func (k builtinKind) Parse(param string, raw json.RawMessage) (Config, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, invalid.Value(param, "destination_not_object", param+" must be an object.")
	}
	for name := range fields {
		if name != "type" {
			return nil, invalid.Value(param+"."+name, "destination_field_unknown",
				fmt.Sprintf("A %s destination has no field %s.", k.md.Type, invalid.Quote(name)))
		}
	}
	return builtinConfig{typ: k.md.Type}, nil
}

// Open is the engine's sender, shared by every subscription of the kind.
func (k builtinKind) Open(Config, Env) (Publisher, error) {
	return builtinPublisher{typ: k.md.Type, sender: k.sender}, nil
}

type builtinPublisher struct {
	typ    string
	sender Sender
}

// Send implements Publisher.
func (p builtinPublisher) Send(ctx context.Context, m Message) (Result, error) {
	if p.sender == nil {
		return Result{}, Fail(CodeInvalid, "a "+p.typ+" subscription is never sent to", nil)
	}
	return p.sender.Send(ctx, m)
}

// Close implements Publisher: the engine closes its own sender.
func (builtinPublisher) Close() error { return nil }
