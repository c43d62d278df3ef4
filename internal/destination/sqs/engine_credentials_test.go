package sqs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
	"github.com/webhookd/webhookd/internal/testfixtures/kindstest"
)

// subscribeAllowing is subscribeTo through a registry that allows the
// engine's credentials under queues.
func subscribeAllowing(e *dispatchertest.Env, queues []string, merchant string, destination map[string]any) store.Subscription {
	e.T.Helper()
	ctx := context.Background()
	if _, err := e.Store.Merchants.EnsureMerchant(ctx, merchant, dispatchertest.TestVersion); err != nil {
		e.T.Fatal(err)
	}
	raw, err := json.Marshal(destination)
	if err != nil {
		e.T.Fatal(err)
	}
	reg := subscriptions.NewRegistry(e.Store.Subscriptions, e.Store.Listeners, bytes.Repeat([]byte{9}, 32), subscriptions.Rules{AllowHTTPTargets: true, AllowPrivateTargets: true,
		EventTypes: append(dispatcher.DefaultEventTypes(), "payout.paid"), Kinds: kindstest.Registry(e.T, queues)})
	sub, _, err := reg.Create(ctx, merchant, subscriptions.Draft{Events: []string{"payout.paid"}, Destination: raw})
	if err != nil {
		e.T.Fatal(err)
	}
	return sub
}

// keyless is an sqs destination of queueURL without an access key.
func keyless(s *sqsServer, queueURL string) map[string]any {
	return map[string]any{"type": "sqs", "queue_url": queueURL, "region": "eu-west-1", "endpoint": s.endpoint()}
}

// TestSQSDestinationEngineCredentials: a destination without a key under
// an allowed prefix is sent with the process's own AWS credentials (here
// AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY) and arrives; a key given is
// used instead, even a wrong one; a queue the worker no longer allows is
// destination_invalid (the stored destination breaks the operator's rule
// now: nothing is sent) and a chain with no credentials auth_failed, each
// saying why.
func TestSQSDestinationEngineCredentials(t *testing.T) {
	engineAWS(t, accessKey)
	srv := newSQSServer(t)
	queueURL := srv.queue(t, false)
	allowed := []string{queuePrefix(srv)}
	e := dispatchertest.New(t)
	e.Cfg.DeliveryTimeout = 2 * time.Second
	sub := subscribeAllowing(e, allowed, "m1", keyless(srv, queueURL))
	if sub.Destination.Summary["credentials"] != "engine" || sub.Destination.Summary["access_key_id"] != nil {
		t.Fatalf("summary %v, want the engine's credentials and no key", sub.Destination.Summary)
	}
	subscribeAllowing(e, allowed, "m2", sqsDestination(srv, queueURL, "AKIAUNKNOWN"))
	d, _ := e.Dispatcher(func(c *dispatcher.Config) { c.Kinds = kindstest.Registry(t, allowed) })
	e.Run(d)

	ev := e.Publish(d, "m1", "payout.paid")
	del := e.WaitSettled(e.Deliveries(ev.ID)[0].ID, 20*time.Second)
	if del.Status != store.DeliverySucceeded || len(del.Attempts) != 1 {
		t.Fatalf("delivery %s %v, want one confirmed attempt", del.Status, dispatchertest.AttemptErrors(del))
	}
	msgs := srv.receive(t, queueURL, 1, 10*time.Second)
	if len(msgs) != 1 || aws.ToString(msgs[0].Body) != string(ev.Body) {
		t.Fatalf("%d messages, want the envelope once", len(msgs))
	}

	wrongKey := e.Publish(d, "m2", "payout.paid")
	checkAuthFailed(e, wrongKey.ID, "SQS answered HTTP 400") // its status and code, not its message

	t.Run("prefix no longer allowed", func(t *testing.T) {
		e := dispatchertest.New(t)
		e.Cfg.DeliveryTimeout = 2 * time.Second
		subscribeAllowing(e, allowed, "m1", keyless(srv, queueURL))
		d, _ := e.Dispatcher() // the operator took the prefix out
		e.Run(d)
		checkFailed(e, e.Publish(d, "m1", "payout.paid").ID, "destination_invalid", "destination.access_key_id is required")
	})
	t.Run("no credentials in the chain", func(t *testing.T) {
		engineAWS(t, "")
		e := dispatchertest.New(t)
		e.Cfg.DeliveryTimeout = 2 * time.Second
		subscribeAllowing(e, allowed, "m1", keyless(srv, queueURL))
		d, _ := e.Dispatcher(func(c *dispatcher.Config) { c.Kinds = kindstest.Registry(t, allowed) })
		e.Run(d)
		checkAuthFailed(e, e.Publish(d, "m1", "payout.paid").ID, "own AWS credentials")
	})
}

// checkAuthFailed waits for the event's first attempt and wants it
// auth_failed, its record naming why.
func checkAuthFailed(e *dispatchertest.Env, eventID uuid.UUID, why string) {
	e.T.Helper()
	checkFailed(e, eventID, "auth_failed", why)
}

// checkFailed waits for the event's first attempt and wants it failed
// with code, its record naming why.
func checkFailed(e *dispatchertest.Env, eventID uuid.UUID, code, why string) {
	e.T.Helper()
	id := e.Deliveries(eventID)[0].ID
	e.WaitFor("a failed attempt", 20*time.Second, func() bool { return len(e.Delivery(id).Attempts) >= 1 })
	a := e.Delivery(id).Attempts[0]
	if a.Error == nil || *a.Error != code || !strings.Contains(a.ResponseBody, why) {
		e.T.Errorf("attempt: error %v, body %q; want %s saying %q", a.Error, a.ResponseBody, code, why)
	}
}
