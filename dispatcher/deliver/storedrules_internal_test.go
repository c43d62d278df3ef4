package deliver

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/kafka"
	"github.com/webhookd/webhookd/internal/destination/rabbitmq"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/signer"
)

// TestStoredDestinationBreakingARuleIsNeverOpened: a destination stored
// by an older build, before a rule of this one existed (options in a
// rabbitmq URL, a broker in clear while the operator allows none), is
// refused at each attempt with its own code: no publisher is opened, so no
// library reads the smuggled option, and the record names the field, not
// its value (no path, no password). A destination within the rules is
// built as before.
func TestStoredDestinationBreakingARuleIsNeverOpened(t *testing.T) {
	sealer, err := signer.NewSealer(bytes.Repeat([]byte{5}, 32))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name           string
		destination    string
		allowPlaintext bool
		// code is the attempt's error code; "" when the client is built.
		code string
	}{
		{"cacertfile in a rabbitmq URL", `{"type":"rabbitmq","url":"amqps://u:s3cret@broker.example.com/v?cacertfile=/etc/hostname","exchange":"x"}`,
			true, destination.CodeInvalid},
		{"certfile and keyfile in a rabbitmq URL", `{"type":"rabbitmq","url":"amqps://u:s3cret@broker.example.com/?certfile=/dev/zero&keyfile=/dev/zero","exchange":"x"}`,
			true, destination.CodeInvalid},
		{"plaintext amqp while plaintext is off", `{"type":"rabbitmq","url":"amqp://u:s3cret@broker.example.com/","exchange":"x"}`,
			false, destination.CodePlaintext},
		{"kafka without TLS while plaintext is off", `{"type":"kafka","brokers":["broker.example.com:9092"],"topic":"t"}`,
			false, destination.CodePlaintext},
		{"plaintext amqp while plaintext is allowed", `{"type":"rabbitmq","url":"amqp://u:s3cret@broker.example.com/","exchange":"x"}`,
			true, ""},
		{"amqps within the rules", `{"type":"rabbitmq","url":"amqps://u:s3cret@broker.example.com/v","exchange":"x"}`,
			false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sealed, err := sealer.Seal(c.destination)
			if err != nil {
				t.Fatal(err)
			}
			var built atomic.Int32
			kinds, err := destination.NewRegistry(openCounted{Kind: rabbitmq.New(), opened: &built}, openCounted{Kind: kafka.New(), opened: &built})
			if err != nil {
				t.Fatal(err)
			}
			ds, err := newDestinations(SenderConfig{Timeout: time.Second, AllowHTTP: c.allowPlaintext, MaxConns: 1, MaxConnsPerHost: 1,
				Version: "test", Kinds: kinds}, nil, sealer, clock.System{})
			if err != nil {
				t.Fatal(err)
			}
			defer ds.closeAll()
			leased := store.LeasedDelivery{Delivery: store.Delivery{ID: uuid.New(), EventID: uuid.New(),
				SubscriptionID: uuid.New()}, Body: []byte(`{}`), SealedDestination: sealed}
			res, err := ds.send(context.Background(), outgoingOf(&leased, nil), Signing{}, nil)
			if err != nil {
				t.Fatalf("send: internal error %v, want an attempt", err)
			}
			if c.code == "" {
				// Opened, then failed to reach a broker that does not exist:
				// a network failure, not a refusal of the stored value.
				if built.Load() != 1 || (res.ErrCode != nil && strings.HasPrefix(*res.ErrCode, "destination_")) {
					t.Fatalf("attempt: code %v (%q), built %d; want the one publisher opened", res.ErrCode, res.Body, built.Load())
				}
				return
			}
			if res.ErrCode == nil || *res.ErrCode != c.code || built.Load() != 0 {
				t.Fatalf("attempt: code %v, body %q, clients built %d; want %s and none built", res.ErrCode, res.Body, built.Load(), c.code)
			}
			body := string(res.Body)
			if !strings.HasPrefix(body, c.code+": ") || !strings.Contains(body, "destination.") {
				t.Errorf("body %q: want the code and the field at fault", body)
			}
			for _, secret := range []string{"/etc/", "/dev/", "s3cret", "hostname"} {
				if strings.Contains(body, secret) {
					t.Errorf("body %q names %q", body, secret)
				}
			}
		})
	}
}

// openCounted is a kind whose publishers are counted as they are opened.
type openCounted struct {
	destination.Kind
	opened *atomic.Int32
}

func (k openCounted) Open(cfg destination.Config, env destination.Env) (destination.Publisher, error) {
	k.opened.Add(1)
	return k.Kind.Open(cfg, env)
}
