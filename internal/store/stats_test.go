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

// TestSubscriptionStatsFromRecordedAttempts records attempts through the
// recorder's statement and reads them back by hour: outcomes counted where
// the attempts fell, a test delivery's attempt left out, another
// subscription's apart, the percentiles within their slots, the request
// headers kept with the attempt.
func TestSubscriptionStatsFromRecordedAttempts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.NewStore(t)
	if _, err := st.Merchants.EnsureMerchant(ctx, "m_s", "2026-01-01"); err != nil {
		t.Fatal(err)
	}
	sub, other := newSubscription(t, st, "m_s"), newSubscription(t, st, "m_s")
	hour := st.Now().Truncate(time.Hour)
	w := store.StatsWindow{From: hour.Add(-2 * time.Hour), Step: time.Hour, Buckets: 3}
	ok, fail := 200, 500
	cases := []struct {
		to       uuid.UUID
		test     bool
		at       time.Time
		status   *int
		ms       int
		dstatus  store.DeliveryStatus
		attempts store.AttemptStatus
	}{
		{sub, false, hour.Add(-2*time.Hour + time.Minute), &ok, 40, store.DeliverySucceeded, store.AttemptSucceeded},
		{sub, false, hour.Add(-2*time.Hour + 2*time.Minute), &fail, 120, store.DeliveryPending, store.AttemptFailed},
		{sub, false, hour.Add(-2*time.Hour + 3*time.Minute), nil, 30000, store.DeliveryFailed, store.AttemptFailed},
		{sub, false, hour.Add(time.Minute), &ok, 8, store.DeliverySucceeded, store.AttemptSucceeded},
		{sub, true, hour.Add(2 * time.Minute), &ok, 8, store.DeliverySucceeded, store.AttemptSucceeded},
		{other, false, hour.Add(3 * time.Minute), &ok, 8, store.DeliverySucceeded, store.AttemptSucceeded},
	}
	var batch []store.AttemptRecord
	for _, c := range cases {
		ev := store.Event{ID: uuid.New(), MerchantID: "m_s", Type: "payout.paid", APIVersion: "2026-01-01", Body: []byte(`{}`), CreatedAt: st.Now()}
		_, ds, _, err := st.Events.CreateEvent(ctx, ev, store.Audience{SubscriptionID: &c.to})
		if err != nil || len(ds) != 1 {
			t.Fatalf("CreateEvent: %v %v", ds, err)
		}
		if c.test {
			if _, err := st.Pool().Exec(ctx, `UPDATE deliveries SET test = true WHERE id = $1`, ds[0].ID); err != nil {
				t.Fatal(err)
			}
		}
		batch = append(batch, store.AttemptRecord{Delivery: ds[0], Status: c.dstatus,
			Attempt: store.Attempt{Number: 1, Status: c.attempts, Trigger: store.TriggerScheduled, HTTPStatus: c.status,
				DurationMS: c.ms, AttemptedAt: c.at, RequestHeaders: map[string]string{"webhook-id": ev.ID.String()}}})
	}
	errs, err := st.Deliveries.RecordAttempts(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	d, err := st.Deliveries.DeliveryByID(ctx, batch[0].Delivery.ID)
	if err != nil || len(d.Attempts) != 1 || d.Attempts[0].RequestHeaders["webhook-id"] == "" {
		t.Fatalf("the attempt's request headers did not come back: %+v %v", d.Attempts, err)
	}

	buckets, totals, err := st.Views.SubscriptionStats(ctx, sub, w)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ succeeded, retrying, failed int }{{1, 1, 1}, {0, 0, 0}, {1, 0, 0}}
	if len(buckets) != len(want) {
		t.Fatalf("%d buckets, want %d", len(buckets), len(want))
	}
	for i, b := range buckets {
		if b.Start == nil || !b.Start.Equal(w.From.Add(time.Duration(i)*time.Hour)) {
			t.Errorf("bucket %d starts %v", i, b.Start)
		}
		if got := (struct{ succeeded, retrying, failed int }{b.Succeeded, b.Retrying, b.Failed}); got != want[i] {
			t.Errorf("bucket %d counts %+v, want %+v", i, got, want[i])
		}
	}
	// Bucket 0: responses of 40 ms (slot 30-50) and 120 ms (slot 100-150);
	// the timeout had no response. The median is the first's slot, the
	// 95th the second's.
	within := func(name string, v *float64, lo, hi float64) {
		t.Helper()
		if v == nil || *v < lo || *v > hi {
			t.Errorf("%s = %v, want within [%v, %v]", name, v, lo, hi)
		}
	}
	within("bucket 0 p50", buckets[0].P50MS, 30, 50)
	within("bucket 0 p95", buckets[0].P95MS, 100, 150)
	if buckets[1].P50MS != nil || buckets[1].P95MS != nil {
		t.Errorf("an empty bucket has percentiles %v %v", buckets[1].P50MS, buckets[1].P95MS)
	}
	within("bucket 2 p50", buckets[2].P50MS, 7, 10)
	if totals.Start != nil || totals.Succeeded != 2 || totals.Retrying != 1 || totals.Failed != 1 {
		t.Errorf("totals %+v, want 2 succeeded, 1 retrying, 1 failed", totals)
	}
	within("window p95", totals.P95MS, 100, 150)
}

