package kafka_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
)

// pollRecords reads records until n came or timeout passed.
func pollRecords(t *testing.T, cl *kgo.Client, n int, timeout time.Duration) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%d records of %d within %v", len(out), n, timeout)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// TestKafkaDestination: a delivery is one record, keyed by the event id,
// its headers verified by package receiver; produce requests cut off for a
// while (the broker closing each connection) fail the attempts until they
// go through again, nothing lost.
func TestKafkaDestination(t *testing.T) {
	t.Parallel()
	cluster := newCluster(t, "payouts")
	var down atomic.Bool
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if down.Load() {
			return nil, errors.New("broker down"), true
		}
		return nil, nil, false
	})
	e := dispatchertest.New(t)
	e.Cfg.Schedule, e.Cfg.DeliveryTimeout = dispatchertest.SlowSchedule, 2*time.Second
	_, secret := e.SubscribeTo("m1", map[string]any{"type": "kafka", "brokers": cluster.ListenAddrs(), "topic": "payouts"}, "", "payout.paid")
	d, _ := e.Dispatcher()
	e.Run(d)
	v := dispatchertest.Verifier(t, secret)
	consumer := newConsumer(t, cluster, "payouts").client

	ev := e.Publish(d, "m1", "payout.paid")
	r := pollRecords(t, consumer, 1, 10*time.Second)[0]
	if err := v.VerifyMessage(arrived(r).Headers, r.Value); err != nil {
		t.Errorf("VerifyMessage: %v", err)
	}
	if string(r.Key) != ev.ID.String() || string(r.Value) != string(ev.Body) {
		t.Errorf("record key %q, value %s; want the event id and the envelope", r.Key, r.Value)
	}
	del := e.WaitSettled(e.Deliveries(ev.ID)[0].ID, 10*time.Second)
	if del.Status != store.DeliverySucceeded || del.Attempts[0].ResponseBody != "confirmed by broker" {
		t.Fatalf("delivery %s, attempts %+v", del.Status, del.Attempts)
	}

	down.Store(true)
	ev = e.Publish(d, "m1", "payout.paid")
	id := e.Deliveries(ev.ID)[0].ID
	e.WaitFor("two failed attempts", 20*time.Second, func() bool { return len(e.Delivery(id).Attempts) >= 2 })
	down.Store(false)
	del = e.WaitSettled(id, 30*time.Second)
	if del.Status != store.DeliverySucceeded {
		t.Fatalf("delivery after the outage: %s %v", del.Status, dispatchertest.AttemptErrors(del))
	}
	for _, a := range del.Attempts[:len(del.Attempts)-1] {
		if a.Error == nil || (*a.Error != "broker_unreachable" && *a.Error != "not_confirmed") {
			t.Errorf("attempt %d during the outage: %v %q", a.Number, a.Error, a.ResponseBody)
		}
	}
	// At least once: the record of an attempt whose answer was lost may
	// be there twice, never missing.
	got := pollRecords(t, consumer, 1, 10*time.Second)
	if string(got[len(got)-1].Key) != ev.ID.String() {
		t.Errorf("last record key %q, want %s", got[len(got)-1].Key, ev.ID)
	}
}

// TestKafkaDestinationOrdered: an ordered subscription's records are keyed
// by the ordering key and keep each key's order.
func TestKafkaDestinationOrdered(t *testing.T) {
	t.Parallel()
	cluster := newCluster(t, "payouts")
	e := dispatchertest.New(t)
	e.Cfg.Schedule, e.Cfg.DeliveryTimeout = dispatchertest.SlowSchedule, 2*time.Second
	e.SubscribeTo("m1", map[string]any{"type": "kafka", "brokers": cluster.ListenAddrs(), "topic": "payouts"}, "payload.account", "payout.paid")
	d, _ := e.Dispatcher()
	e.Run(d)
	consumer := newConsumer(t, cluster, "payouts").client
	const perKey = 10
	keys := []string{"acct_a", "acct_b", "acct_c"}
	for i := range perKey {
		for _, k := range keys {
			e.PublishPayload(d, "m1", map[string]any{"account": k, "n": i})
		}
	}
	next := map[string]int{}
	for _, r := range pollRecords(t, consumer, perKey*len(keys), 30*time.Second) {
		var env struct {
			Payload struct {
				Account string `json:"account"`
				N       int    `json:"n"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(r.Value, &env); err != nil {
			t.Fatal(err)
		}
		if string(r.Key) != env.Payload.Account {
			t.Errorf("record key %q, want the ordering key %q", r.Key, env.Payload.Account)
		}
		if env.Payload.N != next[env.Payload.Account] {
			t.Errorf("%s: record %d came when %d was next", env.Payload.Account, env.Payload.N, next[env.Payload.Account])
		}
		next[env.Payload.Account] = env.Payload.N + 1
	}
	for _, k := range keys {
		if next[k] != perKey {
			t.Errorf("%s: %d records in order, want %d", k, next[k], perKey)
		}
	}
}

// TestKafkaDestinationAuthFailed: SASL credentials the cluster refuses are
// auth_failed, retried. kfake closes the connection on a wrong password
// where Kafka answers SASL_AUTHENTICATION_FAILED first: the control below
// answers as Kafka does.
func TestKafkaDestinationAuthFailed(t *testing.T) {
	t.Parallel()
	cluster := newCluster(t, "payouts", kfake.EnableSASL(), kfake.Superuser("PLAIN", user, password))
	answerWrongPasswords(cluster)
	e := dispatchertest.New(t)
	e.Cfg.Schedule, e.Cfg.DeliveryTimeout = dispatchertest.SlowSchedule, 2*time.Second
	for i, password := range []string{"wrong-password", "right-password"} {
		e.SubscribeTo(fmt.Sprint("m", i), map[string]any{"type": "kafka", "brokers": cluster.ListenAddrs(), "topic": "payouts",
			"sasl": map[string]any{"mechanism": "plain", "username": "webhookd", "password": password}}, "", "payout.paid")
	}
	d, _ := e.Dispatcher()
	e.Run(d)
	ev := e.Publish(d, "m0", "payout.paid")
	id := e.Deliveries(ev.ID)[0].ID
	e.WaitFor("two attempts", 20*time.Second, func() bool { return len(e.Delivery(id).Attempts) >= 2 })
	del := e.Delivery(id)
	for _, a := range del.Attempts {
		if a.Error == nil || *a.Error != "auth_failed" {
			t.Errorf("attempt %d: %v %q, want auth_failed", a.Number, a.Error, a.ResponseBody)
		}
	}
	if del.Status != store.DeliveryPending {
		t.Errorf("delivery %s, want pending (retried)", del.Status)
	}
	ev = e.Publish(d, "m1", "payout.paid")
	if del := e.WaitSettled(e.Deliveries(ev.ID)[0].ID, 10*time.Second); del.Status != store.DeliverySucceeded {
		t.Errorf("with the right password: %s %v", del.Status, dispatchertest.AttemptErrors(del))
	}
}
