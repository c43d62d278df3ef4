package s3_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
)

// TestEveryNewKindThroughTheEngine: s3, a kind added as a plug-in,
// through the engine (dispatchertest.ThroughTheEngine): an event arrives
// once, its signature verified, its delivery confirmed on one attempt; an
// event of a type the subscription does not take makes no delivery; the
// target down, failed attempts in words a merchant may read, and back,
// the event, once; send_test_event arrives, verified.
func TestEveryNewKindThroughTheEngine(t *testing.T) {
	dispatchertest.ThroughTheEngine(t, "s3", reachS3)
}

// reachS3: the test's gofakes3 (newFakeS3), its bucket read by a
// consumer that lists it and reads each object it has not read yet.
func reachS3(t *testing.T) dispatchertest.KindTarget {
	f := newFakeS3(t)
	proxy, down, up := dispatchertest.Proxied(t, f.addr)
	return dispatchertest.KindTarget{
		Destination: map[string]any{"type": "s3", "bucket": testBucket, "region": testRegion,
			"access_key_id": testKeyID, "secret_access_key": testSecret, "endpoint": "http://" + proxy.Addr},
		Answer:  regexp.MustCompile(`^stored by S3 \(key [^,]+, ETag [0-9a-f]+\)$`),
		Receive: f.receive,
		Unread:  f.unread,
		Down:    down, Up: up,
	}
}

// TestBatchIsOneObject: an s3 subscription with a batch stores each batch
// as one object, the body an HTTP batch carries ({"data": [envelopes]})
// signed as it is, its key's {event_type} "batch"; every member's
// delivery is confirmed by that one put. A broker kind refuses a batch.
func TestBatchIsOneObject(t *testing.T) {
	f := newFakeS3(t)
	e := dispatchertest.New(t)
	raw, err := json.Marshal(map[string]any{"type": "s3", "bucket": testBucket, "region": testRegion,
		"access_key_id": testKeyID, "secret_access_key": testSecret, "endpoint": f.url()})
	if err != nil {
		t.Fatal(err)
	}
	// A batch of three goes once three are due, well before its wait.
	_, secret := e.SubscribeDraft("m1", subscriptions.Draft{Events: []string{"payout.paid"}, Destination: raw,
		Batch: &store.Batch{MaxSize: 3, MaxWaitMS: 10_000}})
	d, _ := e.Dispatcher()
	var events []store.Event
	for range 3 {
		events = append(events, e.Publish(d, "m1", "payout.paid"))
	}
	e.Run(d)
	for _, ev := range events {
		del := e.WaitSettled(e.Deliveries(ev.ID)[0].ID, 30*time.Second)
		if del.Status != store.DeliverySucceeded || len(del.Attempts) != 1 {
			t.Fatalf("delivery of %s: %s after %v, want one confirmed attempt", ev.ID, del.Status, dispatchertest.AttemptErrors(del))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := f.receive(ctx, t)
	if n := f.unread(t); n != 0 {
		t.Fatalf("%d more objects: the batch was not one object", n)
	}
	if !strings.HasPrefix(got.Key, "batch/") || got.Headers["webhook-batch-size"] != "3" {
		t.Errorf("object %s with headers %v, want a key under batch/ and webhook-batch-size 3", got.Key, got.Headers)
	}
	h := http.Header{}
	for name, v := range got.Headers {
		h.Set(name, v)
	}
	if err := dispatchertest.Verifier(t, secret).Verify(h, got.Body); err != nil {
		t.Fatalf("the batch's signature: %v", err)
	}
	var body struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(got.Body, &body); err != nil || len(body.Data) != 3 {
		t.Fatalf("body %s (%v), want the three envelopes under data", got.Body, err)
	}
	for i, ev := range events {
		if body.Data[i].ID != ev.ID.String() {
			t.Errorf("member %d is %s, want %s", i, body.Data[i].ID, ev.ID)
		}
	}

	// A kind whose message is one delivery takes no batch.
	_, _, err = subscriptions.NewRegistry(e.Store.Subscriptions, e.Store.Listeners, make([]byte, 32), subscriptions.Rules{
		AllowHTTPTargets: true, AllowPrivateTargets: true, EventTypes: []string{"payout.paid"}, Kinds: e.Cfg.Kinds}).
		Create(context.Background(), "m1", subscriptions.Draft{Events: []string{"payout.paid"},
			Destination: []byte(`{"type":"rabbitmq","url":"amqp://guest:guest@127.0.0.1:5672/","exchange":"webhooks"}`),
			Batch:       &store.Batch{MaxSize: 3}})
	var refused *invalid.Error
	if !errors.As(err, &refused) || refused.Param != "batch" {
		t.Errorf("a rabbitmq destination with a batch: %v, want refused naming batch", err)
	}
}
