package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// TestTransformationVersions: a subscription's transformation is stored
// as given, its version counts the code's changes (not a save of the same
// code, not turning it on or off), and a lease carries the version only
// while it is turned on.
func TestTransformationVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.NewStore(t)
	sub, d := newDelivery(t, s, store.Audience{})
	if sub.Transformation != nil {
		t.Fatalf("a new subscription's transformation = %+v, want none", sub.Transformation)
	}
	set := func(code string, enabled bool) *store.Transformation {
		t.Helper()
		got, err := s.Subscriptions.UpdateSubscription(ctx, "m1", sub.ID, store.SubscriptionUpdate{SetTransformation: true,
			Transformation: &store.Transformation{Code: code, Enabled: enabled}})
		if err != nil {
			t.Fatal(err)
		}
		return got.Transformation
	}
	const v1, v2 = "function handler(w) { return w }", "function handler(w) { w.cancel = true; return w }"
	for _, step := range []struct {
		name    string
		code    string
		enabled bool
		version int
	}{
		{"the first code", v1, true, 1},
		{"the same code saved again", v1, true, 1},
		{"turned off", v1, false, 1},
		{"a new code", v2, false, 2},
		{"turned on", v2, true, 2},
	} {
		got := set(step.code, step.enabled)
		if got == nil || got.Code != step.code || got.Enabled != step.enabled || got.Version != step.version {
			t.Fatalf("%s: transformation = %+v, want version %d enabled %v", step.name, got, step.version, step.enabled)
		}
	}
	read, err := s.Subscriptions.TransformationOf(ctx, sub.ID)
	if err != nil || read == nil || read.Version != 2 || read.Code != v2 {
		t.Fatalf("TransformationOf = %+v, %v", read, err)
	}

	now := time.Now()
	l, err := s.Deliveries.LeaseDelivery(ctx, d.ID, d.CreatedAt, 1, now, time.Minute)
	if err != nil || l.TransformationVersion == nil || *l.TransformationVersion != 2 {
		t.Fatalf("lease of a subscription whose transformation is on = %v, %v; want version 2", l.TransformationVersion, err)
	}
	if err := s.Deliveries.ReleaseLease(ctx, l.Delivery, l.LeaseUntil); err != nil {
		t.Fatal(err)
	}
	set(v2, false)
	if l, err = s.Deliveries.LeaseDelivery(ctx, d.ID, d.CreatedAt, 1, now, time.Minute); err != nil || l.TransformationVersion != nil {
		t.Fatalf("lease with the transformation off = %v, %v; want none", l.TransformationVersion, err)
	}

	removed, err := s.Subscriptions.UpdateSubscription(ctx, "m1", sub.ID, store.SubscriptionUpdate{SetTransformation: true})
	if err != nil || removed.Transformation != nil {
		t.Fatalf("removed transformation = %+v, %v", removed.Transformation, err)
	}
}

// TestCancelledAttemptIsSkipped: an attempt a transformation cancelled
// is recorded as skipped with the version that ran; it ends the delivery
// as skipped and moves neither the endpoint's health nor its stats.
func TestCancelledAttemptIsSkipped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.NewStore(t)
	sub, d := newDelivery(t, s, store.Audience{})
	now := time.Now().UTC().Truncate(time.Microsecond)
	version := 3
	code := "transformation_cancelled"
	sent := `{"text":"payout paid"}`
	rec := store.AttemptRecord{Delivery: d, Status: store.DeliverySkipped,
		Attempt: store.Attempt{Number: 1, Status: store.AttemptSkipped, Trigger: store.TriggerScheduled, Error: &code,
			ResponseBody: "cancelled by the transformation", AttemptedAt: now, TransformationVersion: &version, RequestBody: &sent}}
	if err := s.Deliveries.RecordAttempt(ctx, rec); err != nil {
		t.Fatal(err)
	}
	got, err := s.Deliveries.DeliveryByID(ctx, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.DeliverySkipped || len(got.Attempts) != 1 {
		t.Fatalf("delivery = %+v", got)
	}
	a := got.Attempts[0]
	if a.Status != store.AttemptSkipped || a.TransformationVersion == nil || *a.TransformationVersion != 3 || a.RequestBody == nil || *a.RequestBody != sent {
		t.Fatalf("attempt = %+v, want skipped with transformation version 3", a)
	}
	after, err := s.Subscriptions.GetSubscription(ctx, "m1", sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Health.ConsecutiveFailures != 0 || after.Health.LastFailureAt != nil || after.Health.LastSuccessAt != nil {
		t.Fatalf("health after a cancelled attempt = %+v, want untouched", after.Health)
	}
}