// TestSubscriptionStatsAtAMillionAttempts loads a million attempts of one
// endpoint over the last 24 hours, rolled up as the recorder rolls them up,
// and explains the stats read of 24 hours and of 7 days: it reads
// attempt_stats by its primary key, a few rows per hour, never the
// attempts. The time EXPLAIN measured is logged, not asserted (the machine
// running the tests is not quiet).
func TestSubscriptionStatsAtAMillionAttempts(t *testing.T) {
	storetest.FullLane(t, "a million attempts")
	t.Parallel()
	ctx := context.Background()
	st := storetest.NewStore(t)
	if _, err := st.Merchants.EnsureMerchant(ctx, "m_m", "2026-01-01"); err != nil {
		t.Fatal(err)
	}
	sub, other := newSubscription(t, st, "m_m"), newSubscription(t, st, "m_m")
	now := st.Now()
	const attempts = 1_000_000
	// Attempts of the day's partitions (yesterday's and today's exist),
	// one every 86 ms back from now; one in ten failed, durations spread
	// over 0-900 ms. The rollup groups them as attemptStatsRollUp does.
	_, err := st.Pool().Exec(ctx, `
		INSERT INTO attempts (delivery_id, delivery_created_at, number, status, trigger, http_status, duration_ms, attempted_at)
		SELECT gen_random_uuid(), $1::timestamptz - g * interval '86 ms', 1,
			CASE WHEN g % 10 = 0 THEN 'failed' ELSE 'succeeded' END, 'scheduled',
			CASE WHEN g % 10 = 0 THEN 500 ELSE 200 END, ((g::int8 * 7919) % 900)::int, $1::timestamptz - g * interval '86 ms'
		FROM generate_series(1, $2::int) g`, now, attempts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Pool().Exec(ctx, `
		INSERT INTO attempt_stats (subscription_id, hour, slot, succeeded, retrying, failed)
		SELECT s.sub, date_trunc('hour', attempted_at, 'UTC'), attempt_duration_slot(http_status, duration_ms),
			count(*) FILTER (WHERE status = 'succeeded'), count(*) FILTER (WHERE status = 'failed'), 0
		FROM attempts, (VALUES ($1::uuid), ($2::uuid)) s(sub)
		GROUP BY 1, 2, 3`, sub, other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, `ANALYZE attempt_stats`); err != nil {
		t.Fatal(err)
	}
	end := now.Truncate(time.Hour)
	windows := map[string]store.StatsWindow{
		"24h": {From: end.Add(-23 * time.Hour), Step: time.Hour, Buckets: 24},
		"7d":  {From: now.Truncate(6 * time.Hour).Add(-27 * 6 * time.Hour), Step: 6 * time.Hour, Buckets: 28},
	}
	for name, w := range windows {
		_, totals, err := st.Views.SubscriptionStats(ctx, sub, w)
		if err != nil {
			t.Fatal(err)
		}
		// The 24 h window starts at the hour 23 hours back: the attempts
		// before it fall outside.
		if n := totals.Succeeded + totals.Retrying + totals.Failed; n < attempts*23/24 || n > attempts {
			t.Errorf("%s: %d attempts counted, want about %d", name, n, attempts)
		}
		ex, err := st.ExplainSubscriptionStats(ctx, sub, w)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("stats %s of an endpoint with %d attempts: %d rows examined, %.2f ms (EXPLAIN ANALYZE)", name, attempts, ex.RowsExamined, ex.ExecutionMS)
		if !strings.Contains(ex.Plan, "attempt_stats_pkey") {
			t.Errorf("%s: the plan does not read attempt_stats by its primary key:\n%s", name, ex.Plan)
		}
		if strings.Contains(ex.Plan, `"Relation Name": "attempts`) {
			t.Errorf("%s: the plan reads the attempts:\n%s", name, ex.Plan)
		}
		// At most every slot of every hour of the window.
		if limit := 30 * w.Buckets * int(w.Step/time.Hour); ex.RowsExamined > limit {
			t.Errorf("%s: %d rows examined, want at most %d:\n%s", name, ex.RowsExamined, limit, ex.Plan)
		}
	}
}
