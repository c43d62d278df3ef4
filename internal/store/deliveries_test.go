package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// newDelivery stores a subscription and an event fanned out to it, and
// returns the one delivery.
func newDelivery(t *testing.T, s *store.Store, to store.Audience) (store.Subscription, store.Delivery) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Merchants.EnsureMerchant(ctx, "m1", "2026-05-01"); err != nil {
		t.Fatal(err)
	}
	sub, err := s.Subscriptions.CreateSubscription(ctx, store.NewSubscription{MerchantID: "m1", URL: "https://example.com/h", Events: []string{"*"}}, []byte("sealed"))
	if err != nil {
		t.Fatal(err)
	}
	if to.SubscriptionID != nil {
		to.SubscriptionID = &sub.ID
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	ev := store.Event{ID: uuid.New(), MerchantID: "m1", Type: "payout.paid", APIVersion: "2026-05-01", Body: []byte(`{}`), CreatedAt: now}
	_, ds, created, err := s.Events.CreateEvent(ctx, ev, to)
	if err != nil || !created || len(ds) != 1 {
		t.Fatalf("CreateEvent = %d deliveries, created %v, %v", len(ds), created, err)
	}
	return sub, ds[0]
}

func TestLeaseIsExclusivePerAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.NewStore(t)
	_, d := newDelivery(t, s, store.Audience{})
	now := time.Now()

	if _, err := s.Deliveries.LeaseDelivery(ctx, d.ID, d.CreatedAt, 2, now, time.Minute); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("lease of attempt 2 before attempt 1 = %v, want ErrNotFound", err)
	}
	l, err := s.Deliveries.LeaseDelivery(ctx, d.ID, d.CreatedAt, 1, now, time.Minute)
	if err != nil || string(l.Body) != `{}` || l.URL != "https://example.com/h" {
		t.Fatalf("first lease = %+v, %v", l, err)
	}
	if _, err := s.Deliveries.LeaseDelivery(ctx, d.ID, d.CreatedAt, 1, now.Add(30*time.Second), time.Minute); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second lease while the first is live = %v, want ErrNotFound", err)
	}
	if _, err := s.Deliveries.LeaseDelivery(ctx, d.ID, d.CreatedAt, 1, now.Add(2*time.Minute), time.Minute); err != nil {
		t.Fatalf("lease after the first lapsed = %v", err)
	}
	due, err := s.Deliveries.DueDeliveries(ctx, now.Add(time.Hour), now.Add(2*time.Minute+time.Second), nil, 10)
	if err != nil || len(due) != 0 {
		t.Fatalf("DueDeliveries while leased = %d, %v; want none", len(due), err)
	}
	due, err = s.Deliveries.DueDeliveries(ctx, now.Add(time.Hour), now.Add(4*time.Minute), nil, 10)
	if err != nil || len(due) != 1 || due[0].ID != d.ID {
		t.Fatalf("DueDeliveries after the lease lapsed = %v, %v; want the delivery", due, err)
	}
}

