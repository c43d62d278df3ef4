package deliver_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dispatcher/deliver"
	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/desttest"
	"github.com/webhookd/webhookd/internal/destination/listen"
	"github.com/webhookd/webhookd/internal/listener"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
)

// toListener is the listener kind's publisher sending for one listener
// subscription: what the worker's message carries (its Subject).
type toListener struct {
	destination.Publisher
	subject destination.Subject
}

func (p toListener) Send(ctx context.Context, m destination.Message) (destination.Result, error) {
	m.Subject = p.subject
	return p.Publisher.Send(ctx, m)
}

// TestListenerConformance runs the conformance suite on the listener
// kind, sent by the engine's relay through the machine's Redis to a
// connection held as an API process holds `webhookd listen`'s: the
// command gone (nobody takes the relayed request: timeout) then back
// (the message arrives), and a listener that ended, which ends its
// delivery for good with listener_closed.
func TestListenerConformance(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	live, _ := e.Listen("m1", time.Now().Add(time.Hour))
	// Its command gone for longer than the grace: the relay ends it.
	ended, _ := e.Listen("m1", time.Now().Add(-time.Minute))
	relay, err := deliver.RelaySender(e.RC, e.Store.Listeners, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	kind := listen.New(relay)
	arrived := make(chan listener.Delivery, 100)
	hold := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		got := e.HoldConnection(ctx, live, func(int, listener.Delivery) listener.Answer {
			return listener.Answer{Status: http.StatusOK, Body: "ok"}
		})
		go func() {
			for d := range got {
				arrived <- d
			}
		}()
		return cancel
	}
	stop := hold()
	t.Cleanup(func() { stop() })
	subjectOf := func(l store.Listener) destination.Subject {
		return destination.Subject{ID: l.ID, MerchantID: "m1", Kind: string(store.KindListener)}
	}
	open := func(t testing.TB, config string) destination.Publisher {
		pub, err := kind.Open(nil, destination.Env{})
		if err != nil {
			t.Fatal(err)
		}
		if config == "ended" {
			return toListener{Publisher: pub, subject: subjectOf(ended)}
		}
		return toListener{Publisher: pub, subject: subjectOf(live)}
	}
	desttest.Run(t, desttest.Case{
		Kind:   kind,
		Config: "live",
		Open:   open,
		Receive: func(ctx context.Context, t testing.TB) desttest.Arrived {
			select {
			case d := <-arrived:
				return desttest.Arrived{Body: []byte(d.Body), Headers: d.Headers}
			case <-ctx.Done():
				t.Fatal("nothing was relayed")
				return desttest.Arrived{}
			}
		},
		Down: func(testing.TB) func() {
			stop()
			return func() { stop = hold() }
		},
		Codes: desttest.Codes{Unreachable: []string{"timeout"}},
		NotApplicable: map[string]string{
			"wrong credentials": "a listener has no credentials of its own: the command proves the merchant's API key when it " +
				"opens the listener (admin's listener tests), and the relay speaks only to the engine's Redis",
			"answer past the read bound": "the command's answer comes in one bounded frame of the listener protocol and the relay " +
				"keeps its first 1 KiB (answered)",
			"closed publisher sends nothing": "the kind's publisher is the worker's one relay, closed with the worker; a listener " +
				"that ends is the kind's own notion of closed (listener_closed, below)",
		},
	})
	t.Run("ended listener", func(t *testing.T) {
		pub := open(t, "ended")
		res, err := pub.Send(context.Background(), destination.Message{EventID: "evt_ended", Body: []byte(`{}`),
			Header: http.Header{"Content-Type": {"application/json"}}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Code == nil || *res.Code != listener.ClosedError || !res.Final || res.Outcome != destination.OutcomeBlocked {
			t.Fatalf("result %+v: want listener_closed, final", res)
		}
	})
}
