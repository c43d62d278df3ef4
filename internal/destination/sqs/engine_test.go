package sqs_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
)

// sqsDestination is an sqs destination of queueURL on s, signed with
// accessKey.
func sqsDestination(s *sqsServer, queueURL, accessKey string) map[string]any {
	return map[string]any{"type": "sqs", "queue_url": queueURL, "region": "eu-west-1",
		"access_key_id": accessKey, "secret_access_key": "secret", "endpoint": s.endpoint()}
}

// TestSQSDestination: a delivery is one message, its attributes verified
// by package receiver; the server stopped for ten seconds fails the
// attempts with broker_unreachable until it is back, and nothing is lost.
func TestSQSDestination(t *testing.T) {
	t.Parallel()
	srv := newSQSServer(t)
	queueURL := srv.queue(t, false)
	e := dispatchertest.New(t)
	e.Cfg.Schedule, e.Cfg.DeliveryTimeout = dispatchertest.SlowSchedule, 2*time.Second
	sub, secret := e.SubscribeTo("m1", sqsDestination(srv, queueURL, accessKey), "", "payout.paid")
	if sub.Destination.Type() != "sqs" || sub.URL != queueURL {
		t.Fatalf("subscription: destination %v, url %q; want sqs, the queue URL", sub.Destination.Summary, sub.URL)
	}
	d, _ := e.Dispatcher()
	e.Run(d)
	v := dispatchertest.Verifier(t, secret)

	ev := e.Publish(d, "m1", "payout.paid")
	del := e.WaitSettled(e.Deliveries(ev.ID)[0].ID, 20*time.Second)
	if del.Status != store.DeliverySucceeded || len(del.Attempts) != 1 || !strings.HasPrefix(del.Attempts[0].ResponseBody, "confirmed by broker (message id ") {
		t.Fatalf("delivery %s %v %+v; want one confirmed attempt", del.Status, dispatchertest.AttemptErrors(del), del.Attempts)
	}
	msgs := srv.receive(t, queueURL, 1, 10*time.Second)
	if len(msgs) != 1 || aws.ToString(msgs[0].Body) != string(ev.Body) {
		t.Fatalf("%d messages, want the envelope once", len(msgs))
	}
	attrs := arrived(msgs[0]).Headers
	if err := v.VerifyMessage(attrs, []byte(aws.ToString(msgs[0].Body))); err != nil {
		t.Errorf("VerifyMessage: %v (attributes %v)", err, attrs)
	}
	if attrs["webhook-id"] != ev.ID.String() || attrs["content-type"] != "application/json" || !strings.HasPrefix(attrs["user-agent"], "webhookd/") {
		t.Errorf("attributes %v", attrs)
	}

	// The server goes away for ten seconds, then comes back on the same
	// address.
	up := srv.Down(t)
	down := time.Now()
	ev = e.Publish(d, "m1", "payout.paid")
	id := e.Deliveries(ev.ID)[0].ID
	e.WaitFor("ten seconds of failed attempts", 40*time.Second, func() bool {
		return time.Since(down) >= 10*time.Second && len(e.Delivery(id).Attempts) >= 2
	})
	up()
	del = e.WaitSettled(id, 30*time.Second)
	dispatchertest.CheckBrokerAttempts(t, del, "broker_unreachable")
	msgs = srv.receive(t, queueURL, 1, 10*time.Second)
	if attrs := arrived(msgs[0]).Headers; attrs["webhook-id"] != ev.ID.String() || v.VerifyMessage(attrs, []byte(aws.ToString(msgs[0].Body))) != nil {
		t.Errorf("message after the outage: %v; want event %s verified", attrs, ev.ID)
	}
}

// TestSQSDestinationFailures: an access key SQS does not know is
// auth_failed and a queue that does not exist broker_refused, each
// retried on the schedule.
func TestSQSDestinationFailures(t *testing.T) {
	t.Parallel()
	srv := newSQSServer(t)
	queueURL := srv.queue(t, false)
	e := dispatchertest.New(t)
	e.Cfg.Schedule, e.Cfg.DeliveryTimeout = dispatchertest.SlowSchedule, 2*time.Second
	e.SubscribeTo("m1", sqsDestination(srv, queueURL, "AKIAUNKNOWN"), "", "payout.paid")
	e.SubscribeTo("m2", sqsDestination(srv, queuePrefix(srv)+"no-such-queue", accessKey), "", "payout.paid")
	d, _ := e.Dispatcher()
	e.Run(d)
	for merchant, code := range map[string]string{"m1": "auth_failed", "m2": "broker_refused"} {
		ev := e.Publish(d, merchant, "payout.paid")
		id := e.Deliveries(ev.ID)[0].ID
		e.WaitFor(merchant+" two attempts", 30*time.Second, func() bool { return len(e.Delivery(id).Attempts) >= 2 })
		del := e.Delivery(id)
		for _, a := range del.Attempts {
			if a.Error == nil || *a.Error != code {
				t.Errorf("%s attempt %d: %v %q, want %s", merchant, a.Number, a.Error, a.ResponseBody, code)
			}
		}
		if del.Status != store.DeliveryPending {
			t.Errorf("%s delivery %s, want pending (retried)", merchant, del.Status)
		}
	}
}

