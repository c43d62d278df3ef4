package publish_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/dispatcher/publish"
	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
	"github.com/webhookd/webhookd/producer"
)

// publishOutcome is what one Publish answered, and whether its event was
// readable from another connection when it did.
type publishOutcome struct {
	event   store.Event
	created bool
	err     error
	visible bool
}

// publishOne publishes ev and says whether its event was readable from
// another connection when the publish was answered.
func publishOne(e *dispatchertest.Env, d *dispatcher.Dispatcher, ev producer.Event) publishOutcome {
	ctx := context.Background()
	stored, created, err := d.Publisher.Publish(ctx, ev)
	out := publishOutcome{event: stored, created: created, err: err}
	if err == nil {
		_, gerr := e.Store.Events.EventByID(ctx, stored.ID)
		out.visible = gerr == nil
	}
	return out
}

// committedEvents are the events of publishes that each created one and
// were answered only once it was committed, as every publish must be.
func committedEvents(t *testing.T, out []publishOutcome) []store.Event {
	t.Helper()
	stored := make([]store.Event, len(out))
	for i, o := range out {
		if o.err != nil || !o.created {
			t.Fatalf("publish %d = %v, created %v", i, o.err, o.created)
		}
		if !o.visible {
			t.Errorf("publish %d was answered before its event was committed", i)
		}
		stored[i] = o.event
	}
	return stored
}

// publishTogether publishes events concurrently as one group commit: it
// holds the group writer on an earlier publish (an uncommitted insert of
// that event's id in another transaction makes the writer's statement
// wait), queues every event behind it, checks that none is answered while
// the writer waits, then lets the writer go. The events' group is the next
// one. Each answer records whether its event was already committed.
func publishTogether(e *dispatchertest.Env, d *dispatcher.Dispatcher, reg *prometheus.Registry, events []producer.Event) []publishOutcome {
	e.T.Helper()
	ctx := context.Background()
	held := uuid.New()
	tx, err := e.Store.Pool().Begin(ctx)
	if err != nil {
		e.T.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO event_ids (id, created_at) VALUES ($1, now())`, held); err != nil {
		e.T.Fatal(err)
	}
	blocked := make(chan error, 1)
	go func() {
		_, _, err := d.Publisher.Publish(ctx, producer.Event{ID: held.String(), MerchantID: "blocker", Type: "payout.paid",
			Payload: json.RawMessage(`{}`)})
		blocked <- err
	}()
	e.WaitFor("the group writer to wait on the held id", 10*time.Second, func() bool {
		var waiting bool
		err := e.Store.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO event_ids%')`).Scan(&waiting)
		return err == nil && waiting
	})

	out := make([]publishOutcome, len(events))
	answered := make(chan int, len(events))
	for i, ev := range events {
		go func() {
			out[i] = publishOne(e, d, ev)
			answered <- i
		}()
	}
	e.WaitFor("every publish to queue behind the writer", 10*time.Second, func() bool {
		return gauge(e.T, reg, "webhookd_publishes_waiting") == float64(len(events)+1)
	})
	if n := len(answered); n > 0 {
		e.T.Fatalf("%d publishes answered while their group could not be written", n)
	}
	if err := tx.Rollback(ctx); err != nil {
		e.T.Fatal(err)
	}
	if err := <-blocked; err != nil {
		e.T.Fatalf("the held publish: %v", err)
	}
	for range events {
		<-answered
	}
	return out
}

// gauge reads a gauge of reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// transactions counts the transactions that wrote the events.
func transactions(e *dispatchertest.Env, events []store.Event) int {
	e.T.Helper()
	ids := make([]uuid.UUID, len(events))
	for i, ev := range events {
		ids[i] = ev.ID
	}
	var n int
	if err := e.Store.Pool().QueryRow(context.Background(),
		`SELECT count(DISTINCT xmin::text) FROM event_ids WHERE id = ANY($1)`, ids).Scan(&n); err != nil {
		e.T.Fatal(err)
	}
	return n
}

