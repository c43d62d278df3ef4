package maintain

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// TestMaintainerHonoursMerchantRetention: a merchant whose retention is 2
// days loses, once the clock is 3 days on, its ended deliveries, their
// attempts, their events and its attempt stats, in batches bounded by the
// budget (a round that runs out leaves the rest for the next); its pending
// delivery and that one's event stay until it ends, and a merchant at the
// engine's retention loses nothing. The stats window stops showing the old
// hours as soon as the retention is set, before any deletion.
func TestMaintainerHonoursMerchantRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var at atomic.Int64
	at.Store(time.Now().UTC().UnixNano())
	now := func() time.Time { return time.Unix(0, at.Load()).UTC() }
	st := storetest.NewStore(t, store.WithClock(now))
	start := st.Now().Truncate(time.Millisecond)

	type rows struct{ deliveries, attempts, events, stats int }
	count := func(merchant string) rows {
		t.Helper()
		var r rows
		err := st.Pool().QueryRow(ctx, `SELECT
			(SELECT count(*) FROM deliveries WHERE merchant_id = $1),
			(SELECT count(*) FROM attempts a JOIN deliveries d ON d.id = a.delivery_id WHERE d.merchant_id = $1),
			(SELECT count(*) FROM events WHERE merchant_id = $1),
			(SELECT count(*) FROM attempt_stats s JOIN subscriptions u ON u.id = s.subscription_id WHERE u.merchant_id = $1)`,
			merchant).Scan(&r.deliveries, &r.attempts, &r.events, &r.stats)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	subs := map[string]uuid.UUID{}
	for _, m := range []string{"m_short", "m_long"} {
		if _, err := st.Merchants.EnsureMerchant(ctx, m, "2026-05-01"); err != nil {
			t.Fatal(err)
		}
		sub, err := st.Subscriptions.CreateSubscription(ctx, store.NewSubscription{MerchantID: m, URL: "https://example.com/h",
			Events: []string{"*"}}, []byte("sealed"))
		if err != nil {
			t.Fatal(err)
		}
		subs[m] = sub.ID
		// Two deliveries that ended, one still retrying.
		for i, status := range []store.DeliveryStatus{store.DeliverySucceeded, store.DeliveryFailed, store.DeliveryPending} {
			ev := store.Event{ID: uuid.New(), MerchantID: m, Type: "payout.paid", APIVersion: "2026-05-01", Body: []byte(`{}`),
				CreatedAt: start.Add(time.Duration(i) * time.Millisecond)}
			_, ds, _, err := st.Events.CreateEvent(ctx, ev, store.Audience{})
			if err != nil || len(ds) != 1 {
				t.Fatalf("CreateEvent = %v, %v", ds, err)
			}
			var next *time.Time
			if status == store.DeliveryPending {
				n := start.Add(100 * time.Hour)
				next = &n
			}
			attempt := store.AttemptSucceeded
			if status != store.DeliverySucceeded {
				attempt = store.AttemptFailed
			}
			if err := st.Deliveries.RecordAttempt(ctx, store.AttemptRecord{Delivery: ds[0], Status: status, NextAttemptAt: next,
				Attempt: store.Attempt{Number: 1, Status: attempt, Trigger: store.TriggerScheduled, DurationMS: 5, AttemptedAt: start}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	two := 2
	if _, err := st.Merchants.UpdateMerchant(ctx, "m_short", "2026-05-01", store.MerchantSettings{RetentionDays: &two, Actor: "internal"}); err != nil {
		t.Fatal(err)
	}

	at.Add(int64(3 * 24 * time.Hour))
	window := store.StatsWindow{From: start.Truncate(time.Hour), Step: time.Hour, Buckets: 1}
	for m, want := range map[string]int{"m_short": 0, "m_long": 3} {
		_, total, err := st.Views.SubscriptionStats(ctx, subs[m], window)
		if got := total.Succeeded + total.Retrying + total.Failed; err != nil || got != want {
			t.Fatalf("stats of %s three days on = %d attempts, %v; want %d", m, got, err, want)
		}
	}

	var tick clock.Func = now
	m, err := NewMaintainer(MaintainerConfig{Store: st.Maintenance, PartitionsAhead: store.PartitionsAhead,
		RetentionBudget: store.RetentionBudget{Batch: 1, Statements: 1}, Runtime: Runtime{Clock: tick}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := count("m_short"), (rows{2, 2, 3, 1}); got != want {
		t.Fatalf("after a round of one statement: %+v, want %+v", got, want)
	}
	m.cfg.RetentionBudget = DefaultRetentionBudget
	if err := m.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := count("m_short"), (rows{1, 1, 1, 0}); got != want {
		t.Errorf("short retention after a full round: %+v, want %+v (the pending delivery and its event kept)", got, want)
	}
	if got, want := count("m_long"), (rows{3, 3, 3, 1}); got != want {
		t.Errorf("engine retention: %+v, want %+v (nothing deleted)", got, want)
	}
}
