package destination_test

import (
	"context"
	"encoding/json"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/destination"
)

// named answers every send with its name, as a built-in kind's engine
// sender would answer with the attempt's result.
type named string

func (n named) Send(context.Context, destination.Message) (destination.Result, error) {
	return destination.Result{Answer: string(n), Outcome: destination.OutcomeSuccess}, nil
}

// TestForChoosesTheKind: the pool chooses for a subscription, and no one
// else does: a stored destination by its type (a kind of the registry,
// or poll's stored form, which is never sent), else the built-in kind
// the subscription's own kind chooses; the built-in kinds stay out of
// what merchants may write.
func TestForChoosesTheKind(t *testing.T) {
	base, err := destination.NewRegistry(echoKind{})
	if err != nil {
		t.Fatal(err)
	}
	endpoint := destination.Builtin(destination.Metadata{Type: "webhook", Label: "HTTP", Short: "HTTP", Delivers: "a POST", ChosenBy: "endpoint",
		Batches: true}, named("http"))
	listener := destination.Builtin(destination.Metadata{Type: "listener", Label: "L", Short: "L", Delivers: "relayed", ChosenBy: "listener"}, named("relay"))
	poll := destination.Builtin(destination.Metadata{Type: "poll", Label: "Poll", Short: "Poll", Delivers: "nothing"}, nil)
	r, err := base.WithBuiltin(endpoint, listener, poll)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.WithBuiltin(destination.Builtin(destination.Metadata{Type: "webhook2", ChosenBy: "endpoint"}, nil)); err == nil {
		t.Error("two built-in kinds chosen by one subscription kind")
	}
	if _, err := destination.NewRegistry(endpoint); err == nil {
		t.Error("a built-in kind registered as a merchant's")
	}
	if got := r.Types(); !slices.Equal(got, []string{"echo"}) {
		t.Errorf("types %v: the built-in kinds are no type a merchant writes", got)
	}
	if _, _, err := r.Parse("destination", json.RawMessage(`{"type": "poll", "host": "x"}`)); err == nil {
		t.Error("poll's stored form took a field")
	}
	var d net.Dialer
	p, err := destination.NewPool(destination.PoolConfig{Registry: r, Unseal: func(b []byte) ([]byte, error) { return b, nil },
		Env: destination.Env{Dial: d.DialContext, Timeout: time.Second, Clock: clock.Or(nil)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if !p.Batches(destination.Subject{Kind: "endpoint"}) || p.Batches(destination.Subject{Kind: "listener"}) ||
		p.Batches(destination.Subject{Kind: "endpoint", Sealed: []byte(`{"type": "echo", "host": "a.example.com:7"}`)}) {
		t.Error("batches: want the endpoint's kind alone")
	}
	for _, tc := range []struct {
		name    string
		subject destination.Subject
		answer  string
		code    string
	}{
		{"an endpoint", destination.Subject{ID: uuid.New(), Kind: "endpoint"}, "http", ""},
		{"a listener", destination.Subject{ID: uuid.New(), Kind: "listener"}, "relay", ""},
		{"a stored destination", destination.Subject{ID: uuid.New(), Kind: "endpoint", Sealed: []byte(`{"type": "echo", "host": "a.example.com:7"}`)}, "echoed", ""},
		{"a poll subscription", destination.Subject{ID: uuid.New(), Kind: "endpoint", Sealed: []byte(`{"type": "poll"}`)}, "", destination.CodeInvalid},
		{"a stored type this build lacks", destination.Subject{ID: uuid.New(), Kind: "endpoint", Sealed: []byte(`{"type": "smtp"}`)}, "", destination.CodeInvalid},
		{"a subscription kind this build lacks", destination.Subject{ID: uuid.New(), Kind: "carrier pigeon"}, "", destination.CodeInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pub, err := p.For(tc.subject)
			if err != nil {
				t.Fatal(err)
			}
			res, err := pub.Send(context.Background(), destination.Message{Header: map[string][]string{"Webhook-Id": {"evt"}}})
			if err != nil {
				t.Fatalf("send: %v, want a result", err)
			}
			switch {
			case tc.code != "" && (res.Code == nil || *res.Code != tc.code):
				t.Fatalf("result %+v, want %s", res, tc.code)
			case tc.code == "" && (res.Code != nil || res.Answer != tc.answer || res.Outcome != destination.OutcomeSuccess):
				t.Fatalf("result %+v, want %q", res, tc.answer)
			}
		})
	}
}