// TestConcurrentPublishesShareOneCommit: single-event publishes that
// arrive while a group is being written are written together, in one
// transaction, and each is answered only once that transaction committed.
// Their first attempts are parked in one push, each on its own under its
// merchant, and are all made.
func TestConcurrentPublishesShareOneCommit(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusOK))
	e.Subscribe("m1", rcv.URL, "payout.paid")
	d, reg := e.Dispatcher()
	events := make([]producer.Event, 20)
	for i := range events {
		// Two merchants, one new to webhookd: a group reads (or creates)
		// several merchants at once.
		events[i] = producer.Event{MerchantID: fmt.Sprintf("m%d", 1+i%2), Type: "payout.paid",
			Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))}
	}
	out := publishTogether(e, d, reg, events)
	stored := committedEvents(t, out)
	var deliveries []store.Delivery
	for i, o := range out {
		dels := e.Deliveries(o.event.ID)
		if want := 1 - i%2; len(dels) != want {
			t.Errorf("event of merchant %s has %d deliveries, want %d", events[i].MerchantID, len(dels), want)
		}
		deliveries = append(deliveries, dels...)
	}
	if n := transactions(e, stored); n != 1 {
		t.Errorf("%d publishes committed in %d transactions, want 1", len(stored), n)
	}

	// Each first attempt is parked on its own, under its merchant: no
	// task carries attempts of two merchants.
	for _, del := range deliveries {
		if ok, err := dispatchertest.Parked(context.Background(), e.RC, del, 1); err != nil || !ok {
			t.Errorf("delivery %s: first attempt not parked (%v)", del.ID, err)
		}
	}

	e.Run(d)
	e.WaitFor("every delivery", 10*time.Second, func() bool { return len(rcv.Got()) == len(deliveries) })
	e.WaitIdle()
	if got := len(rcv.Got()); got != len(deliveries) {
		t.Errorf("the receiver got %d deliveries, want %d", got, len(deliveries))
	}
}

// TestPublishGroupKeepsEachPublishsAnswer: within one group, each publish
// gets the answer it would get alone. A re-published id is stored once and
// delivered once, inside one group and across groups; an id taken by
// another merchant fails alone. (Text Postgres would refuse never reaches
// a group: Check refuses it, TestPublisherRules.)
func TestPublishGroupKeepsEachPublishsAnswer(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	sub, _ := e.Subscribe("m1", "http://127.0.0.1:9/", "payout.paid")
	// Ordered on "k": the fan-out reads the key with Postgres's jsonb,
	// which refuses a \u0000 that JSON allows.
	key := "k"
	if _, err := e.Store.Subscriptions.UpdateSubscription(context.Background(), "m1", sub.ID,
		store.SubscriptionUpdate{SetOrderingKey: true, OrderingKey: &key}); err != nil {
		t.Fatal(err)
	}
	d, reg := e.Dispatcher()
	others := e.Publish(d, "m2", "payout.paid")

	twice := uuid.NewString()
	event := func(id, merchant, payload string) producer.Event {
		return producer.Event{ID: id, MerchantID: merchant, Type: "payout.paid", Payload: json.RawMessage(payload)}
	}
	cases := []struct {
		name    string
		event   producer.Event
		wantErr func(error) bool // nil: no error
	}{
		{"a new event", event(twice, "m1", `{"k": "a"}`), nil},
		{"the same id again, in the same group", event(twice, "m1", `{"k": "a"}`), nil},
		{"another merchant's event id", event(others.ID.String(), "m1", `{"k": "b"}`),
			func(err error) bool { return errors.Is(err, store.ErrConflict) }},
		{"another new event", event(uuid.NewString(), "m1", `{"k": "c"}`), nil},
	}
	events := make([]producer.Event, len(cases))
	for i, tc := range cases {
		events[i] = tc.event
	}
	out := publishTogether(e, d, reg, events)
	for i, tc := range cases {
		o := out[i]
		switch {
		case tc.wantErr == nil && o.err != nil:
			t.Errorf("%s: %v", tc.name, o.err)
		case tc.wantErr != nil && !tc.wantErr(o.err):
			t.Errorf("%s: error %v", tc.name, o.err)
		case tc.wantErr == nil && !o.visible:
			t.Errorf("%s: answered before its event was committed", tc.name)
		}
	}
	if out[0].created == out[1].created || out[0].event.ID != out[1].event.ID || string(out[0].event.Body) != string(out[1].event.Body) {
		t.Errorf("the id published twice in one group: created %v and %v, events %s and %s, want one created and the same event",
			out[0].created, out[1].created, out[0].event.Body, out[1].event.Body)
	}
	if !out[3].created {
		t.Errorf("the other new event was not created")
	}

	// Across groups: the same answer as the second publish, nothing new.
	again, created, err := d.Publisher.Publish(context.Background(), events[0])
	if err != nil || created || string(again.Body) != string(out[0].event.Body) {
		t.Errorf("re-publish in a later group = %v, created %v, body %s; want the stored event", err, created, again.Body)
	}
	if n := len(e.Deliveries(uuid.MustParse(twice))); n != 1 {
		t.Errorf("the id published three times has %d deliveries, want 1", n)
	}
}

