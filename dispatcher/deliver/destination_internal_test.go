package deliver

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/signer"
)

// countedClient counts its closes; the pool's rules are what is tested
// here, the brokers' clients each against its broker elsewhere.
type countedClient struct{ closed *atomic.Int32 }

func (c countedClient) publish(context.Context, message) (string, error) { return confirmedAnswer, nil }
func (c countedClient) close()                                           { c.closed.Add(1) }

// TestDestinationsKeepOneClientPerVersion: a subscription's client is
// kept while its destination is the same, closed when it changes, when
// the subscription is forgotten, when it idles too long, and past the
// bound.
func TestDestinationsKeepOneClientPerVersion(t *testing.T) {
	sealer, err := signer.NewSealer(bytes.Repeat([]byte{3}, 32))
	if err != nil {
		t.Fatal(err)
	}
	seal := func() []byte {
		b, err := sealer.Seal(`{"type":"rabbitmq","url":"amqp://h/","routing_key":"q"}`)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var built, closed atomic.Int32
	ds := newDestinations(SenderConfig{Timeout: time.Second, MaxConns: 1, MaxConnsPerHost: 1, Version: "test", AllowPrivate: true, AllowHTTP: true},
		nil, sealer, clock.System{})
	ds.max = 2
	ds.build = func(subscriptions.Destination, brokerDialer, time.Duration) (brokerClient, error) {
		built.Add(1)
		return countedClient{closed: &closed}, nil
	}
	now := time.Now()
	a, b, c, d := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	v1, v2 := seal(), seal()
	for range 3 {
		if _, err := ds.client(a, v1, now); err != nil {
			t.Fatal(err)
		}
	}
	if built.Load() != 1 || closed.Load() != 0 {
		t.Fatalf("same version: built %d, closed %d; want 1, 0", built.Load(), closed.Load())
	}
	if _, err := ds.client(a, v2, now); err != nil {
		t.Fatal(err)
	}
	if built.Load() != 2 || closed.Load() != 1 {
		t.Fatalf("new version: built %d, closed %d; want 2, 1", built.Load(), closed.Load())
	}
	ds.forget(a)
	if closed.Load() != 2 {
		t.Fatalf("forget: closed %d, want 2", closed.Load())
	}
	for i, id := range []uuid.UUID{a, b, c} {
		if _, err := ds.client(id, v1, now.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if len(ds.kept) != 2 || closed.Load() != 3 || ds.kept[a] != nil {
		t.Fatalf("past the bound: %d kept, %d closed, a kept %v; want 2, 3, a evicted", len(ds.kept), closed.Load(), ds.kept[a] != nil)
	}
	if _, err := ds.client(d, v1, now.Add(idleDestination+time.Minute)); err != nil {
		t.Fatal(err)
	}
	if len(ds.kept) != 1 || closed.Load() != 5 {
		t.Fatalf("idle: %d kept, %d closed; want 1 (the new one), 5", len(ds.kept), closed.Load())
	}
	ds.closeAll()
	if closed.Load() != 6 {
		t.Fatalf("closeAll: %d closed, want 6", closed.Load())
	}
}
