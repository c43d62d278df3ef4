package enginetest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/dispatcher/deliver"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/producer"
	"github.com/webhookd/webhookd/receiver"
	"github.com/webhookd/webhookd/retry"
	"github.com/webhookd/webhookd/signer"
)

const (
	merchant = "m1"
	version  = "2026-05-01"
)

// engine is webhookd's delivery pipeline on a fresh database and a private
// Redis, with retries in milliseconds and plain-HTTP loopback targets
// allowed.
type engine struct {
	t       *testing.T
	store   *store.Store
	sealer  *signer.Sealer
	d       *dispatcher.Dispatcher
	records *signalingRecorder
}

// signalingRecorder is the engine's own Recorder (the group commit) that
// also tells, after each attempt's outcome is written, whoever waits for
// the next one: a test waits on the records, never on the clock.
type signalingRecorder struct {
	deliver.Recorder
	mu sync.Mutex
	// wrote is closed when the next record has been written, then replaced.
	wrote chan struct{}
}

func newSignalingRecorder(r deliver.Recorder) *signalingRecorder {
	return &signalingRecorder{Recorder: r, wrote: make(chan struct{})}
}

// Record implements deliver.Recorder.
func (r *signalingRecorder) Record(ctx context.Context, rec store.AttemptRecord) error {
	err := r.Recorder.Record(ctx, rec)
	r.mu.Lock()
	defer r.mu.Unlock()
	close(r.wrote)
	r.wrote = make(chan struct{})
	return err
}

// next is closed once a record written after this call has been written.
func (r *signalingRecorder) next() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wrote
}