// TestPublishAllWritesTogetherInOrder: a batch of events is queued for the
// group writer at once, so that it commits in one transaction (or a few,
// when the writer took the first event before the rest were queued), not
// one per event; each event gets its own answer, in the batch's order, and
// one refused (an id another merchant holds) fails alone.
func TestPublishAllWritesTogetherInOrder(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusOK))
	e.Subscribe("m1", rcv.URL, "payout.paid")
	d, _ := e.Dispatcher()
	ctx := context.Background()
	taken, _, err := d.Publisher.Publish(ctx, producer.Event{MerchantID: "m2", Type: "payout.paid", Payload: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	const refused = 7
	events := make([]producer.Event, 30)
	for i := range events {
		events[i] = producer.Event{ID: uuid.NewString(), MerchantID: "m1", Type: "payout.paid",
			Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))}
	}
	events[refused].ID = taken.ID.String()

	// One event that breaks a rule refuses the batch: none is published.
	bad := slices.Clone(events)
	bad[3].Type = "payout.unknown"
	_, _, badErrs := d.Publisher.PublishAll(ctx, bad)
	for i, err := range badErrs {
		if (i == 3) != (invalid.As(err) != nil) {
			t.Fatalf("batch with event 3 unknown: event %d: %v", i, err)
		}
	}
	for i, ev := range bad {
		if _, err := e.Store.Events.EventByID(ctx, uuid.MustParse(ev.ID)); err == nil && i != refused {
			t.Fatalf("event %s of a refused batch was stored", ev.ID)
		}
	}

	stored, created, errs := d.Publisher.PublishAll(ctx, events)
	var written []store.Event
	for i := range events {
		if i == refused {
			if !errors.Is(errs[i], store.ErrConflict) {
				t.Errorf("event %d, whose id another merchant holds: %v, want a conflict", i, errs[i])
			}
			continue
		}
		if errs[i] != nil || !created[i] || stored[i].ID.String() != events[i].ID {
			t.Fatalf("event %d: %v, created %v, id %s; want event %s created", i, errs[i], created[i], stored[i].ID, events[i].ID)
		}
		written = append(written, stored[i])
	}
	if n := transactions(e, written); n > 3 {
		t.Errorf("a batch of %d events committed in %d transactions, want one (or a few)", len(written), n)
	}
	e.Run(d)
	e.WaitFor("every delivery", 10*time.Second, func() bool { return len(rcv.Got()) == len(written) })
}

// TestLingeringPublishesShareACommit: with WEBHOOKD_PUBLISH_LINGER set,
// publishes that come one at a time but closer together than the linger
// wait for one another and share transactions, two a group; each is
// answered only once its transaction committed.
func TestLingeringPublishesShareACommit(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	e.Subscribe("m1", "http://127.0.0.1:9/h", "payout.paid")
	d, _ := e.Dispatcher(func(c *dispatcher.Config) { c.PublishLinger = publish.MaxLinger })
	const publishes = 12
	out := make([]publishOutcome, publishes)
	done := make(chan struct{}, publishes)
	pace := time.NewTicker(publish.MaxLinger / 5)
	defer pace.Stop()
	for i := range publishes {
		<-pace.C
		go func() {
			defer func() { done <- struct{}{} }()
			out[i] = publishOne(e, d, producer.Event{MerchantID: "m1", Type: "payout.paid",
				Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))})
		}()
	}
	for range publishes {
		<-done
	}
	stored := committedEvents(t, out)
	// Pairs, but for the first publish: no pace is known before it, so
	// it does not wait.
	if n, most := transactions(e, stored), 1+publishes/2; n > most {
		t.Errorf("%d publishes a fifth of the linger apart committed in %d transactions, want at most %d", publishes, n, most)
	}
}
