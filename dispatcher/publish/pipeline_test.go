package publish_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
	"github.com/webhookd/webhookd/producer"
)

// TestFanOutMatchesSubscriptions publishes one event and checks that
// exactly the enabled, undeleted subscriptions of that merchant whose
// filter names the type (or is "*") get a delivery, and that each receives
// the envelope with valid Standard Webhooks headers; a disabled one gets a
// skipped delivery, never attempted.
func TestFanOutMatchesSubscriptions(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	ctx := context.Background()
	rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusNoContent))
	exact, exactSecret := e.Subscribe("m1", rcv.URL+"/exact", "payout.paid", "payout.failed")
	star, starSecret := e.Subscribe("m1", rcv.URL+"/star", "*")
	other, _ := e.Subscribe("m1", rcv.URL+"/other", "payout.created")
	disabled, _ := e.Subscribe("m1", rcv.URL+"/disabled", "payout.paid")
	deleted, _ := e.Subscribe("m1", rcv.URL+"/deleted", "*")
	foreign, _ := e.Subscribe("m2", rcv.URL+"/foreign", "*")
	off := store.SubscriptionDisabled
	if _, err := e.Store.Subscriptions.UpdateSubscription(ctx, "m1", disabled.ID, store.SubscriptionUpdate{Status: &off}); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.Subscriptions.DeleteSubscription(ctx, "m1", deleted.ID); err != nil {
		t.Fatal(err)
	}

	d, _ := e.Dispatcher()
	e.Run(d)
	ev := e.Publish(d, "m1", "payout.paid")

	ds := e.Deliveries(ev.ID)
	ds = slices.DeleteFunc(ds, func(del store.Delivery) bool {
		if del.SubscriptionID != disabled.ID {
			return false
		}
		if del.Status != store.DeliverySkipped || del.NextAttemptAt != nil || del.AttemptCount != 0 {
			t.Errorf("delivery to the disabled subscription: %+v, want skipped with nothing due", del)
		}
		return true
	})
	if len(ds) != 2 {
		t.Fatalf("%d deliveries besides the skipped one, want 2", len(ds))
	}
	var got []uuid.UUID
	for _, del := range ds {
		got = append(got, del.SubscriptionID)
		if del.Test || del.EventType != "payout.paid" || del.MerchantID != "m1" {
			t.Errorf("delivery %+v: wrong event type, merchant or test flag", del)
		}
		sec, nsec := del.ID.Time().UnixTime()
		if del.ID.Version() != 7 || !del.CreatedAt.Equal(time.Unix(sec, nsec)) || !del.CreatedAt.Equal(ev.CreatedAt) {
			t.Errorf("delivery id %s (created %s) is not a UUIDv7 of the event's instant %s", del.ID, del.CreatedAt, ev.CreatedAt)
		}
	}
	want := []uuid.UUID{exact.ID, star.ID}
	slices.SortFunc(got, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
	slices.SortFunc(want, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
	if !slices.Equal(got, want) {
		t.Fatalf("deliveries to %v, want exactly %v (not other %s, disabled %s, deleted %s, foreign %s)",
			got, want, other.ID, disabled.ID, deleted.ID, foreign.ID)
	}
	for _, del := range ds {
		if s := e.WaitSettled(del.ID, 5*time.Second); s.Status != store.DeliverySucceeded || s.AttemptCount != 1 {
			t.Fatalf("delivery %s: status %s after %d attempts, want succeeded after 1", del.ID, s.Status, s.AttemptCount)
		}
	}

	reqs := rcv.Got()
	if len(reqs) != 2 {
		t.Fatalf("receiver got %d requests, want 2", len(reqs))
	}
	secrets := map[string]string{"/exact": exactSecret, "/star": starSecret}
	for _, r := range reqs {
		wh, err := standardwebhooks.NewWebhook(secrets[r.Path])
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(r.Body, r.Header); err != nil {
			t.Errorf("%s: Standard Webhooks verification failed: %v (headers %v)", r.Path, err, r.Header)
		}
		checkDelivery(t, r, ev, `{"id":"po_1","status":"paid"}`)
	}
}

// checkDelivery checks the headers and envelope of spec 6.2 and 6.3.
func checkDelivery(t *testing.T, r dispatchertest.Received, ev store.Event, wantPayload string) {
	t.Helper()
	h := r.Header
	if h.Get("Content-Type") != "application/json" {
		t.Errorf("content-type %q", h.Get("Content-Type"))
	}
	if h.Get("webhook-id") != ev.ID.String() {
		t.Errorf("webhook-id %q, want the event id %s", h.Get("webhook-id"), ev.ID)
	}
	ts, err := strconv.ParseInt(h.Get("webhook-timestamp"), 10, 64)
	if err != nil || time.Since(time.Unix(ts, 0)).Abs() > time.Minute {
		t.Errorf("webhook-timestamp %q is not the attempt's Unix time", h.Get("webhook-timestamp"))
	}
	if ua := h.Get("User-Agent"); ua != "webhookd/test" {
		t.Errorf("user-agent %q", ua)
	}
	if string(r.Body) != string(ev.Body) {
		t.Errorf("body %s differs from the stored envelope %s", r.Body, ev.Body)
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(r.Body, &env); err != nil {
		t.Fatalf("body is not JSON: %v", err)
	}
	var keys []string
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"api_version", "date", "id", "payload", "type"}) {
		t.Errorf("envelope fields %v", keys)
	}
	var date string
	_ = json.Unmarshal(env["date"], &date)
	if dt, err := time.Parse(time.RFC3339Nano, date); err != nil || !dt.Equal(ev.CreatedAt) || date[len(date)-1] != 'Z' {
		t.Errorf("date %q, want %s in UTC", date, ev.CreatedAt)
	}
	if string(env["api_version"]) != `"`+dispatchertest.TestVersion+`"` || string(env["payload"]) != wantPayload {
		t.Errorf("api_version %s payload %s", env["api_version"], env["payload"])
	}
}