// TestStillDue: a delivery the sweeper read as due is still due until an
// attempt is made or a lease taken since; then it is not.
func TestStillDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// since changes the delivery after the sweeper read it.
		since func(t *testing.T, s *store.Store, d store.Delivery, now time.Time)
		want  bool
	}{
		{"nothing happened since", func(*testing.T, *store.Store, store.Delivery, time.Time) {}, true},
		{"a lease was taken since", func(t *testing.T, s *store.Store, d store.Delivery, now time.Time) {
			if _, err := s.Deliveries.LeaseDelivery(ctx, d.ID, d.CreatedAt, 1, now, time.Minute); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"the attempt was made since, and its retry is due", func(t *testing.T, s *store.Store, d store.Delivery, now time.Time) {
			l, err := s.Deliveries.LeaseDelivery(ctx, d.ID, d.CreatedAt, 1, now, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Deliveries.RecordAttempt(ctx, store.AttemptRecord{Delivery: l.Delivery, Status: store.DeliveryPending, NextAttemptAt: &now,
				Attempt: store.Attempt{Number: 1, Status: store.AttemptFailed, Trigger: store.TriggerScheduled, AttemptedAt: now}}); err != nil {
				t.Fatal(err)
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := storetest.NewStore(t)
			_, d := newDelivery(t, s, store.Audience{})
			now := time.Now()
			read, err := s.Deliveries.DueDeliveries(ctx, now.Add(time.Hour), now, nil, 10)
			if err != nil || len(read) != 1 {
				t.Fatalf("DueDeliveries = %v, %v; want the delivery", read, err)
			}
			tc.since(t, s, d, now)
			got, err := s.Deliveries.StillDue(ctx, read, now.Add(time.Hour), now)
			if err != nil || (len(got) == 1) != tc.want {
				t.Fatalf("StillDue = %v, %v; want the delivery: %v", got, err, tc.want)
			}
		})
	}
}

func TestRecordAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name        string
		test        bool
		ok          bool
		wantFailure int
	}{
		{"real failure counts", false, false, 1},
		{"real success resets", false, true, 0},
		{"test failure touches nothing", true, false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := storetest.NewStore(t)
			aud := store.Audience{}
			if tc.test {
				aud = store.Audience{SubscriptionID: &uuid.UUID{}, Test: true}
			}
			sub, d := newDelivery(t, s, aud)
			now := time.Now().UTC().Truncate(time.Microsecond)
			status, attempt := store.DeliveryPending, store.AttemptFailed
			next := &now
			if tc.ok {
				status, attempt, next = store.DeliverySucceeded, store.AttemptSucceeded, nil
			}
			rec := store.AttemptRecord{Delivery: d, Status: status, NextAttemptAt: next,
				Attempt: store.Attempt{Number: 1, Status: attempt, Trigger: store.TriggerScheduled, DurationMS: 12,
					ResponseBody: "ok", AttemptedAt: now}}
			if err := s.Deliveries.RecordAttempt(ctx, rec); err != nil {
				t.Fatal(err)
			}
			if err := s.Deliveries.RecordAttempt(ctx, rec); !errors.Is(err, store.ErrConflict) {
				t.Fatalf("recording attempt 1 twice = %v, want ErrConflict", err)
			}
			got, err := s.Deliveries.DeliveryByID(ctx, d.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != status || got.AttemptCount != 1 || len(got.Attempts) != 1 || got.Attempts[0].ResponseBody != "ok" || got.Test != tc.test {
				t.Fatalf("delivery after record = %+v", got)
			}
			s2, err := s.Subscriptions.GetSubscription(ctx, "m1", sub.ID)
			if err != nil {
				t.Fatal(err)
			}
			if s2.Health.ConsecutiveFailures != tc.wantFailure || (tc.test && (s2.Health.LastFailureAt != nil || s2.Health.LastSuccessAt != nil)) {
				t.Fatalf("health = %+v", s2.Health)
			}
		})
	}
}

func TestRecordAttemptsInOneBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.NewStore(t)
	if _, err := s.Merchants.EnsureMerchant(ctx, "m1", "2026-05-01"); err != nil {
		t.Fatal(err)
	}
	sub, err := s.Subscriptions.CreateSubscription(ctx, store.NewSubscription{MerchantID: "m1", URL: "https://example.com/h", Events: []string{"*"}}, []byte("sealed"))
	if err != nil {
		t.Fatal(err)
	}
	// Four events fan out to the one subscription: four deliveries.
	var ds []store.Delivery
	for range 4 {
		ev := store.Event{ID: uuid.New(), MerchantID: "m1", Type: "payout.paid", APIVersion: "2026-05-01", Body: []byte(`{}`),
			CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
		_, got, _, err := s.Events.CreateEvent(ctx, ev, store.Audience{})
		if err != nil || len(got) != 1 {
			t.Fatalf("CreateEvent: %v %v", got, err)
		}
		ds = append(ds, got[0])
	}
	base := time.Now().UTC().Truncate(time.Microsecond)
	record := func(d store.Delivery, ok bool, at time.Time) store.AttemptRecord {
		status, attempt := store.DeliveryPending, store.AttemptFailed
		next := &at
		if ok {
			status, attempt, next = store.DeliverySucceeded, store.AttemptSucceeded, nil
		}
		return store.AttemptRecord{Delivery: d, Status: status, NextAttemptAt: next,
			Attempt: store.Attempt{Number: 1, Status: attempt, Trigger: store.TriggerScheduled, AttemptedAt: at}}
	}
	// The first delivery's attempt is already recorded: the batch must
	// report that one as a conflict and write the others.
	if err := s.Deliveries.RecordAttempt(ctx, record(ds[0], false, base)); err != nil {
		t.Fatal(err)
	}
	batch := []store.AttemptRecord{
		record(ds[0], true, base.Add(time.Second)),    // duplicate of attempt 1
		record(ds[1], false, base.Add(2*time.Second)), // fail
		record(ds[2], true, base.Add(3*time.Second)),  // success resets
		record(ds[3], false, base.Add(4*time.Second)), // one failure after it
	}
	errs, err := s.Deliveries.RecordAttempts(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false, false, false} {
		if got := errors.Is(errs[i], store.ErrConflict); got != want {
			t.Errorf("record %d: conflict = %v (%v), want %v", i, got, errs[i], want)
		}
	}
	got, err := s.Subscriptions.GetSubscription(ctx, "m1", sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	h := got.Health
	if h.ConsecutiveFailures != 1 || h.LastSuccessAt == nil || !h.LastSuccessAt.Equal(base.Add(3*time.Second)) ||
		h.LastFailureAt == nil || !h.LastFailureAt.Equal(base.Add(4*time.Second)) {
		t.Fatalf("health after the batch = %+v, want 1 failure after the success at +3s", h)
	}
	for i, d := range ds[1:] {
		got, err := s.Deliveries.DeliveryByID(ctx, d.ID)
		if err != nil || got.AttemptCount != 1 || len(got.Attempts) != 1 || got.Status != batch[i+1].Status {
			t.Fatalf("delivery %d after the batch = %+v, %v", i+1, got, err)
		}
	}
}

// A healthy subscription's row is rewritten by a record only when its
// last success or failure moves by a second or more; a failure, the end of
// a failing streak or a disable is written at once, with the exact
// instants. Each step records one
// attempt of a fresh delivery, at base plus the step's offset.
func TestRecordWritesHealthWhenItChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.NewStore(t)
	if _, err := s.Merchants.EnsureMerchant(ctx, "m1", "2026-05-01"); err != nil {
		t.Fatal(err)
	}
	subID := newSubscription(t, s, "m1")
	base := time.Now().UTC().Truncate(time.Microsecond)
	steps := []struct {
		name        string
		at          time.Duration
		ok          bool
		wantWrite   bool
		wantSuccess time.Duration // last_success_at - base
		wantFailure *time.Duration
		wantCount   int
	}{
		{name: "first success", at: 0, ok: true, wantWrite: true, wantSuccess: 0},
		{name: "success within the second", at: 400 * time.Millisecond, ok: true, wantWrite: false, wantSuccess: 0},
		{name: "success a second later", at: 1100 * time.Millisecond, ok: true, wantWrite: true, wantSuccess: 1100 * time.Millisecond},
		{name: "a failure", at: 1200 * time.Millisecond, ok: false, wantWrite: true, wantSuccess: 1100 * time.Millisecond,
			wantFailure: durationPtr(1200 * time.Millisecond), wantCount: 1},
		{name: "a second failure within the second", at: 1300 * time.Millisecond, ok: false, wantWrite: true,
			wantSuccess: 1100 * time.Millisecond, wantFailure: durationPtr(1300 * time.Millisecond), wantCount: 2},
		{name: "success ending the streak within the second", at: 1400 * time.Millisecond, ok: true, wantWrite: true,
			wantSuccess: 1400 * time.Millisecond, wantFailure: durationPtr(1300 * time.Millisecond)},
		{name: "healthy again, within the second", at: 1500 * time.Millisecond, ok: true, wantWrite: false,
			wantSuccess: 1400 * time.Millisecond, wantFailure: durationPtr(1300 * time.Millisecond)},
	}
	version := func() (v string) {
		if err := s.Pool().QueryRow(ctx, `SELECT xmin::text FROM subscriptions WHERE id = $1`, subID).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, step := range steps {
		ev := store.Event{ID: uuid.New(), MerchantID: "m1", Type: "payout.paid", APIVersion: "2026-05-01", Body: []byte(`{}`),
			CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
		_, ds, _, err := s.Events.CreateEvent(ctx, ev, store.Audience{})
		if err != nil || len(ds) != 1 {
			t.Fatalf("%s: CreateEvent: %v %v", step.name, ds, err)
		}
		at := base.Add(step.at)
		rec := store.AttemptRecord{Delivery: ds[0], Status: store.DeliverySucceeded,
			Attempt: store.Attempt{Number: 1, Status: store.AttemptSucceeded, Trigger: store.TriggerScheduled, AttemptedAt: at}}
		if !step.ok {
			rec.Status, rec.Attempt.Status, rec.NextAttemptAt = store.DeliveryPending, store.AttemptFailed, &at
		}
		before := version()
		if err := s.Deliveries.RecordAttempt(ctx, rec); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if wrote := version() != before; wrote != step.wantWrite {
			t.Errorf("%s: row written = %v, want %v", step.name, wrote, step.wantWrite)
		}
		got, err := s.Subscriptions.GetSubscription(ctx, "m1", subID)
		if err != nil {
			t.Fatal(err)
		}
		h := got.Health
		if h.LastSuccessAt == nil || !h.LastSuccessAt.Equal(base.Add(step.wantSuccess)) || h.ConsecutiveFailures != step.wantCount ||
			(step.wantFailure == nil) != (h.LastFailureAt == nil) ||
			(step.wantFailure != nil && !h.LastFailureAt.Equal(base.Add(*step.wantFailure))) {
			t.Errorf("%s: health = %+v, want last success +%v, last failure +%v, %d failures",
				step.name, h, step.wantSuccess, step.wantFailure, step.wantCount)
		}
	}
}

func durationPtr(d time.Duration) *time.Duration { return &d }

// TestDueDeliveriesCarryTheirLane: a due delivery is read with its
// subscription's rate limit and batch, which the sweeper's push sets on
// the lane it parks the attempt in again.
func TestDueDeliveriesCarryTheirLane(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.NewStore(t)
	if _, err := s.Merchants.EnsureMerchant(ctx, "m1", "2026-05-01"); err != nil {
		t.Fatal(err)
	}
	rate := 7
	batch := &store.Batch{MaxSize: 20, MaxWaitMS: 1500}
	shaped, err := s.Subscriptions.CreateSubscription(ctx, store.NewSubscription{MerchantID: "m1", URL: "https://example.com/a",
		Events: []string{"*"}, RateLimit: &rate, Batch: batch}, []byte("sealed"))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := s.Subscriptions.CreateSubscription(ctx, store.NewSubscription{MerchantID: "m1", URL: "https://example.com/b",
		Events: []string{"*"}}, []byte("sealed"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	ev := store.Event{ID: uuid.New(), MerchantID: "m1", Type: "payout.paid", APIVersion: "2026-05-01", Body: []byte(`{}`), CreatedAt: now}
	if _, _, _, err := s.Events.CreateEvent(ctx, ev, store.Audience{}); err != nil {
		t.Fatal(err)
	}
	due, err := s.Deliveries.DueDeliveries(ctx, now.Add(time.Hour), now, nil, 10)
	if err != nil || len(due) != 2 {
		t.Fatalf("DueDeliveries = %v, %v; want both deliveries", due, err)
	}
	for _, d := range due {
		switch d.SubscriptionID {
		case shaped.ID:
			if d.RateLimit != rate || d.Batch == nil || *d.Batch != *batch {
				t.Errorf("the rate-limited, batched subscription's delivery: rate %d, batch %+v; want %d, %+v", d.RateLimit, d.Batch, rate, *batch)
			}
		case plain.ID:
			if d.RateLimit != 0 || d.Batch != nil {
				t.Errorf("the plain subscription's delivery: rate %d, batch %+v; want none", d.RateLimit, d.Batch)
			}
		}
	}
}
