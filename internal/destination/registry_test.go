package destination_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/invalid"
)

// echoKind is a kind of two fields, one secret, for the registry's rules.
type echoKind struct{}

type echoConfig struct {
	Host     string `json:"host"`
	Password string `json:"password,omitempty"`
}

func (echoKind) Metadata() destination.Metadata {
	return destination.Metadata{Type: "echo", Label: "Echo", Short: "Echo", Delivers: "nothing",
		Fields: []destination.Field{{Name: "host", Label: "Host", Type: destination.FieldString, Required: true},
			{Name: "password", Label: "Password", Type: destination.FieldString, Secret: true}}}
}

func (echoKind) Parse(param string, raw json.RawMessage) (destination.Config, error) {
	var c echoConfig
	if err := destination.Decode(param, raw, &c); err != nil {
		return nil, err
	}
	if _, err := destination.HostPort(param+".host", c.Host, "echo.example.com:7"); err != nil {
		return nil, err
	}
	return c, nil
}

func (echoKind) Open(cfg destination.Config, _ destination.Env) (destination.Publisher, error) {
	return &echoPublisher{host: cfg.(echoConfig).Host}, nil
}

// echoPublisher counts what is asked of it.
type echoPublisher struct {
	host   string
	closed atomic.Bool
}

func (p *echoPublisher) Send(context.Context, destination.Message) (destination.Result, error) {
	if p.closed.Load() {
		return destination.Result{}, errors.New("closed")
	}
	return destination.Result{Answer: "echoed"}, nil
}

func (p *echoPublisher) Close() error { p.closed.Store(true); return nil }

func (c echoConfig) Summary() map[string]any {
	return map[string]any{"host": c.Host, "password": destination.Masked}
}
func (c echoConfig) Target() string                   { return "echo://" + c.Host }
func (c echoConfig) Addresses() []destination.Address { return nil }
func (c echoConfig) Plaintext() string {
	if strings.HasPrefix(c.Host, "plain.") {
		return "host"
	}
	return ""
}

func TestRegistryParse(t *testing.T) {
	r, err := destination.NewRegistry(echoKind{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, raw, field, rule string
	}{
		{"a type unknown", `{"type": "smtp"}`, "destination.type", "destination_type_unknown"},
		{"no type", `{"host": "a:1"}`, "destination.type", invalid.RuleMissing},
		{"not an object", `"echo"`, "destination", "destination_not_object"},
		{"a field the kind does not list", `{"type": "echo", "host": "a:1", "tls_ca": "/etc/ssl"}`, "destination.tls_ca", "destination_field_unknown"},
		{"a field of the wrong JSON type", `{"type": "echo", "host": 7}`, "destination.host", "destination_field_invalid"},
		{"the kind's own rule", `{"type": "echo", "host": "no-port"}`, "destination.host", "destination_broker_invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := r.Parse("destination", json.RawMessage(tc.raw))
			var bad *invalid.Error
			if !errors.As(err, &bad) || bad.Param != tc.field || bad.Rule != tc.rule {
				t.Fatalf("Parse: %v, want %s on %s", err, tc.rule, tc.field)
			}
		})
	}
	typ, cfg, err := r.Parse("destination", json.RawMessage(`{"type": "echo", "host": "echo.example.com:7", "password": "hunter2"}`))
	if err != nil || typ != "echo" {
		t.Fatalf("Parse: %q %v", typ, err)
	}
	stored, err := destination.Encode(typ, cfg)
	if err != nil || !strings.Contains(string(stored), `"type":"echo"`) {
		t.Fatalf("Encode: %s %v", stored, err)
	}
	if _, again, err := r.Parse("destination", stored); err != nil || again.(echoConfig) != cfg.(echoConfig) {
		t.Fatalf("the stored form reads back as %v, %v", again, err)
	}
}

func TestRegistryRefusesTwoKindsOfOneType(t *testing.T) {
	if _, err := destination.NewRegistry(echoKind{}, echoKind{}); err == nil {
		t.Fatal("two kinds of type echo registered")
	}
}
