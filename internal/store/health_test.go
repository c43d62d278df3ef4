package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// TestSubscriptionAttemptsSince counts on a few thousand deliveries: the
// endpoint's 4,000 deliveries, updated over the last ~66 hours (two
// attempts each, the second a success when the delivery's number is even),
// 4,000 of another endpoint, and test deliveries; the count is exact, and
// the plan reads the window's deliveries by the index, not the endpoint's
// older ones nor the other endpoint's (empty partitions may be scanned:
// they hold nothing to read).
func TestSubscriptionAttemptsSince(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.NewStore(t)
	if _, err := st.Merchants.EnsureMerchant(ctx, "m_h", "2026-01-01"); err != nil {
		t.Fatal(err)
	}
	sub := newSubscription(t, st, "m_h")
	other := newSubscription(t, st, "m_h")
	now := st.Now()
	// Deliveries are all created now (today's partition exists); what
	// dates an attempt is its attempted_at and its delivery's updated_at.
	const perEndpoint = 4000
	_, err := st.Pool().Exec(ctx, `
		WITH d AS (
			INSERT INTO deliveries (id, merchant_id, event_id, event_created_at, event_type, subscription_id, status, test,
				attempt_count, created_at, updated_at)
			SELECT gen_random_uuid(), 'm_h', gen_random_uuid(), $1::timestamptz, 'payout.paid', s.sub, 'succeeded', i % 10 = 0,
				2, $1::timestamptz, $1::timestamptz - i * interval '1 minute'
			FROM generate_series(1, $4::int) i, (VALUES ($2::uuid), ($3::uuid)) s(sub)
			RETURNING id, created_at, updated_at, (extract(epoch FROM $1::timestamptz - updated_at) / 60)::int AS i
		)
		INSERT INTO attempts (delivery_id, delivery_created_at, number, status, trigger, duration_ms, attempted_at)
		SELECT id, created_at, n, CASE WHEN n = 2 AND i % 2 = 0 THEN 'succeeded' ELSE 'failed' END, 'scheduled', 5,
			updated_at - (2 - n) * interval '1 minute'
		FROM d, generate_series(1, 2) n`, now, sub, other, perEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, `ANALYZE deliveries; ANALYZE attempts`); err != nil {
		t.Fatal(err)
	}

	since := now.Add(-24 * time.Hour)
	got, err := st.EndpointHealth.SubscriptionAttemptsSince(ctx, "m_h", sub, since)
	if err != nil {
		t.Fatal(err)
	}
	// Delivery i (1..4000) is updated i minutes ago, its attempts i and
	// i+1 minutes ago; every tenth is a test delivery.
	var want store.AttemptCounts
	for i := 1; i <= perEndpoint; i++ {
		if i%10 == 0 {
			continue
		}
		for n := 1; n <= 2; n++ {
			if at := now.Add(-time.Duration(i+2-n) * time.Minute); !at.Before(since) {
				want.Attempts++
				if n == 2 && i%2 == 0 {
					want.Succeeded++
				}
			}
		}
	}
	if got != want {
		t.Errorf("counts %+v, want %+v", got, want)
	}
	if n, err := st.EndpointHealth.SubscriptionAttemptsSince(ctx, "m_other", sub, since); err != nil || n.Attempts != 0 {
		t.Errorf("another merchant counts %+v, %v", n, err)
	}

	ex, err := st.ExplainSubscriptionAttemptsSince(ctx, "m_h", sub, since)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("health of one endpoint among %d deliveries (%d attempts): %d rows examined, %.2f ms",
		2*perEndpoint, 4*perEndpoint, ex.RowsExamined, ex.ExecutionMS)
	if !strings.Contains(ex.Plan, "subscription_id_updated_at_idx") {
		t.Errorf("the plan does not use deliveries_subscription_updated_idx:\n%s", ex.Plan)
	}
	// The window holds 1,440 of the endpoint's deliveries: each read once
	// by the index and its two attempts by primary key.
	if limit := 3*24*60 + 100; ex.RowsExamined > limit {
		t.Errorf("%d rows examined, want at most %d (the window's deliveries and their attempts):\n%s", ex.RowsExamined, limit, ex.Plan)
	}
}

// newSubscription stores a subscription of merchant.
func newSubscription(t *testing.T, st *store.Store, merchant string) uuid.UUID {
	t.Helper()
	s, err := st.Subscriptions.CreateSubscription(context.Background(), store.NewSubscription{MerchantID: merchant, URL: "https://example.com/h",
		Events: []string{"*"}}, []byte("sealed"))
	if err != nil {
		t.Fatal(err)
	}
	return s.ID
}
