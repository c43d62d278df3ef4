package pubsub_test

import (
	"encoding/json"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/grpc/codes"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
	"github.com/webhookd/webhookd/internal/testfixtures/tcpproxy"
)

// pubSubDestination is a destination of the test topic (newPubSub) at
// endpoint, as an emulator.
func pubSubDestination(endpoint string) map[string]any {
	return map[string]any{"type": "gcp_pubsub", "project_id": project, "topic_id": topic, "endpoint": endpoint}
}

// TestPubSubDestination: a delivery is one message, its attributes
// verified by package receiver; the server unreachable for a while (its
// proxy down) fails the attempts until it is back, nothing lost.
func TestPubSubDestination(t *testing.T) {
	t.Parallel()
	srv := newPubSub(t)
	proxy := tcpproxy.New(t, srv.Addr)
	e := dispatchertest.New(t)
	e.Cfg.Schedule, e.Cfg.DeliveryTimeout = dispatchertest.SlowSchedule, 2*time.Second
	_, secret := e.SubscribeTo("m1", pubSubDestination(proxy.Addr), "", "payout.paid")
	d, _ := e.Dispatcher()
	e.Run(d)
	v := dispatchertest.Verifier(t, secret)

	ev := e.Publish(d, "m1", "payout.paid")
	del := e.WaitSettled(e.Deliveries(ev.ID)[0].ID, 20*time.Second)
	if del.Status != store.DeliverySucceeded {
		t.Fatalf("delivery %s %v", del.Status, dispatchertest.AttemptErrors(del))
	}
	msgs := srv.Messages()
	if len(msgs) != 1 || string(msgs[0].Data) != string(ev.Body) {
		t.Fatalf("%d messages, want the envelope once", len(msgs))
	}
	if err := v.VerifyMessage(msgs[0].Attributes, msgs[0].Data); err != nil {
		t.Errorf("VerifyMessage: %v (attributes %v)", err, msgs[0].Attributes)
	}

	proxy.Down()
	ev = e.Publish(d, "m1", "payout.paid")
	id := e.Deliveries(ev.ID)[0].ID
	e.WaitFor("two failed attempts", 30*time.Second, func() bool { return len(e.Delivery(id).Attempts) >= 2 })
	proxy.Up(t)
	del = e.WaitSettled(id, 30*time.Second)
	if del.Status != store.DeliverySucceeded {
		t.Fatalf("delivery after the outage: %s %v", del.Status, dispatchertest.AttemptErrors(del))
	}
	for _, a := range del.Attempts[:len(del.Attempts)-1] {
		if a.Error == nil || (*a.Error != "broker_unreachable" && *a.Error != "not_confirmed") {
			t.Errorf("attempt %d during the outage: %v %q", a.Number, a.Error, a.ResponseBody)
		}
	}
	if msgs = srv.Messages(); len(msgs) < 2 || msgs[len(msgs)-1].Attributes["webhook-id"] != ev.ID.String() {
		t.Errorf("%d messages; the last not event %s", len(msgs), ev.ID)
	}
}

// TestPubSubDestinationOrdered: an ordered subscription's messages carry
// the ordering key and keep each key's order.
func TestPubSubDestinationOrdered(t *testing.T) {
	t.Parallel()
	srv := newPubSub(t)
	e := dispatchertest.New(t)
	e.Cfg.DeliveryTimeout = 2 * time.Second
	e.SubscribeTo("m1", pubSubDestination(srv.Addr), "payload.account", "payout.paid")
	d, _ := e.Dispatcher()
	e.Run(d)
	const perKey = 5
	keys := []string{"acct_a", "acct_b"}
	for i := range perKey {
		for _, k := range keys {
			e.PublishPayload(d, "m1", map[string]any{"account": k, "n": i})
		}
	}
	e.WaitFor("every message", 30*time.Second, func() bool { return len(srv.Messages()) >= perKey*len(keys) })
	next := map[string]int{}
	for _, m := range srv.Messages() {
		var env struct {
			Payload struct {
				Account string `json:"account"`
				N       int    `json:"n"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(m.Data, &env); err != nil {
			t.Fatal(err)
		}
		if m.OrderingKey != env.Payload.Account || env.Payload.N != next[env.Payload.Account] {
			t.Errorf("message key %q n %d; want key %q n %d", m.OrderingKey, env.Payload.N, env.Payload.Account, next[env.Payload.Account])
		}
		next[env.Payload.Account] = env.Payload.N + 1
	}
}

// TestPubSubDestinationAuthFailed: a publish the service refuses as
// unauthenticated (pstest answers as Pub/Sub does for a key it does not
// accept) is auth_failed, retried.
func TestPubSubDestinationAuthFailed(t *testing.T) {
	t.Parallel()
	srv := newPubSub(t, pstest.WithErrorInjection("Publish", codes.Unauthenticated, "Request had invalid authentication credentials."))
	e := dispatchertest.New(t)
	e.Cfg.Schedule, e.Cfg.DeliveryTimeout = dispatchertest.SlowSchedule, 2*time.Second
	e.SubscribeTo("m1", pubSubDestination(srv.Addr), "", "payout.paid")
	d, _ := e.Dispatcher()
	e.Run(d)
	ev := e.Publish(d, "m1", "payout.paid")
	id := e.Deliveries(ev.ID)[0].ID
	e.WaitFor("two attempts", 30*time.Second, func() bool { return len(e.Delivery(id).Attempts) >= 2 })
	del := e.Delivery(id)
	for _, a := range del.Attempts {
		if a.Error == nil || *a.Error != "auth_failed" {
			t.Errorf("attempt %d: %v %q, want auth_failed", a.Number, a.Error, a.ResponseBody)
		}
	}
	if del.Status != store.DeliveryPending {
		t.Errorf("delivery %s, want pending (retried)", del.Status)
	}
}
