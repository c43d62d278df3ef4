package dispatchertest

import (
	"bytes"
	"context"
	"net"
	"regexp"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/destination/desttest"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/internal/testfixtures/tcpproxy"
)

// KindTarget is a destination kind's target, reached: the destination the
// API is given, and the consumer's side of it.
type KindTarget struct {
	// Destination is the destination object, as the API takes it.
	Destination map[string]any
	// Answer is what an attempt the target confirmed records.
	Answer *regexp.Regexp
	// Receive waits for the next message at the target and returns it as
	// a consumer reads it; it fails t when none comes before ctx ends.
	Receive func(ctx context.Context, t testing.TB) desttest.Arrived
	// Unread is how many messages are at the target that Receive has not
	// returned. Once the engine has nothing left to send the count is
	// final: it is read from the target's state, with no wait.
	Unread func(t testing.TB) int
	// Down makes the target unreachable (its proxy closed, every
	// connection through it cut); Up brings it back on the same address.
	Down func()
	Up   func(t testing.TB)
}

// ThroughTheEngine is what the engine promises every kind added as a
// plug-in (each kind's TestEveryNewKindThroughTheEngine): a subscription
// made through the API's rules (the subscriptions registry, with the
// engine's kinds) and events published through the dispatcher:
//
//  1. an event arrives once, as a consumer reads it, its signature
//     verified by package receiver; its delivery succeeded on one
//     attempt, recorded with the target's confirmation;
//  2. an event of a type the subscription does not take makes no
//     delivery, and nothing of it arrives;
//  3. the target down, attempts are recorded as failed
//     (broker_unreachable or not_confirmed) in words a merchant may
//     read; the target back, the delivery succeeds and the event arrives,
//     once;
//  4. send_test_event arrives too, verified.
//
// What arrived is counted from the target's state once the engine is
// idle: nothing is proved absent by waiting. It runs in the full lane, as
// the subtest kind of t, beside the package's other parallel tests, on
// the target reach gives it.
func ThroughTheEngine(t *testing.T, kind string, reach func(t *testing.T) KindTarget) {
	storetest.FullLane(t, "a new kind through the engine")
	t.Run(kind, func(t *testing.T) {
		t.Parallel()
		throughTheEngine(t, kind, reach(t))
	})
}

