package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
)

// replayWorld is a merchant's deliveries of every kind a replay's filters
// tell apart, each named, and the window that holds them.
type replayWorld struct {
	st           *store.Store
	clock        *viewsClock
	a, b         store.Subscription
	since, until time.Time
	named        map[string]store.Delivery
}

// newReplayWorld stores, for merchant m1, deliveries to subscriptions a
// and b in a window (and one before it, a test one and one of m2), each
// with the status and last answer its name says.
func newReplayWorld(t *testing.T) replayWorld {
	t.Helper()
	ctx := context.Background()
	st, clock := newViewsStore(t)
	w := replayWorld{st: st, clock: clock, named: map[string]store.Delivery{}}
	w.a = newViewsSub(t, st, "m1", "payout.paid", "payout.failed")
	w.b = newViewsSub(t, st, "m1", "deposit.received")
	other := newViewsSub(t, st, "m2", "*")
	start := clock.Now().Add(-2 * time.Hour).UTC().Truncate(time.Millisecond)
	w.since, w.until = start, start.Add(time.Hour)
	at := start
	put := func(name, merchant string, sub store.Subscription, typ string, when time.Time) store.Delivery {
		_, ds := storeEvent(t, st, merchant, typ, when)
		for _, d := range ds {
			if d.SubscriptionID == sub.ID {
				w.named[name] = d
				return d
			}
		}
		t.Fatalf("%s: no delivery to its subscription", name)
		return store.Delivery{}
	}
	answer := func(d store.Delivery, status store.DeliveryStatus, http int, errText string) {
		a := store.Attempt{Number: 1, Status: store.AttemptFailed, Trigger: store.TriggerScheduled, AttemptedAt: d.CreatedAt.Add(time.Second)}
		if status == store.DeliverySucceeded {
			a.Status = store.AttemptSucceeded
		}
		if http != 0 {
			a.HTTPStatus = &http
		}
		if errText != "" {
			a.Error = &errText
		}
		if err := st.Deliveries.RecordAttempt(ctx, store.AttemptRecord{Delivery: d, Attempt: a, Status: status}); err != nil {
			t.Fatal(err)
		}
	}
	next := func() time.Time { at = at.Add(time.Minute); return at }
	answer(put("failed-500", "m1", w.a, "payout.paid", next()), store.DeliveryFailed, 500, "")
	answer(put("failed-404", "m1", w.a, "payout.paid", next()), store.DeliveryFailed, 404, "")
	answer(put("failed-timeout", "m1", w.a, "payout.failed", next()), store.DeliveryFailed, 0, "timeout")
	answer(put("succeeded", "m1", w.a, "payout.paid", next()), store.DeliverySucceeded, 200, "")
	answer(put("b-failed-503", "m1", w.b, "deposit.received", next()), store.DeliveryFailed, 503, "")
	put("pending", "m1", w.a, "payout.paid", next())
	answer(put("m2-failed", "m2", other, "payout.paid", next()), store.DeliveryFailed, 500, "")
	answer(put("before-window", "m1", w.a, "payout.paid", start.Add(-time.Minute)), store.DeliveryFailed, 500, "")
	answer(put("after-window", "m1", w.a, "payout.paid", w.until), store.DeliveryFailed, 500, "")

	// A test delivery, and a skipped one: made while a was disabled.
	_, tds, _, err := st.Events.CreateEvent(ctx, store.Event{ID: uuid.Must(uuid.NewV7()), MerchantID: "m1", Type: "ping.test",
		APIVersion: "2026-05-01", Body: []byte(`{}`), CreatedAt: next()}, store.Audience{SubscriptionID: &w.a.ID, Test: true})
	if err != nil || len(tds) != 1 {
		t.Fatalf("test delivery: %v", err)
	}
	answer(tds[0], store.DeliveryFailed, 500, "")
	disabled, enabled := store.SubscriptionDisabled, store.SubscriptionEnabled
	if _, err := st.Subscriptions.UpdateSubscription(ctx, "m1", w.a.ID, store.SubscriptionUpdate{Status: &disabled}); err != nil {
		t.Fatal(err)
	}
	put("skipped", "m1", w.a, "payout.paid", next())
	if _, err := st.Subscriptions.UpdateSubscription(ctx, "m1", w.a.ID, store.SubscriptionUpdate{Status: &enabled}); err != nil {
		t.Fatal(err)
	}
	return w
}

