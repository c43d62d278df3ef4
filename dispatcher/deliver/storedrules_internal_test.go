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
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/signer"
)

// TestStoredDestinationBreakingARuleIsNeverOpened: a destination stored
// by an older build, before a rule of this one existed (options in a
// rabbitmq URL, a broker in clear while the operator allows none), is
// refused at each attempt with its own code: no client is built, so no
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
			true, subscriptions.CodeDestinationInvalid},
		{"certfile and keyfile in a rabbitmq URL", `{"type":"rabbitmq","url":"amqps://u:s3cret@broker.example.com/?certfile=/dev/zero&keyfile=/dev/zero","exchange":"x"}`,
			true, subscriptions.CodeDestinationInvalid},
		{"plaintext amqp while plaintext is off", `{"type":"rabbitmq","url":"amqp://u:s3cret@broker.example.com/","exchange":"x"}`,
			false, subscriptions.CodeDestinationPlaintext},
		{"kafka without TLS while plaintext is off", `{"type":"kafka","brokers":["broker.example.com:9092"],"topic":"t"}`,
			false, subscriptions.CodeDestinationPlaintext},
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
			ds := newDestinations(SenderConfig{Timeout: time.Second, AllowHTTP: c.allowPlaintext, MaxConns: 1, MaxConnsPerHost: 1,
				Version: "test"}, nil, sealer, clock.System{})
			var built atomic.Int32
			var closed atomic.Int32
			ds.build = func(subscriptions.Destination, brokerDialer, time.Duration) (brokerClient, error) {
				built.Add(1)
				return countedClient{closed: &closed}, nil
			}
			res, err := ds.send(context.Background(), store.LeasedDelivery{Delivery: store.Delivery{ID: uuid.New(), EventID: uuid.New(),
				SubscriptionID: uuid.New()}, Body: []byte(`{}`), SealedDestination: sealed}, Signing{}, nil)
			if err != nil {
				t.Fatalf("send: internal error %v, want an attempt", err)
			}
			if c.code == "" {
				if res.ErrCode != nil || built.Load() != 1 {
					t.Fatalf("attempt failed with %v (%q), built %d; want it sent by the one client built", *res.ErrCode, res.Body, built.Load())
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