// TestSQSDestinationFIFO: an ordered subscription's messages to a FIFO
// queue keep each key's order.
func TestSQSDestinationFIFO(t *testing.T) {
	t.Parallel()
	srv := newSQSServer(t)
	queueURL := srv.queue(t, true)
	e := dispatchertest.New(t)
	e.Cfg.DeliveryTimeout = 2 * time.Second
	_, secret := e.SubscribeTo("m1", sqsDestination(srv, queueURL, accessKey), "payload.account", "payout.paid")
	d, _ := e.Dispatcher()
	e.Run(d)
	v := dispatchertest.Verifier(t, secret)
	const perKey = 5
	keys := []string{"acct_a", "acct_b"}
	for i := range perKey {
		for _, k := range keys {
			e.PublishPayload(d, "m1", map[string]any{"account": k, "n": i})
		}
	}
	next := map[string]int{}
	for _, m := range srv.receive(t, queueURL, perKey*len(keys), 30*time.Second) {
		attrs := arrived(m).Headers
		var env struct {
			Payload struct {
				Account string `json:"account"`
				N       int    `json:"n"`
			} `json:"payload"`
		}
		body := []byte(aws.ToString(m.Body))
		if err := errors.Join(json.Unmarshal(body, &env), v.VerifyMessage(attrs, body)); err != nil {
			t.Fatal(err)
		}
		if attrs["webhook-ordering-key"] != env.Payload.Account || env.Payload.N != next[env.Payload.Account] {
			t.Errorf("message key %q n %d; want key %q n %d", attrs["webhook-ordering-key"], env.Payload.N, env.Payload.Account, next[env.Payload.Account])
		}
		next[env.Payload.Account] = env.Payload.N + 1
	}
	for _, m := range srv.sends(queueURL) {
		if !slices.Contains(keys, m.MessageGroupID) || uuid.Validate(m.MessageDeduplicationID) != nil {
			t.Errorf("SendMessage group %q, deduplication id %q; want the ordering key and the delivery id", m.MessageGroupID, m.MessageDeduplicationID)
		}
	}
}

// TestSQSDestinationLostAnswer: SQS took a FIFO message but its answer was
// lost; the retry carries the same deduplication id (the delivery id), so
// the queue holds the message once.
func TestSQSDestinationLostAnswer(t *testing.T) {
	t.Parallel()
	srv := newSQSServer(t)
	queueURL := srv.queue(t, true)
	srv.LoseAnswers(1)
	e := dispatchertest.New(t)
	e.Cfg.Schedule, e.Cfg.DeliveryTimeout = dispatchertest.SlowSchedule, 2*time.Second
	e.SubscribeTo("m1", sqsDestination(srv, queueURL, accessKey), "", "payout.paid")
	d, _ := e.Dispatcher()
	e.Run(d)
	ev := e.Publish(d, "m1", "payout.paid")
	del := e.WaitSettled(e.Deliveries(ev.ID)[0].ID, 20*time.Second)
	dispatchertest.CheckBrokerAttempts(t, del, "broker_unreachable")
	sends := srv.sends(queueURL)
	if len(sends) != len(del.Attempts) {
		t.Fatalf("%d SendMessage requests for %d attempts", len(sends), len(del.Attempts))
	}
	for _, m := range sends {
		if m.MessageDeduplicationID != del.ID.String() || m.MessageGroupID != del.ID.String() {
			t.Errorf("SendMessage group %q, deduplication id %q; want the delivery id %s for both (unordered)", m.MessageGroupID, m.MessageDeduplicationID, del.ID)
		}
	}
	if msgs := srv.receive(t, queueURL, 1, 10*time.Second); len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	if extra := srv.Receive(context.Background(), t, queueURL, 10); len(extra) != 0 {
		t.Errorf("a second message: the retry was not deduplicated")
	}
}