// names are the names of ds in the world, sorted.
func (w replayWorld) names(ds []store.Delivery) []string {
	var out []string
	for _, d := range ds {
		for n, nd := range w.named {
			if nd.ID == d.ID {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestReplayFiltersSelectExactly: every filter, alone and together,
// selects exactly the deliveries it names, counted and paged alike.
func TestReplayFiltersSelectExactly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newReplayWorld(t)
	for _, tc := range []struct {
		name   string
		filter func(f *store.ReplayFilter)
		want   []string
	}{
		{"no filter", func(*store.ReplayFilter) {},
			[]string{"b-failed-503", "failed-404", "failed-500", "failed-timeout", "pending", "skipped", "succeeded"}},
		{"failed", func(f *store.ReplayFilter) { f.Status = store.DeliveryFailed },
			[]string{"b-failed-503", "failed-404", "failed-500", "failed-timeout"}},
		{"skipped", func(f *store.ReplayFilter) { f.Status = store.DeliverySkipped }, []string{"skipped"}},
		{"succeeded", func(f *store.ReplayFilter) { f.Status = store.DeliverySucceeded }, []string{"succeeded"}},
		{"failed to a", func(f *store.ReplayFilter) { f.Status, f.SubscriptionID = store.DeliveryFailed, &w.a.ID },
			[]string{"failed-404", "failed-500", "failed-timeout"}},
		{"event type", func(f *store.ReplayFilter) { f.EventType = "payout.failed" }, []string{"failed-timeout"}},
		{"5xx", func(f *store.ReplayFilter) { f.HTTPStatusClass = store.HTTPClass5xx }, []string{"b-failed-503", "failed-500"}},
		{"4xx", func(f *store.ReplayFilter) { f.HTTPStatusClass = store.HTTPClass4xx }, []string{"failed-404"}},
		{"no answer", func(f *store.ReplayFilter) { f.HTTPStatusClass = store.HTTPClassNone }, []string{"failed-timeout"}},
		{"5xx to b", func(f *store.ReplayFilter) { f.HTTPStatusClass, f.SubscriptionID = store.HTTPClass5xx, &w.b.ID },
			[]string{"b-failed-503"}},
		{"succeeded with 5xx", func(f *store.ReplayFilter) {
			f.Status, f.HTTPStatusClass = store.DeliverySucceeded, store.HTTPClass5xx
		}, nil},
		{"half the window", func(f *store.ReplayFilter) { f.Until = f.Since.Add(150 * time.Second) },
			[]string{"failed-404", "failed-500"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := store.ReplayFilter{Since: w.since, Until: w.until}
			tc.filter(&f)
			n, err := w.st.Replays.CountReplayable(ctx, "m1", f, 100)
			if err != nil || n != len(tc.want) {
				t.Fatalf("CountReplayable = %d, %v; want %d", n, err, len(tc.want))
			}
			// Paged in small steps (two taken, three looked at each), the
			// walk takes each selected delivery once.
			r := store.Replay{ID: uuid.New(), MerchantID: "m1", Filter: f}
			var got []store.Delivery
			for step := 0; ; step++ {
				if step > 50 {
					t.Fatal("the walk does not end")
				}
				p, err := w.st.Replays.NextReplayPage(ctx, r, 2, 3)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, p.Deliveries...)
				if p.Cursor != nil {
					r.Cursor = p.Cursor
				}
				if p.Paged {
					break
				}
			}
			if names := w.names(got); !slices.Equal(names, tc.want) {
				t.Fatalf("paged %v, want %v", names, tc.want)
			}
		})
	}
	if n, err := w.st.Replays.CountReplayable(ctx, "m1", store.ReplayFilter{Since: w.since, Until: w.until}, 3); err != nil || n != 4 {
		t.Fatalf("bounded count = %d, %v; want 4 (limit+1)", n, err)
	}
}

// TestReplayRequestsOnceAndSettles: a replay requests each delivery once
// (a page taken twice is refused), one at a time per merchant, and its
// counts follow the manual attempts made; it completes when every request
// is settled.
func TestReplayRequestsOnceAndSettles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newReplayWorld(t)
	st, now := w.st, w.clock.Now()
	f := store.ReplayFilter{Since: w.since, Until: w.until, Status: store.DeliveryFailed, SubscriptionID: &w.a.ID}
	r, err := st.Replays.CreateReplay(ctx, "m1", f, 3, now)
	if err != nil || r.Matched != 3 || r.CompletedAt != nil {
		t.Fatalf("CreateReplay = %+v, %v", r, err)
	}
	if _, err := st.Replays.CreateReplay(ctx, "m1", f, 3, now); !errors.Is(err, store.ErrReplayRunning) {
		t.Fatalf("second replay while one runs = %v, want ErrReplayRunning", err)
	}
	if _, err := st.Replays.CreateReplay(ctx, "m2", f, 0, now); err != nil {
		t.Fatalf("another merchant's replay = %v", err)
	}
	p, err := st.Replays.NextReplayPage(ctx, r, 10, 100)
	if err != nil || len(p.Deliveries) != 3 || !p.Paged {
		t.Fatalf("page = %+v, %v", p, err)
	}
	if err := st.Replays.RequestReplayPage(ctx, r, p, now); err != nil {
		t.Fatal(err)
	}
	if err := st.Replays.RequestReplayPage(ctx, r, p, now); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("the same page again = %v, want ErrConflict", err)
	}
	due, err := st.ManualAttempts.ManualRequestsDue(ctx, now.Add(time.Second), 10)
	if err != nil || len(due) != 3 {
		t.Fatalf("manual requests = %d, %v; want 3", len(due), err)
	}
	for _, d := range due {
		if d.Requested != 1 {
			t.Fatalf("delivery %s requested %d times", d.ID, d.Requested)
		}
	}
	if open, err := st.Replays.OpenReplayItems(ctx, r.ID); err != nil || open != 3 {
		t.Fatalf("open = %d, %v", open, err)
	}

	// Two manual attempts are made (one succeeds); the third request is
	// still open.
	manual := func(name string, status store.AttemptStatus, ds store.DeliveryStatus) {
		d := w.named[name]
		l, err := st.ManualAttempts.LeaseManualAttempt(ctx, "m1", d.ID, now, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Deliveries.RecordAttempt(ctx, store.AttemptRecord{Delivery: l.Delivery, Status: ds, Attempt: store.Attempt{
			Number: l.AttemptCount + 1, Status: status, Trigger: store.TriggerManual, AttemptedAt: now}}); err != nil {
			t.Fatal(err)
		}
	}
	manual("failed-500", store.AttemptSucceeded, store.DeliverySucceeded)
	manual("failed-404", store.AttemptFailed, store.DeliveryFailed)
	r, err = st.Replays.SettleReplay(ctx, r.ID, now)
	if err != nil || r.Attempted != 2 || r.Succeeded != 1 || r.Failed != 1 || r.CompletedAt != nil {
		t.Fatalf("after two attempts: %+v, %v", r, err)
	}
	manual("failed-timeout", store.AttemptFailed, store.DeliveryFailed)
	r, err = st.Replays.SettleReplay(ctx, r.ID, now.Add(time.Second))
	if err != nil || r.Attempted != 3 || r.Succeeded != 1 || r.Failed != 2 || r.CompletedAt == nil {
		t.Fatalf("after three attempts: %+v, %v", r, err)
	}
	got, err := st.Replays.GetReplay(ctx, "m1", r.ID)
	if err != nil || got.Attempted != 3 || got.Filter.Status != store.DeliveryFailed || *got.Filter.SubscriptionID != w.a.ID {
		t.Fatalf("GetReplay = %+v, %v", got, err)
	}
	if _, err := st.Replays.GetReplay(ctx, "m2", r.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another merchant's replay = %v, want ErrNotFound", err)
	}
	// Complete, the merchant may replay again.
	if _, err := st.Replays.CreateReplay(ctx, "m1", f, 0, now); err != nil {
		t.Fatalf("a replay after the first completed = %v", err)
	}
	if n, err := st.Replays.DeleteReplaysBefore(ctx, now.Add(time.Hour), 10); err != nil || n != 3 {
		t.Fatalf("DeleteReplaysBefore = %d, %v; want 3", n, err)
	}
}

// TestReplayDropsWhatNoAttemptAnswers: a request whose subscription was
// disabled after it is settled as dropped, so the replay still completes.
func TestReplayDropsWhatNoAttemptAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newReplayWorld(t)
	st, now := w.st, w.clock.Now()
	f := store.ReplayFilter{Since: w.since, Until: w.until, SubscriptionID: &w.b.ID}
	r, err := st.Replays.CreateReplay(ctx, "m1", f, 1, now)
	if err != nil {
		t.Fatal(err)
	}
	p, err := st.Replays.NextReplayPage(ctx, r, 10, 100)
	if err != nil || len(p.Deliveries) != 1 {
		t.Fatalf("page = %+v, %v", p, err)
	}
	if err := st.Replays.RequestReplayPage(ctx, r, p, now); err != nil {
		t.Fatal(err)
	}
	disabled := store.SubscriptionDisabled
	if _, err := st.Subscriptions.UpdateSubscription(ctx, "m1", w.b.ID, store.SubscriptionUpdate{Status: &disabled}); err != nil {
		t.Fatal(err)
	}
	r, err = st.Replays.SettleReplay(ctx, r.ID, now)
	if err != nil || r.CompletedAt == nil || r.Attempted != 0 || r.Requested != 1 {
		t.Fatalf("settled = %+v, %v; want complete, nothing attempted", r, err)
	}
}