func newEngine(t *testing.T) *engine {
	t.Helper()
	st := storetest.NewStore(t)
	rd := storetest.NewRedis(t)
	sealer, err := signer.NewSealer(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	batch := deliver.NewBatchRecorder(st.Deliveries, nil, 0)
	t.Cleanup(batch.Close) // after the dispatcher's cleanups below: they run last first
	records := newSignalingRecorder(batch)
	d, err := dispatcher.New(dispatcher.Config{
		Store: st, Redis: asynq.RedisClientOpt{Network: "unix", Addr: rd.Socket}, Recorder: records,
		Schedule:        retry.Schedule{Delays: []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond}},
		DeliveryTimeout: 2 * time.Second, AllowHTTPTargets: true, AllowPrivateTargets: true, Concurrency: 4,
		Sealer: sealer, Logger: slog.New(slog.DiscardHandler), SweepInterval: time.Second,
		SweepGrace: 100 * time.Millisecond, DefaultAPIVersion: version, Version: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	if _, err := st.Merchants.EnsureMerchant(context.Background(), merchant, version); err != nil {
		t.Fatal(err)
	}
	return &engine{t: t, store: st, sealer: sealer, d: d, records: records}
}

// subscribe points a subscription for every event type at url and returns
// it with its signing secret.
func (e *engine) subscribe(url string) (store.Subscription, string) {
	e.t.Helper()
	secret, err := signer.NewSecret()
	if err != nil {
		e.t.Fatal(err)
	}
	sealed, err := e.sealer.Seal(secret)
	if err != nil {
		e.t.Fatal(err)
	}
	sub, err := e.store.Subscriptions.CreateSubscription(context.Background(),
		store.NewSubscription{MerchantID: merchant, URL: url, Events: []string{"*"}}, sealed)
	if err != nil {
		e.t.Fatal(err)
	}
	return sub, secret
}

// rotate gives the subscription a new secret, as rotate_secret does, and
// returns it.
func (e *engine) rotate(sub store.Subscription) string {
	e.t.Helper()
	secret, err := signer.NewSecret()
	if err != nil {
		e.t.Fatal(err)
	}
	sealed, err := e.sealer.Seal(secret)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.store.Subscriptions.RotateSecret(context.Background(), merchant, sub.ID, sealed, subscriptions.Rotation(secret)); err != nil {
		e.t.Fatal(err)
	}
	return secret
}

// publish publishes an event and returns it with its one delivery.
func (e *engine) publish(typ, payload string) (store.Event, store.Delivery) {
	e.t.Helper()
	ctx := context.Background()
	ev, created, err := e.d.Publisher.Publish(ctx, producer.Event{MerchantID: merchant, Type: typ, Payload: json.RawMessage(payload)})
	if err != nil || !created {
		e.t.Fatalf("Publish = %v, created %v", err, created)
	}
	ds, _, err := e.store.Views.ListDeliveries(ctx, merchant, store.DeliveryFilter{EventID: &ev.ID}, store.Page{Limit: 10})
	if err != nil || len(ds) != 1 {
		e.t.Fatalf("deliveries of %s: %d, %v; want 1", ev.ID, len(ds), err)
	}
	return ev, ds[0]
}

// settled waits until the delivery has attempts attempts and is no longer
// pending, and returns it. It reads the delivery again after each attempt
// recorded: only a record changes what it waits for.
func (e *engine) settled(id uuid.UUID, attempts int) store.Delivery {
	e.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		// Taken before the read, so that a record written meanwhile
		// wakes this wait rather than the next one.
		recorded := e.records.next()
		del, err := e.store.Deliveries.DeliveryByID(context.Background(), id)
		if err != nil {
			e.t.Fatal(err)
		}
		if del.AttemptCount >= attempts && del.Status != store.DeliveryPending {
			return del
		}
		select {
		case <-recorded:
		case <-deadline:
			e.t.Fatalf("delivery %s: %s after %d attempts, waited for %d", id, del.Status, del.AttemptCount, attempts)
		}
	}
}

// endpoint is a merchant's endpoint: receiver.Receiver behind an httptest
// server on 127.0.0.1. In front of it, a recorder keeps each raw request
// so that the test can check its signature independently.
type endpoint struct {
	*httptest.Server
	t        *testing.T
	dedup    *receiver.MemoryDeduplicator
	handle   func(*receiver.Event) error
	mu       sync.Mutex
	rc       *receiver.Receiver
	requests []request
	events   []*receiver.Event
	fail     int // the handler fails this many more times
}

type request struct {
	header http.Header
	body   []byte
}

// newEndpoint starts an endpoint; use gives it its receiver. Its URL has a
// path of its own: an engine of another test may still be retrying to a
// port this server reuses.
func newEndpoint(t *testing.T, handle func(*receiver.Event) error) *endpoint {
	t.Helper()
	dedup, err := receiver.NewMemoryDeduplicator(receiver.MemoryDeduplicatorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ep := &endpoint{t: t, dedup: dedup, handle: handle}
	own := "/hooks/" + uuid.NewString()
	ep.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != own {
			http.NotFound(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Error(err)
		}
		ep.mu.Lock()
		ep.requests = append(ep.requests, request{header: r.Header.Clone(), body: body})
		rc := ep.rc
		ep.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		rc.ServeHTTP(w, r)
	}))
	ep.URL += own
	t.Cleanup(ep.Close)
	return ep
}

// use makes the endpoint verify with secrets from now on, keeping the ids
// it has handled, as a merchant's redeployed endpoint with a shared
// duplicate store would.
func (ep *endpoint) use(secrets ...string) {
	ep.t.Helper()
	v, err := receiver.NewVerifier(receiver.VerifierConfig{Secrets: secrets})
	if err != nil {
		ep.t.Fatal(err)
	}
	rc, err := receiver.New(receiver.Config{Verifier: v, Dedup: ep.dedup, Logger: slog.New(slog.DiscardHandler),
		Handler: receiver.HandlerFunc(func(_ context.Context, ev *receiver.Event) error {
			ep.mu.Lock()
			ep.events = append(ep.events, ev)
			fail := ep.fail > 0
			if fail {
				ep.fail--
			}
			ep.mu.Unlock()
			if fail {
				return errors.New("the merchant's database is down")
			}
			if ep.handle != nil {
				return ep.handle(ev)
			}
			return nil
		})})
	if err != nil {
		ep.t.Fatal(err)
	}
	ep.mu.Lock()
	ep.rc = rc
	ep.mu.Unlock()
}

