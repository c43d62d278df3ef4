package dispatchertest

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/listener"
	"github.com/webhookd/webhookd/internal/store"
)

// Listen creates a listener subscription of merchant, live until
// expiresAt, and returns it with its secret.
func (e *Env) Listen(merchant string, expiresAt time.Time) (store.Listener, string) {
	e.T.Helper()
	secret, sealed := e.MerchantSecret(merchant)
	l, err := e.Store.Listeners.CreateListener(context.Background(), store.NewListener{MerchantID: merchant, Events: []string{"*"}, ExpiresAt: expiresAt}, sealed)
	if err != nil {
		e.T.Fatal(err)
	}
	return l, secret
}

// HoldConnection plays the API process holding the listener's WebSocket:
// it waits on the listener's channel, takes the relayed deliveries from
// Redis when the relay's publish wakes it, hands each to answer, and
// pushes the answer back where the worker waits for it. It looks at the
// list only when woken, so that a relay that pushed without publishing
// would have its deliveries time out.
func (e *Env) HoldConnection(ctx context.Context, l store.Listener, answer func(n int, d listener.Delivery) listener.Answer) <-chan listener.Delivery {
	e.T.Helper()
	ps := e.RC.Subscribe(ctx, listener.DeliveriesChannel(l.ID))
	// The subscription's confirmation: a publish from now on reaches it.
	if _, err := ps.Receive(ctx); err != nil {
		e.T.Fatalf("subscribe to the listener's channel: %v", err)
	}
	wakes := ps.Channel()
	got := make(chan listener.Delivery, 100)
	go func() {
		defer ps.Close()
		for n := 1; ; {
			select {
			case <-ctx.Done():
				return
			case <-wakes:
			}
			for {
				popped, err := e.RC.LPop(ctx, listener.DeliveriesKey(l.ID)).Result()
				if errors.Is(err, redis.Nil) {
					break
				}
				if err != nil {
					return
				}
				var d listener.Delivery
				if err := json.Unmarshal([]byte(popped), &d); err != nil {
					e.T.Errorf("relayed delivery is not JSON: %v", err)
					return
				}
				got <- d
				a := answer(n, d)
				n++
				a.Type, a.ID = listener.TypeAnswer, d.ID
				b, _ := json.Marshal(a)
				e.RC.RPush(ctx, listener.AnswerKey(d.ID), b)
			}
		}
	}()
	return got
}
