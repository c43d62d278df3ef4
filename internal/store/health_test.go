package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// TestSubscriptionAttemptsFrom counts from the hourly rollup: the
// endpoint's rows of 72 hours (two response-time slots an hour) beside
// another endpoint's of the same merchant and 300 others'; the count holds the hours from the one holding from,
// that hour whole, and the plan reads the endpoint's rows of those hours
// only. (That recording an attempt counts it is TestEndpointHealth's, in
// admin, through the API.)
func TestSubscriptionAttemptsFrom(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.NewStore(t)
	if _, err := st.Merchants.EnsureMerchant(ctx, "m_h", "2026-01-01"); err != nil {
		t.Fatal(err)
	}
	sub := newSubscription(t, st, "m_h")
	other := newSubscription(t, st, "m_h")
	now := st.Now().UTC()
	// Hour h ago (0..71): slot 0 with h+1 succeeded and 1 retrying, slot 3
	// with 2 failed, for both endpoints.
	_, err := st.Pool().Exec(ctx, `
		INSERT INTO attempt_stats (subscription_id, hour, slot, succeeded, retrying, failed)
		SELECT s.sub, date_trunc('hour', $1::timestamptz, 'UTC') - h * interval '1 hour', slot,
			CASE WHEN slot = 0 THEN h + 1 ELSE 0 END, CASE WHEN slot = 0 THEN 1 ELSE 0 END, CASE WHEN slot = 3 THEN 2 ELSE 0 END
		FROM generate_series(0, 71) h, (VALUES (0), (3)) sl(slot), (VALUES ($2::uuid), ($3::uuid)) s(sub)`, now, sub, other)
	if err != nil {
		t.Fatal(err)
	}
	// Other endpoints' rows, as a deployment's rollup holds them.
	if _, err := st.Pool().Exec(ctx, `
		INSERT INTO attempt_stats (subscription_id, hour, slot, succeeded)
		SELECT s, date_trunc('hour', $1::timestamptz, 'UTC') - h * interval '1 hour', 0, 1
		FROM generate_series(0, 71) h, (SELECT gen_random_uuid() FROM generate_series(1, 300)) o(s)`, now); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, `ANALYZE attempt_stats`); err != nil {
		t.Fatal(err)
	}
	// From 23.5 hours ago: the hour holding it (23 hours ago, whole) and
	// the 23 after it.
	from := now.Truncate(time.Hour).Add(-23*time.Hour + 30*time.Minute)
	var want store.AttemptCounts
	for h := 0; h <= 23; h++ {
		want.Succeeded += h + 1
		want.Attempts += h + 1 + 1 + 2
	}
	got, err := st.EndpointHealth.SubscriptionAttemptsFrom(ctx, "m_h", sub, from)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("counts %+v, want %+v", got, want)
	}
	if n, err := st.EndpointHealth.SubscriptionAttemptsFrom(ctx, "m_other", sub, from); err != nil || n.Attempts != 0 {
		t.Errorf("another merchant counts %+v, %v", n, err)
	}

	ex, err := st.ExplainSubscriptionAttemptsFrom(ctx, "m_h", sub, from)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("health of one endpoint among 21,888 rollup rows: %d rows examined, %.2f ms", ex.RowsExamined, ex.ExecutionMS)
	// The window's 48 rows of the endpoint, and its subscription's row.
	if limit := 48 + 10; ex.RowsExamined > limit {
		t.Errorf("%d rows examined, want at most %d (the window's rows of the endpoint):\n%s", ex.RowsExamined, limit, ex.Plan)
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