func (ep *endpoint) handled() []*receiver.Event {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return append([]*receiver.Event(nil), ep.events...)
}

func (ep *endpoint) received() []request {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return append([]request(nil), ep.requests...)
}

// checkSigned verifies a raw request with each secret alone, with the
// Standard Webhooks library and with package receiver's Verifier.
func checkSigned(t *testing.T, r request, secrets ...string) {
	t.Helper()
	for i, secret := range secrets {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(r.body, r.header); err != nil {
			t.Errorf("secret #%d: Standard Webhooks library: %v", i+1, err)
		}
		v, err := receiver.NewVerifier(receiver.VerifierConfig{Secrets: []string{secret}})
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Verify(r.header, r.body); err != nil {
			t.Errorf("secret #%d: receiver: %v", i+1, err)
		}
	}
}

// TestEngineDeliveriesReachTheHandler: events published to the engine
// arrive verified and decoded; a redelivery is acknowledged as a duplicate
// without running the handler; a failed handler makes the engine retry.
func TestEngineDeliveriesReachTheHandler(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ep := newEndpoint(t, nil)
	_, secret := e.subscribe(ep.URL)
	ep.use(secret)

	payload := `{"id":"po_1","type":"payout","status":"sent","amount":"12.50"}`
	ev, del := e.publish("payout.paid", payload)
	if got := e.settled(del.ID, 1); got.Status != store.DeliverySucceeded {
		t.Fatalf("delivery %s after %d attempts: %+v", got.Status, got.AttemptCount, got.Attempts)
	}
	handled := ep.handled()
	if len(handled) != 1 {
		t.Fatalf("handler ran %d times, want once", len(handled))
	}
	got := handled[0]
	if got.ID != ev.ID.String() || got.Type != "payout.paid" || got.APIVersion != version ||
		string(got.Payload) != payload || !got.Date.Equal(ev.CreatedAt) || time.Since(got.Attempted).Abs() > time.Minute {
		t.Errorf("handled %+v, want the event %s created %s", got, ev.ID, ev.CreatedAt)
	}
	checkSigned(t, ep.received()[0], secret)

	// Redelivery: same webhook-id, fresh timestamp and signature; the
	// receiver acknowledges it without running the handler.
	if _, err := e.d.Redeliverer.Redeliver(context.Background(), merchant, del.ID); err != nil {
		t.Fatal(err)
	}
	redelivered := e.settled(del.ID, 2)
	last := redelivered.Attempts[len(redelivered.Attempts)-1]
	if last.Status != store.AttemptSucceeded || last.Trigger != store.TriggerManual || strings.TrimSpace(last.ResponseBody) != "duplicate" {
		t.Errorf("manual attempt %s %s, answer %q; want a succeeded attempt answered \"duplicate\"", last.Status, last.Trigger, last.ResponseBody)
	}
	if n := len(ep.handled()); n != 1 {
		t.Errorf("after the redelivery the handler ran %d times, want once", n)
	}
	reqs := ep.received()
	if len(reqs) != 2 || reqs[1].header.Get("webhook-id") != ev.ID.String() {
		t.Fatalf("%d requests, want the redelivery of %s", len(reqs), ev.ID)
	}
	checkSigned(t, reqs[1], secret)

	// A failing handler: 500, the engine retries, the retry is handled.
	ep.mu.Lock()
	ep.fail = 1
	ep.mu.Unlock()
	ev2, del2 := e.publish("payout.failed", `{"id":"po_2","type":"payout","status":"failed"}`)
	retried := e.settled(del2.ID, 2)
	if retried.Status != store.DeliverySucceeded || retried.AttemptCount != 2 {
		t.Fatalf("delivery %s after %d attempts, want succeeded after 2", retried.Status, retried.AttemptCount)
	}
	if first := retried.Attempts[0]; first.HTTPStatus == nil || *first.HTTPStatus != http.StatusInternalServerError {
		t.Errorf("first attempt %+v, want the handler's 500", first)
	}
	if hs := ep.handled(); len(hs) != 3 || hs[1].ID != ev2.ID.String() || hs[2].ID != ev2.ID.String() {
		t.Errorf("handler saw %d events, want the failed attempt and its retry of %s", len(hs), ev2.ID)
	}
}

