package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

func TestPartitionsFollowTheClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.NewStore(t)

	// Shift the clock 40 days ahead: the job must create that week's
	// partitions and drop every one that ended more than 30 days before.
	later := time.Now().Add(40 * 24 * time.Hour)
	created, err := s.Maintenance.EnsurePartitions(ctx, later, store.PartitionsAhead)
	if err != nil {
		t.Fatal(err)
	}
	want := "deliveries_p" + later.UTC().AddDate(0, 0, 3).Format("20060102")
	if !slices.Contains(created, want) {
		t.Fatalf("EnsurePartitions(now+40d) created %v, want it to include %s", created, want)
	}
	again, err := s.Maintenance.EnsurePartitions(ctx, later, store.PartitionsAhead)
	if err != nil || len(again) != 0 {
		t.Fatalf("second EnsurePartitions = %v, %v; want nothing new", again, err)
	}

	dropped, err := s.Maintenance.DropExpiredPartitions(ctx, later)
	if err != nil {
		t.Fatal(err)
	}
	today := "events_p" + time.Now().UTC().Format("20060102")
	if !slices.Contains(dropped, today) {
		t.Fatalf("DropExpiredPartitions(now+40d) dropped %v, want today's %s among them", dropped, today)
	}
	keep := "events_p" + later.UTC().AddDate(0, 0, -29).Format("20060102")
	if slices.Contains(dropped, keep) {
		t.Fatalf("dropped %s, which is inside the 30-day retention", keep)
	}
}

func TestIdempotencyKeysExpireAfterRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.NewStore(t)
	if _, err := s.Pool().Exec(ctx, `INSERT INTO idempotency_keys (merchant_id, key, request_hash, created_at)
		VALUES ('m', 'old', '\x00', now() - interval '31 days'), ('m', 'new', '\x00', now() - interval '29 days')`); err != nil {
		t.Fatal(err)
	}
	n, err := s.Maintenance.ExpireIdempotencyKeys(ctx, time.Now())
	if err != nil || n != 1 {
		t.Fatalf("ExpireIdempotencyKeys = %d, %v; want 1 deleted", n, err)
	}
}
