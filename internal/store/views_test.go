package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// viewsClock is a settable clock for the views tests.
type viewsClock struct{ ns atomic.Int64 }

func (c *viewsClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *viewsClock) Set(t time.Time)         { c.ns.Store(t.UnixNano()) }
func (c *viewsClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

func newViewsStore(t *testing.T) (*store.Store, *viewsClock) {
	t.Helper()
	clock := &viewsClock{}
	clock.Set(time.Now())
	st := storetest.NewStore(t, store.WithClock(clock.Now))
	for _, m := range []string{"m1", "m2"} {
		if _, err := st.Merchants.EnsureMerchant(context.Background(), m, "2026-05-01"); err != nil {
			t.Fatal(err)
		}
	}
	return st, clock
}

// storeEvent stores an event of typ for merchant at, fanning out to the
// merchant's matching subscriptions.
func storeEvent(t *testing.T, st *store.Store, merchant, typ string, at time.Time) (store.Event, []store.Delivery) {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	at = at.UTC().Truncate(time.Millisecond)
	body := fmt.Sprintf(`{"id":%q,"type":%q,"api_version":"2026-05-01","payload":{"n": 1},"date":%q}`,
		id, typ, at.Format(time.RFC3339Nano))
	e, ds, created, err := st.Events.CreateEvent(context.Background(), store.Event{
		ID: id, MerchantID: merchant, Type: typ, APIVersion: "2026-05-01", Body: []byte(body), CreatedAt: at,
	}, store.Audience{})
	if err != nil || !created {
		t.Fatalf("create event: %v (created %v)", err, created)
	}
	return e, ds
}

func newViewsSub(t *testing.T, st *store.Store, merchant string, events ...string) store.Subscription {
	t.Helper()
	sub, err := st.Subscriptions.CreateSubscription(context.Background(), store.NewSubscription{
		MerchantID: merchant, URL: "https://example.com/" + uuid.NewString(), Events: events,
	}, []byte("sealed"))
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

func eventIDs(es []store.Event) []uuid.UUID {
	ids := make([]uuid.UUID, len(es))
	for i, e := range es {
		ids[i] = e.ID
	}
	return ids
}

func TestListEventsFiltersAndPages(t *testing.T) {
	t.Parallel()
	st, _ := newViewsStore(t)
	ctx := context.Background()
	base := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	var paid []store.Event // newest first, as listed
	for i := range 5 {
		e, _ := storeEvent(t, st, "m1", "payout.paid", base.Add(time.Duration(i)*time.Minute))
		paid = append([]store.Event{e}, paid...)
	}
	failed, _ := storeEvent(t, st, "m1", "payout.failed", base.Add(30*time.Second))
	other, _ := storeEvent(t, st, "m2", "payout.paid", base.Add(2*time.Minute))

	all, _, err := st.Views.ListEvents(ctx, "m1", store.EventFilter{}, store.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 6 {
		t.Fatalf("m1 sees %d events, want 6", len(all))
	}
	for i := 1; i < len(all); i++ {
		if all[i].CreatedAt.After(all[i-1].CreatedAt) {
			t.Fatalf("not newest first at %d", i)
		}
	}

	since := base.Add(3 * time.Minute)
	tests := []struct {
		name   string
		filter store.EventFilter
		want   []uuid.UUID
	}{
		{"type", store.EventFilter{Type: "payout.failed"}, []uuid.UUID{failed.ID}},
		{"created_at.gte is inclusive", store.EventFilter{CreatedGTE: &since}, eventIDs(paid[:2])},
		{"both", store.EventFilter{Type: "payout.failed", CreatedGTE: &since}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := st.Views.ListEvents(ctx, "m1", tt.filter, store.Page{Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(eventIDs(got)) != fmt.Sprint(tt.want) && !(len(got) == 0 && len(tt.want) == 0) {
				t.Fatalf("got %v, want %v", eventIDs(got), tt.want)
			}
		})
	}

	// Keyset pages of two walk all five payout.paid events exactly once.
	var walked []uuid.UUID
	p := store.Page{Limit: 2}
	for range 10 {
		got, _, err := st.Views.ListEvents(ctx, "m1", store.EventFilter{Type: "payout.paid"}, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > p.Limit {
			got = got[:p.Limit]
			walked = append(walked, eventIDs(got)...)
			last := got[len(got)-1]
			p.After = &store.Cursor{CreatedAt: last.CreatedAt, ID: last.ID.String()}
			continue
		}
		walked = append(walked, eventIDs(got)...)
		break
	}
	if fmt.Sprint(walked) != fmt.Sprint(eventIDs(paid)) {
		t.Fatalf("pages walked %v, want %v", walked, eventIDs(paid))
	}

	// Another merchant's event is not found, exactly like a missing one.
	if _, err := st.Views.GetEvent(ctx, "m1", other.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("cross-merchant get: %v", err)
	}
	got, err := st.Views.GetEvent(ctx, "m2", other.ID)
	if err != nil || string(got.Body) != string(other.Body) {
		t.Fatalf("get: %v, body %s", err, got.Body)
	}
}

func TestViewsHideRowsPastRetention(t *testing.T) {
	t.Parallel()
	st, clock := newViewsStore(t)
	ctx := context.Background()
	newViewsSub(t, st, "m1", "*")
	e, ds := storeEvent(t, st, "m1", "payout.paid", time.Now())
	if len(ds) != 1 {
		t.Fatalf("%d deliveries", len(ds))
	}
	check := func(visible bool) {
		t.Helper()
		es, _, err := st.Views.ListEvents(ctx, "m1", store.EventFilter{}, store.Page{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		dl, _, err := st.Views.ListDeliveries(ctx, "m1", store.DeliveryFilter{}, store.Page{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		_, errE := st.Views.GetEvent(ctx, "m1", e.ID)
		_, errD := st.Views.GetDelivery(ctx, "m1", ds[0].ID)
		if visible != (len(es) == 1) || visible != (len(dl) == 1) || visible != (errE == nil) || visible != (errD == nil) {
			t.Fatalf("visible=%v: events %d, deliveries %d, get event %v, get delivery %v", visible, len(es), len(dl), errE, errD)
		}
	}
	check(true)
	clock.Advance(store.Retention - time.Hour)
	check(true)
	clock.Advance(2 * time.Hour)
	check(false)
}

func TestListDeliveriesFiltersWithAttempts(t *testing.T) {
	t.Parallel()
	st, _ := newViewsStore(t)
	ctx := context.Background()
	subA := newViewsSub(t, st, "m1", "*")
	subB := newViewsSub(t, st, "m1", "payout.paid")
	newViewsSub(t, st, "m2", "*")
	base := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	e1, d1 := storeEvent(t, st, "m1", "payout.paid", base)                   // to A and B
	_, d2 := storeEvent(t, st, "m1", "payout.failed", base.Add(time.Minute)) // to A
	storeEvent(t, st, "m2", "payout.paid", base)
	if len(d1) != 2 || len(d2) != 1 {
		t.Fatalf("fan-out %d and %d", len(d1), len(d2))
	}

	// d2 fails twice (then gives up); one of d1 succeeds.
	failedD := d2[0]
	for n := 1; n <= 2; n++ {
		status := store.DeliveryPending
		if n == 2 {
			status = store.DeliveryFailed
		}
		code := 500
		if err := st.Deliveries.RecordAttempt(ctx, store.AttemptRecord{Delivery: failedD, Status: status,
			Attempt: store.Attempt{Number: n, Status: store.AttemptFailed, Trigger: store.TriggerScheduled,
				HTTPStatus: &code, DurationMS: 12, ResponseBody: "boom", AttemptedAt: st.Now()}}); err != nil {
			t.Fatal(err)
		}
	}
	okD := d1[0]
	code := 200
	if err := st.Deliveries.RecordAttempt(ctx, store.AttemptRecord{Delivery: okD, Status: store.DeliverySucceeded,
		Attempt: store.Attempt{Number: 1, Status: store.AttemptSucceeded, Trigger: store.TriggerScheduled,
			HTTPStatus: &code, DurationMS: 3, AttemptedAt: st.Now()}}); err != nil {
		t.Fatal(err)
	}

	since := base.Add(30 * time.Second)
	tests := []struct {
		name   string
		filter store.DeliveryFilter
		want   int
	}{
		{"all", store.DeliveryFilter{}, 3},
		{"failed", store.DeliveryFilter{Status: store.DeliveryFailed}, 1},
		{"succeeded", store.DeliveryFilter{Status: store.DeliverySucceeded}, 1},
		{"pending", store.DeliveryFilter{Status: store.DeliveryPending}, 1},
		{"event", store.DeliveryFilter{EventID: &e1.ID}, 2},
		{"subscription", store.DeliveryFilter{SubscriptionID: &subB.ID}, 1},
		{"subscription and status", store.DeliveryFilter{SubscriptionID: &subA.ID, Status: store.DeliveryFailed}, 1},
		{"created_at.gte", store.DeliveryFilter{CreatedGTE: &since}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := st.Views.ListDeliveries(ctx, "m1", tt.filter, store.Page{Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.want {
				t.Fatalf("%d deliveries, want %d", len(got), tt.want)
			}
			for _, d := range got {
				if d.MerchantID != "m1" || d.Attempts == nil || len(d.Attempts) != d.AttemptCount {
					t.Fatalf("delivery %+v", d)
				}
			}
		})
	}

	got, _, err := st.Views.ListDeliveries(ctx, "m1", store.DeliveryFilter{Status: store.DeliveryFailed}, store.Page{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if a := got[0].Attempts; len(a) != 2 || a[0].Number != 1 || a[1].Number != 2 || a[1].ResponseBody != "boom" || *a[1].HTTPStatus != 500 {
		t.Fatalf("attempts %+v", a)
	}
	one, err := st.Views.GetDelivery(ctx, "m1", failedD.ID)
	if err != nil || len(one.Attempts) != 2 || one.Status != store.DeliveryFailed {
		t.Fatalf("get delivery: %v %+v", err, one)
	}
	if _, err := st.Views.GetDelivery(ctx, "m2", failedD.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("cross-merchant get delivery: %v", err)
	}
}

func TestClaimFailureNotificationOncePerInterval(t *testing.T) {
	t.Parallel()
	st, clock := newViewsStore(t)
	ctx := context.Background()
	email := "ops@example.com"
	if _, err := st.Merchants.UpdateMerchant(ctx, "m1", "2026-05-01", store.MerchantSettings{NotificationEmail: &email}); err != nil {
		t.Fatal(err)
	}
	sub := newViewsSub(t, st, "m1", "*")

	// Concurrent claims: exactly one wins.
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			n, err := st.EndpointHealth.ClaimFailureNotification(ctx, sub.ID, time.Hour)
			switch {
			case err == nil:
				wins.Add(1)
				if n.Email == nil || *n.Email != email || n.URL != sub.URL || n.MerchantID != "m1" {
					t.Errorf("notice %+v", n)
				}
			case !errors.Is(err, store.ErrConflict):
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d claims won, want 1", wins.Load())
	}
	clock.Advance(59 * time.Minute)
	if _, err := st.EndpointHealth.ClaimFailureNotification(ctx, sub.ID, time.Hour); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("claim within the hour: %v", err)
	}
	clock.Advance(2 * time.Minute)
	if _, err := st.EndpointHealth.ClaimFailureNotification(ctx, sub.ID, time.Hour); err != nil {
		t.Fatalf("claim after the hour: %v", err)
	}
}

// TestClaimFailureNotificationWaitsForAnAddress: without a notification
// address there is nothing to claim; the claim is not used up, and the
// first failure after the address is set gets it.
func TestClaimFailureNotificationWaitsForAnAddress(t *testing.T) {
	t.Parallel()
	st, _ := newViewsStore(t)
	ctx := context.Background()
	sub := newViewsSub(t, st, "m1", "*")
	for _, email := range []string{"", "unset"} {
		if email != "unset" {
			if _, err := st.Merchants.UpdateMerchant(ctx, "m1", "2026-05-01", store.MerchantSettings{NotificationEmail: &email}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := st.EndpointHealth.ClaimFailureNotification(ctx, sub.ID, time.Hour); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("claim with address %q: %v, want ErrConflict", email, err)
		}
	}
	email := "ops@example.com"
	if _, err := st.Merchants.UpdateMerchant(ctx, "m1", "2026-05-01", store.MerchantSettings{NotificationEmail: &email}); err != nil {
		t.Fatal(err)
	}
	n, err := st.EndpointHealth.ClaimFailureNotification(ctx, sub.ID, time.Hour)
	if err != nil || n.Email == nil || *n.Email != email {
		t.Fatalf("claim once the address is set = %+v, %v", n, err)
	}
}

// loadBigMerchant writes, straight through SQL, 30,000 events and 30,000
// deliveries of m1 over the 42 hours before today's midnight UTC (row i at
// midnight - 5i seconds), and 10,000 deliveries of m2. m1's deliveries go
// to subBig, except every tenth to another subscription; the only failed
// ones are 50 of subBig's among its oldest 5,000; one event of m1 fans out
// to five deliveries. One event in a thousand is a payout.failed.
func loadBigMerchant(t *testing.T, st *store.Store) (subBig, subOfM2, fannedOut uuid.UUID) {
	t.Helper()
	subBig, subOfM2, fannedOut = uuid.New(), uuid.New(), uuid.New()
	ctx := context.Background()
	// The partitions of the whole retention, as in production.
	if _, err := st.Maintenance.EnsurePartitions(ctx, time.Now().Add(-store.Retention), 31); err != nil {
		t.Fatal(err)
	}
	// Anchored at midnight, not at now: run just after midnight, today's
	// partition would hold a few hundred rows, which the planner rightly
	// reads whole (cheaper than an index), more than one page's bound.
	anchor := time.Now().UTC().Truncate(24 * time.Hour)
	insertDeliveries := `
		INSERT INTO deliveries (id, merchant_id, event_id, event_created_at, event_type, subscription_id,
		                        status, attempt_count, created_at, updated_at)
		SELECT gen_random_uuid(), $1, coalesce($2, gen_random_uuid()), $7::timestamptz - i * interval '5 seconds', 'payout.paid',
		       CASE WHEN i % 10 = 0 AND $3 THEN gen_random_uuid() ELSE coalesce($4, gen_random_uuid()) END,
		       CASE WHEN i > 25000 AND i % 100 = 1 THEN 'failed' ELSE $5 END, 1,
		       $7::timestamptz - i * interval '5 seconds', now()
		FROM generate_series(1, $6::int) i`
	for _, stmt := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO events (id, merchant_id, type, api_version, body, created_at)
		  SELECT gen_random_uuid(), 'm1', CASE WHEN i % 1000 = 3 THEN 'payout.failed' ELSE 'payout.paid' END,
		         '2026-05-01', '{}', $1::timestamptz - i * interval '5 seconds'
		  FROM generate_series(1, 30000) i`, []any{anchor}},
		{insertDeliveries, []any{"m1", nil, true, subBig, "succeeded", 30000, anchor}},
		{insertDeliveries, []any{"m2", nil, false, subOfM2, "succeeded", 10000, anchor}},
		{insertDeliveries, []any{"m1", fannedOut, false, nil, "pending", 5, anchor}},
		// As autovacuum would: generic plans are costed from statistics.
		{`ANALYZE events, deliveries`, nil},
	} {
		if _, err := st.Pool().Exec(ctx, stmt.sql, stmt.args...); err != nil {
			t.Fatalf("%v\n%s", err, stmt.sql)
		}
	}
	return subBig, subOfM2, fannedOut
}

// TestListReadsAreBounded holds the guarantee that no list request reads an
// unbounded number of rows, whatever the merchant's volume: each statement
// the store runs walks an index in the list's order, so that LIMIT stops
// the read after one page (plus the first row of each partition, which the
// merge of partitions reads), and a filter that its index does not serve is
// checked on at most MaxRowsExamined rows. It counts the rows that the exact
// statements read, from EXPLAIN ANALYZE.
func TestListReadsAreBounded(t *testing.T) {
	t.Parallel()
	st, _ := newViewsStore(t)
	ctx := context.Background()
	subBig, subOfM2, fannedOut := loadBigMerchant(t, st)
	var partitions int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_inherits WHERE inhparent = 'deliveries'::regclass`).Scan(&partitions); err != nil {
		t.Fatal(err)
	}
	// A cursor deep in the list: the 20,000th newest delivery of m1.
	var deep store.Cursor
	if err := st.Pool().QueryRow(ctx, `SELECT created_at, id::text FROM deliveries WHERE merchant_id = 'm1'
		ORDER BY created_at DESC, id DESC OFFSET 19999 LIMIT 1`).Scan(&deep.CreatedAt, &deep.ID); err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-30 * time.Hour)
	page := store.Page{Limit: 100}
	deepPage := store.Page{Limit: 100, After: &deep}
	// The planner may walk an index that serves fewer filters when its
	// statistics say that the others keep most rows: then it reads a few
	// more rows than it keeps, never twice as many.
	onePage := 2*(page.Limit+1) + partitions
	tests := []struct {
		name    string
		explain func() (store.ExplainedList, error)
		max     int
	}{
		{"events", func() (store.ExplainedList, error) {
			return st.ExplainListEvents(ctx, "m1", store.EventFilter{}, page)
		}, onePage},
		{"events, deep cursor", func() (store.ExplainedList, error) {
			return st.ExplainListEvents(ctx, "m1", store.EventFilter{}, deepPage)
		}, onePage},
		{"events of a rare type", func() (store.ExplainedList, error) {
			return st.ExplainListEvents(ctx, "m1", store.EventFilter{Type: "payout.failed", CreatedGTE: &since}, page)
		}, onePage},
		{"events with a failed delivery (residual: each event's deliveries by deliveries_event_idx)", func() (store.ExplainedList, error) {
			return st.ExplainListEvents(ctx, "m1", store.EventFilter{DeliveryStatus: store.DeliveryFailed}, page)
		}, 3 * store.MaxRowsExamined},
		{"events with a succeeded delivery", func() (store.ExplainedList, error) {
			return st.ExplainListEvents(ctx, "m1", store.EventFilter{DeliveryStatus: store.DeliverySucceeded}, deepPage)
		}, 3 * store.MaxRowsExamined},
		{"deliveries", func() (store.ExplainedList, error) {
			return st.ExplainListDeliveries(ctx, "m1", store.DeliveryFilter{}, page)
		}, onePage},
		{"deliveries, deep cursor", func() (store.ExplainedList, error) {
			return st.ExplainListDeliveries(ctx, "m1", store.DeliveryFilter{}, deepPage)
		}, onePage},
		{"failed deliveries (rare)", func() (store.ExplainedList, error) {
			return st.ExplainListDeliveries(ctx, "m1", store.DeliveryFilter{Status: store.DeliveryFailed}, page)
		}, onePage},
		{"succeeded deliveries (nearly all)", func() (store.ExplainedList, error) {
			return st.ExplainListDeliveries(ctx, "m1", store.DeliveryFilter{Status: store.DeliverySucceeded}, deepPage)
		}, onePage},
		{"pending deliveries (few)", func() (store.ExplainedList, error) {
			return st.ExplainListDeliveries(ctx, "m1", store.DeliveryFilter{Status: store.DeliveryPending}, page)
		}, onePage},
		{"failed deliveries, deep cursor", func() (store.ExplainedList, error) {
			return st.ExplainListDeliveries(ctx, "m1", store.DeliveryFilter{Status: store.DeliveryFailed, CreatedGTE: &since}, deepPage)
		}, onePage},
		{"deliveries of a subscription", func() (store.ExplainedList, error) {
			return st.ExplainListDeliveries(ctx, "m1", store.DeliveryFilter{SubscriptionID: &subBig}, deepPage)
		}, onePage},
		{"deliveries of another merchant's subscription", func() (store.ExplainedList, error) {
			return st.ExplainListDeliveries(ctx, "m1", store.DeliveryFilter{SubscriptionID: &subOfM2}, page)
		}, partitions},
		{"deliveries of an event", func() (store.ExplainedList, error) {
			return st.ExplainListDeliveries(ctx, "m1", store.DeliveryFilter{EventID: &fannedOut, Status: store.DeliveryPending}, page)
		}, 5},
		{"failed deliveries of a subscription (no index serves both)", func() (store.ExplainedList, error) {
			return st.ExplainListDeliveries(ctx, "m1", store.DeliveryFilter{SubscriptionID: &subBig, Status: store.DeliveryFailed}, page)
		}, 2 * store.MaxRowsExamined},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.explain()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("read %d rows (at most %d)", got.RowsExamined, tt.max)
			if got.RowsExamined > tt.max {
				t.Fatalf("the statement read %d rows, want at most %d; plan:\n%s", got.RowsExamined, tt.max, got.Plan)
			}
		})
	}
}

// TestListResumesAfterRowsExaminedCap walks a list whose filters no one
// index serves: pages that stop at MaxRowsExamined come back short (even
// empty) with a resume cursor, and the walk still yields every match once,
// newest first.
func TestListResumesAfterRowsExaminedCap(t *testing.T) {
	t.Parallel()
	st, _ := newViewsStore(t)
	ctx := context.Background()
	subBig, _, _ := loadBigMerchant(t, st)
	f := store.DeliveryFilter{SubscriptionID: &subBig, Status: store.DeliveryFailed}
	var walked []store.Delivery
	short := 0
	p := store.Page{Limit: 10}
	for range 100 {
		got, resume, err := st.Views.ListDeliveries(ctx, "m1", f, p)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case len(got) > p.Limit:
			walked = append(walked, got[:p.Limit]...)
			last := got[p.Limit-1]
			p.After = &store.Cursor{CreatedAt: last.CreatedAt, ID: last.ID.String()}
			continue
		case resume != nil:
			short++
			walked = append(walked, got...)
			p.After = resume
			continue
		}
		walked = append(walked, got...)
		break
	}
	if short == 0 {
		t.Fatalf("no page stopped at the cap: the test data no longer exercises it")
	}
	if len(walked) != 50 {
		t.Fatalf("walked %d failed deliveries of the subscription, want 50", len(walked))
	}
	seen := map[uuid.UUID]bool{}
	for i, d := range walked {
		if d.Status != store.DeliveryFailed || d.SubscriptionID != subBig || seen[d.ID] {
			t.Fatalf("row %d: %+v (seen before: %v)", i, d, seen[d.ID])
		}
		seen[d.ID] = true
		if i > 0 && !d.CreatedAt.Before(walked[i-1].CreatedAt) {
			t.Fatalf("row %d not older than row %d", i, i-1)
		}
	}
}