// throughTheEngine makes ThroughTheEngine's checks on a kind's target.
func throughTheEngine(t *testing.T, kind string, target KindTarget) {
	e := New(t)
	e.Cfg.Schedule, e.Cfg.DeliveryTimeout = SlowSchedule, 2*time.Second
	sub, secret := e.SubscribeTo("m1", target.Destination, "", "payout.paid")
	if sub.Destination.Type() != kind {
		t.Fatalf("subscription's destination %v, want a %s one", sub.Destination.Summary, kind)
	}
	d, _ := e.Dispatcher()
	e.Run(d)
	v := Verifier(t, secret)

	// expect takes the target's next message and wants it to be event
	// eventID's (its body when body is not nil), signed with the secret.
	expect := func(what string, eventID uuid.UUID, body []byte) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		got := target.Receive(ctx, t)
		if id := got.Headers["webhook-id"]; id != eventID.String() {
			t.Fatalf("%s: the message that arrived is event %q's, want %s's (headers %v)", what, id, eventID, got.Headers)
		}
		if body != nil && !bytes.Equal(got.Body, body) {
			t.Errorf("%s: body arrived as %q, want the envelope %q", what, got.Body, body)
		}
		if err := v.VerifyMessage(got.Headers, got.Body); err != nil {
			t.Errorf("%s: VerifyMessage: %v (headers %v)", what, err, got.Headers)
		}
		if err := v.VerifyValues(got.Headers["webhook-id"], got.Headers["webhook-timestamp"], got.Headers["webhook-signature"], got.Body); err != nil {
			t.Errorf("%s: VerifyValues: %v", what, err)
		}
	}
	// nothingElse waits until the engine has nothing left to send, then
	// wants no message at the target beyond those taken.
	nothingElse := func(what string) {
		t.Helper()
		e.WaitIdle()
		if n := target.Unread(t); n != 0 {
			t.Errorf("%s: %d more messages at the target, want none", what, n)
		}
	}
	confirmed := func(what string, a store.Attempt) {
		t.Helper()
		if a.Error != nil || a.HTTPStatus != nil || !target.Answer.MatchString(a.ResponseBody) {
			t.Errorf("%s: attempt %d: error %v, status %v, body %q; want the target's confirmation (%s)",
				what, a.Number, a.Error, a.HTTPStatus, a.ResponseBody, target.Answer)
		}
	}

	// 1. An event arrives once, verified; one attempt, confirmed.
	ev := e.Publish(d, "m1", "payout.paid")
	dels := e.Deliveries(ev.ID)
	if len(dels) != 1 {
		t.Fatalf("%d deliveries of the event, want 1", len(dels))
	}
	expect("the event published", ev.ID, ev.Body)
	del := e.WaitSettled(dels[0].ID, 20*time.Second)
	if del.Status != store.DeliverySucceeded || len(del.Attempts) != 1 {
		t.Fatalf("delivery %s after %d attempts %v; want succeeded on one", del.Status, len(del.Attempts), AttemptErrors(del))
	}
	confirmed("the event published", del.Attempts[0])
	nothingElse("the event published")

	// 2. An event of another type: no delivery. That nothing of it
	// arrives is proved below: the next message is the next event's, and
	// nothing else is left at the target once the engine is idle.
	other := e.Publish(d, "m1", "payout.failed")
	if dels := e.Deliveries(other.ID); len(dels) != 0 {
		t.Errorf("an event of a type the subscription does not take made %d deliveries", len(dels))
	}

	// 3. The target down: failed attempts, in a merchant's words; back:
	// delivered, nothing lost.
	target.Down()
	ev = e.Publish(d, "m1", "payout.paid")
	id := e.Deliveries(ev.ID)[0].ID
	e.WaitFor("two failed attempts", 20*time.Second, func() bool { return len(e.Delivery(id).Attempts) >= 2 })
	target.Up(t)
	del = e.WaitSettled(id, 30*time.Second)
	if del.Status != store.DeliverySucceeded || len(del.Attempts) < 2 {
		t.Fatalf("delivery %s after %d attempts %v; want succeeded after failures", del.Status, len(del.Attempts), AttemptErrors(del))
	}
	for _, a := range del.Attempts[:len(del.Attempts)-1] {
		if a.Error == nil || (*a.Error != "broker_unreachable" && *a.Error != "not_confirmed") || a.HTTPStatus != nil {
			t.Errorf("attempt %d while down: error %v, status %v, body %q; want broker_unreachable or not_confirmed",
				a.Number, a.Error, a.HTTPStatus, a.ResponseBody)
		}
		desttest.CheckMerchantWords(t, a.ResponseBody)
	}
	confirmed("the attempt after the outage", del.Attempts[len(del.Attempts)-1])
	t.Logf("while down: %d attempts failed as %v, the first saying %q", len(del.Attempts)-1, AttemptErrors(del)[:len(del.Attempts)-1], del.Attempts[0].ResponseBody)
	expect("the event published while down", ev.ID, ev.Body)
	nothingElse("the outage")

	// 4. send_test_event.
	test, err := d.Publisher.SendTestEvent(context.Background(), "m1", sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	expect("send_test_event", test.EventID, nil)
	del = e.WaitSettled(test.ID, 20*time.Second)
	if del.Status != store.DeliverySucceeded || len(del.Attempts) != 1 {
		t.Fatalf("test delivery %s after %d attempts %v; want succeeded on one", del.Status, len(del.Attempts), AttemptErrors(del))
	}
	confirmed("send_test_event", del.Attempts[0])
	nothingElse("send_test_event")
}

// NeedService fails t, saying how to start it, when nothing listens on
// addr: a missing service fails the test, never skips it.
func NeedService(t *testing.T, name, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("%s on %s: %v (`bash .ci/services.sh` starts it)", name, addr, err)
	}
	_ = c.Close()
}

// Proxied is a tcpproxy to addr as a target's down and up.
func Proxied(t *testing.T, addr string) (*tcpproxy.Proxy, func(), func(testing.TB)) {
	p := tcpproxy.New(t, addr)
	return p, p.Down, p.Up
}