// TestDuplicatePublishMakesOneEvent publishes the same id twice.
func TestDuplicatePublishMakesOneEvent(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusOK))
	e.Subscribe("m1", rcv.URL, "*")
	d, reg := e.Dispatcher()
	id := uuid.New()
	ne := producer.Event{ID: id.String(), MerchantID: "m1", Type: "payout.paid", Payload: json.RawMessage(`{"a":1}`)}
	first, created, err := d.Publisher.Publish(context.Background(), ne)
	if err != nil || !created {
		t.Fatalf("first Publish = %v, %v", created, err)
	}
	ne.Payload = json.RawMessage(`{"a":2}`)
	second, created, err := d.Publisher.Publish(context.Background(), ne)
	if err != nil || created {
		t.Fatalf("second Publish = %v, %v; want created false", created, err)
	}
	if string(second.Body) != string(first.Body) || !second.CreatedAt.Equal(first.CreatedAt) {
		t.Errorf("second Publish returned %s, want the stored %s", second.Body, first.Body)
	}
	if n := len(e.Deliveries(id)); n != 1 {
		t.Fatalf("%d deliveries after a duplicate publish, want 1", n)
	}
	if got := dispatchertest.Counter(t, reg, "webhookd_events_ingested_total"); got != 1 {
		t.Errorf("webhookd_events_ingested_total = %v, want 1", got)
	}
	// The same id from another merchant is a conflict, not a silent success.
	ne.MerchantID = "m2"
	if _, _, err := d.Publisher.Publish(context.Background(), ne); err == nil {
		t.Error("the same id from another merchant was accepted")
	}
}

// TestProducerPublishIsDelivered publishes through the producer package
// (asynq) and expects the event stored once and delivered.
func TestProducerPublishIsDelivered(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusOK))
	e.Subscribe("m1", rcv.URL, "payout.created")
	d, _ := e.Dispatcher()
	e.Run(d)
	p := producer.New(e.Cfg.Redis)
	defer p.Close()
	id := uuid.NewString()
	ev := producer.Event{ID: id, MerchantID: "m1", Type: "payout.created", Payload: json.RawMessage(`{"id": "po_9"}`)}
	for range 2 {
		if err := p.Publish(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	e.WaitFor("the event to be delivered", 10*time.Second, func() bool { return len(rcv.Got()) >= 1 })
	stored, err := e.Store.Events.EventByID(context.Background(), uuid.MustParse(id))
	if err != nil {
		t.Fatal(err)
	}
	if stored.APIVersion != dispatchertest.TestVersion || stored.MerchantID != "m1" {
		t.Errorf("stored event %+v", stored)
	}
	// A third publish after the first was processed still makes nothing new.
	if err := p.Publish(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	e.WaitIdle() // the third publish's task has run
	if n := len(e.Deliveries(stored.ID)); n != 1 {
		t.Errorf("%d deliveries, want 1", n)
	}
	if n := len(rcv.Got()); n != 1 {
		t.Errorf("receiver got %d requests, want 1", n)
	}
	checkDelivery(t, rcv.Got()[0], stored, `{"id":"po_9"}`)
}
