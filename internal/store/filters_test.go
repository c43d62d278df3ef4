package store_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/store"
)

// TestMerchantWithFilters: the merchant comes with the filters of exactly
// the endpoints an event of the type would reach and that have one, a
// disabled one included (its delivery is skipped); the filter, the sealed
// headers and their clearing round-trip through an update.
func TestMerchantWithFilters(t *testing.T) {
	t.Parallel()
	st, ctx := newSubStore(t)
	expr := func(s string) *string { return &s }
	withFilter := func(merchant, filter string, events ...string) store.Subscription {
		t.Helper()
		sub := createSub(t, st, merchant, events...)
		got, err := st.Subscriptions.UpdateSubscription(ctx, merchant, sub.ID, store.SubscriptionUpdate{SetFilter: true, Filter: expr(filter),
			SetHeaders: true, SealedHeaders: []byte("sealed-headers")})
		if err != nil {
			t.Fatal(err)
		}
		if got.Filter == nil || *got.Filter != filter || string(got.SealedHeaders) != "sealed-headers" {
			t.Fatalf("update kept filter %v headers %q", got.Filter, got.SealedHeaders)
		}
		return got
	}
	paid := withFilter("m1", `type == "payout.paid"`, "payout.paid")
	star := withFilter("m1", `true`)
	disabled := withFilter("m1", `false`)
	off := store.SubscriptionDisabled
	if _, err := st.Subscriptions.UpdateSubscription(ctx, "m1", disabled.ID, store.SubscriptionUpdate{Status: &off}); err != nil {
		t.Fatal(err)
	}
	withFilter("m1", `true`, "payout.failed") // another type
	deleted := withFilter("m1", `true`)
	if err := st.Subscriptions.DeleteSubscription(ctx, "m1", deleted.ID); err != nil {
		t.Fatal(err)
	}
	createSub(t, st, "m1")   // no filter
	withFilter("m2", `true`) // another merchant

	m, filters, err := st.Events.MerchantWithFilters(ctx, "m1", "payout.paid")
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != "m1" || m.APIVersion != "2026-05-01" {
		t.Fatalf("merchant %+v", m)
	}
	var ids []uuid.UUID
	for _, f := range filters {
		ids = append(ids, f.ID)
		if f.ID == paid.ID && (f.Filter != `type == "payout.paid"` || !f.Version.Equal(paid.UpdatedAt)) {
			t.Fatalf("filter row %+v, want %q at %s", f, *paid.Filter, paid.UpdatedAt)
		}
	}
	want := []uuid.UUID{paid.ID, star.ID, disabled.ID}
	cmp := func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) }
	slices.SortFunc(ids, cmp)
	slices.SortFunc(want, cmp)
	if !slices.Equal(ids, want) {
		t.Fatalf("filters of %v, want %v", ids, want)
	}

	cleared, err := st.Subscriptions.UpdateSubscription(ctx, "m1", paid.ID, store.SubscriptionUpdate{SetFilter: true, SetHeaders: true})
	if err != nil || cleared.Filter != nil || cleared.SealedHeaders != nil {
		t.Fatalf("clear: %+v %v", cleared, err)
	}
	if _, _, err := st.Events.MerchantWithFilters(ctx, "nobody", "payout.paid"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown merchant: %v", err)
	}
}