// TestEngineRotatedSecret: after rotate_secret the engine signs with both
// secrets; a receiver still on the old secret verifies, and so does one
// switched to the new secret alone.
func TestEngineRotatedSecret(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ep := newEndpoint(t, nil)
	sub, oldSecret := e.subscribe(ep.URL)
	ep.use(oldSecret)
	newSecret := e.rotate(sub)

	_, del := e.publish("payout.paid", `{"id":"po_1","type":"payout","status":"sent"}`)
	if got := e.settled(del.ID, 1); got.Status != store.DeliverySucceeded {
		t.Fatalf("receiver on the old secret: delivery %s, attempts %+v", got.Status, got.Attempts)
	}
	ep.use(newSecret)
	_, del = e.publish("payout.paid", `{"id":"po_2","type":"payout","status":"sent"}`)
	if got := e.settled(del.ID, 1); got.Status != store.DeliverySucceeded {
		t.Fatalf("receiver on the new secret: delivery %s, attempts %+v", got.Status, got.Attempts)
	}
	reqs := ep.received()
	if len(reqs) != 2 || len(ep.handled()) != 2 {
		t.Fatalf("%d requests and %d handled, want 2 of each", len(reqs), len(ep.handled()))
	}
	for _, r := range reqs {
		if sigs := strings.Fields(r.header.Get("webhook-signature")); len(sigs) != 2 {
			t.Errorf("%d signatures during the overlap, want 2", len(sigs))
		}
		checkSigned(t, r, oldSecret, newSecret)
	}

	// A receiver with an unrelated secret refuses, and the engine records
	// the 401 with its reason.
	other, err := signer.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	ep.use(other)
	_, del = e.publish("payout.paid", `{"id":"po_3","type":"payout","status":"sent"}`)
	got := e.settled(del.ID, 4)
	if got.Status != store.DeliveryFailed {
		t.Fatalf("wrong secret: delivery %s", got.Status)
	}
	if a := got.Attempts[0]; a.HTTPStatus == nil || *a.HTTPStatus != http.StatusUnauthorized || strings.TrimSpace(a.ResponseBody) != "no matching signature" {
		t.Errorf("wrong secret: attempt %+v, want 401 no matching signature", a)
	}
	if n := len(ep.handled()); n != 2 {
		t.Errorf("handler ran %d times, want 2 (not for the refused deliveries)", n)
	}
}

// TestEngineOrderingGuard: a payout's late "sent" after its "returned" is
// dropped, and "sent" after "failed" asks for a fetch, on events the
// engine delivers.
func TestEngineOrderingGuard(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	guard, err := receiver.NewGuard(receiver.GuardConfig{Store: receiver.NewMemoryStatusStore()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var verdicts []string
	ep := newEndpoint(t, func(ev *receiver.Event) error {
		ctx := context.Background()
		r, err := ev.Resource()
		if err != nil {
			return err
		}
		v, err := guard.Check(ctx, r)
		if err != nil {
			return err
		}
		mu.Lock()
		verdicts = append(verdicts, r.ID+" "+r.Status+" "+v.String())
		mu.Unlock()
		if v == receiver.Apply {
			return guard.Record(ctx, r)
		}
		return nil
	})
	_, secret := e.subscribe(ep.URL)
	ep.use(secret)
	for _, p := range []string{
		`{"id":"po_1","type":"payout","status":"returned"}`,
		`{"id":"po_1","type":"payout","status":"sent"}`,
		`{"id":"po_2","type":"payout","status":"failed"}`,
		`{"id":"po_2","type":"payout","status":"sent"}`,
	} {
		_, del := e.publish("payout.paid", p)
		e.settled(del.ID, 1)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"po_1 returned apply", "po_1 sent stale", "po_2 failed apply", "po_2 sent fetch"}
	if strings.Join(verdicts, ", ") != strings.Join(want, ", ") {
		t.Fatalf("verdicts %q, want %q", verdicts, want)
	}
}
