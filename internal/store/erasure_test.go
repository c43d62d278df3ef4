package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// movableClock is a store clock the test moves.
type movableClock struct{ at atomic.Int64 }

func newMovableClock(t time.Time) *movableClock {
	c := &movableClock{}
	c.at.Store(t.UnixNano())
	return c
}
func (c *movableClock) now() time.Time       { return time.Unix(0, c.at.Load()).UTC() }
func (c *movableClock) move(d time.Duration) { c.at.Add(int64(d)) }
func (c *movableClock) option() store.Option { return store.WithClock(c.now) }
func (c *movableClock) ms() time.Time        { return c.now().Truncate(time.Millisecond) }
func ptrTo[T any](v T) *T                    { return &v }
func mustNil(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// erasureFixture is an event of merchant m1 with a payload holding secret,
// fanned out to two subscriptions: the first delivery had one failed
// attempt (a transformed one, so request body and headers were recorded,
// and a response body echoing the payload) and waits for its retry, the
// second was never attempted.
type erasureFixture struct {
	event        store.Event
	tried, fresh store.Delivery
}

func newErasureFixture(t *testing.T, s *store.Store, clock *movableClock, secret string) erasureFixture {
	t.Helper()
	ctx := context.Background()
	_, err := s.Merchants.EnsureMerchant(ctx, "m1", "2026-05-01")
	mustNil(t, "merchant", err)
	for range 2 {
		_, err := s.Subscriptions.CreateSubscription(ctx, store.NewSubscription{MerchantID: "m1", URL: "https://example.com/h",
			Events: []string{"*"}, OrderingKey: ptrTo("payload.customer")}, []byte("sealed"))
		mustNil(t, "subscription", err)
	}
	now := clock.ms()
	id := uuid.New()
	body := fmt.Sprintf(`{"id":%q,"type":"payout.paid","api_version":"2026-05-01","payload":{"customer":%q,"note":%q},"date":"%s"}`,
		id, secret+"-customer", secret, now.Format("2006-01-02T15:04:05.000Z07:00"))
	ev := store.Event{ID: id, MerchantID: "m1", Type: "payout.paid", APIVersion: "2026-05-01", Body: []byte(body), CreatedAt: now}
	_, ds, created, err := s.Events.CreateEvent(ctx, ev, store.Audience{})
	if err != nil || !created || len(ds) != 2 {
		t.Fatalf("CreateEvent = %d deliveries, %v, %v", len(ds), created, err)
	}
	l, err := s.Deliveries.LeaseDelivery(ctx, ds[0].ID, ds[0].CreatedAt, 1, now, time.Minute)
	mustNil(t, "lease", err)
	next := now.Add(time.Hour)
	mustNil(t, "record", s.Deliveries.RecordAttempt(ctx, store.AttemptRecord{Delivery: l.Delivery, Status: store.DeliveryPending, NextAttemptAt: &next,
		Attempt: store.Attempt{Number: 1, Status: store.AttemptFailed, Trigger: store.TriggerScheduled, HTTPStatus: ptrTo(500),
			DurationMS: 12, ResponseBody: "echo " + secret, AttemptedAt: now, TransformationVersion: ptrTo(1),
			RequestBody: ptrTo(`{"note":"` + secret + `"}`), RequestHeaders: map[string]string{"X-Note": secret}}}))
	return erasureFixture{event: ev, tried: ds[0], fresh: ds[1]}
}

// contentHolding lists the columns that hold needle.
func contentHolding(t *testing.T, s *store.Store, needle string) []string {
	t.Helper()
	return storetest.ColumnsHolding(t, s.Pool(), needle)
}

func TestEraseEventLeavesNoContent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newMovableClock(time.Now())
	s := storetest.NewStore(t, clock.option())
	secret := "subject-" + uuid.NewString()
	f := newErasureFixture(t, s, clock, secret)
	if got := contentHolding(t, s, secret); len(got) == 0 {
		t.Fatal("the fixture stored no content: the scan would prove nothing")
	}

	clock.move(time.Minute)
	erasedAt := s.Erasures.Now()
	got, err := s.Erasures.EraseEvent(ctx, store.EraseRequest{EventID: f.event.ID, MerchantID: "m1", Actor: "internal:dpo"})
	mustNil(t, "erase", err)
	want := store.Erasure{EventID: f.event.ID, MerchantID: "m1", ErasedAt: erasedAt, Deliveries: 2, DeliveriesEnded: 2, Attempts: 1}
	if !got.ErasedAt.Equal(want.ErasedAt) || got.Deliveries != 2 || got.DeliveriesEnded != 2 || got.Attempts != 1 {
		t.Fatalf("EraseEvent = %+v, want %+v", got, want)
	}
	if where := contentHolding(t, s, secret); len(where) > 0 {
		t.Fatalf("after erasure the payload is still in %v", where)
	}

	// Reads show the tombstone; the envelope keeps its id, type and date.
	ev, err := s.Events.EventByID(ctx, f.event.ID)
	mustNil(t, "event", err)
	stone := string(store.Tombstone(erasedAt))
	if !strings.Contains(string(ev.Body), `"payload":`+stone) || !strings.HasPrefix(string(ev.Body), `{"id":"`+f.event.ID.String()) {
		t.Fatalf("erased envelope = %s", ev.Body)
	}
	d, err := s.Deliveries.DeliveryByID(ctx, f.tried.ID)
	mustNil(t, "delivery", err)
	if d.Status != store.DeliveryErased || d.NextAttemptAt != nil || len(d.Attempts) != 1 ||
		d.Attempts[0].ResponseBody != stone || *d.Attempts[0].RequestBody != stone || d.Attempts[0].RequestHeaders != nil {
		t.Fatalf("erased delivery = %+v, attempts %+v", d, d.Attempts)
	}

	// A task of either delivery still in Redis leases nothing; an attempt
	// that was in flight records nothing.
	for _, del := range []store.Delivery{f.tried, f.fresh} {
		n := 1
		if del.ID == f.tried.ID {
			n = 2
		}
		if _, err := s.Deliveries.LeaseDelivery(ctx, del.ID, del.CreatedAt, n, clock.now().Add(2*time.Hour), time.Minute); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("lease of an erased delivery = %v, want ErrNotFound", err)
		}
	}
	err = s.Deliveries.RecordAttempt(ctx, store.AttemptRecord{Delivery: f.fresh, Status: store.DeliveryFailed,
		Attempt: store.Attempt{Number: 1, Status: store.AttemptFailed, Trigger: store.TriggerScheduled, ResponseBody: secret, AttemptedAt: clock.now()}})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("late record of an erased delivery = %v, want ErrConflict", err)
	}
	if where := contentHolding(t, s, secret); len(where) > 0 {
		t.Fatalf("a late record put the payload back in %v", where)
	}
	if _, err := s.ManualAttempts.RequestManualAttempts(ctx, "m1", []store.Delivery{f.tried}, clock.now()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("redeliver of an erased delivery = %v, want ErrNotFound", err)
	}

	// Again: the same answer, erased_at unchanged.
	clock.move(time.Hour)
	again, err := s.Erasures.EraseEvent(ctx, store.EraseRequest{EventID: f.event.ID, Actor: "internal"})
	if err != nil || !again.ErasedAt.Equal(got.ErasedAt) || again.Attempts != got.Attempts || again.DeliveriesEnded != got.DeliveriesEnded {
		t.Fatalf("second erasure = %+v, %v; want %+v", again, err, got)
	}
	entries, err := s.Audit.ListAudit(ctx, "m1", store.Page{Limit: 10})
	mustNil(t, "audit", err)
	if len(entries) != 1 || entries[0].Action != store.AuditEventErased || entries[0].Actor != "internal:dpo" ||
		entries[0].Target != f.event.ID.String() {
		t.Fatalf("audit = %+v, want one erasure by internal:dpo", entries)
	}
}

func TestEraseEventRefusesUnknownAndOthers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newMovableClock(time.Now())
	s := storetest.NewStore(t, clock.option())
	f := newErasureFixture(t, s, clock, "x")
	for _, tc := range []struct {
		name string
		req  store.EraseRequest
	}{
		{"unknown event", store.EraseRequest{EventID: uuid.New()}},
		{"another merchant's event", store.EraseRequest{EventID: f.event.ID, MerchantID: "m2"}},
	} {
		if _, err := s.Erasures.EraseEvent(ctx, tc.req); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: EraseEvent = %v, want ErrNotFound", tc.name, err)
		}
	}
	if _, err := s.Erasures.ErasureOf(ctx, f.event.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused erasure was recorded: %v", err)
	}
}
