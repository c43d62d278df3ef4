package pgdedup_test

import (
	"context"
	"testing"
	"time"

	"github.com/webhookd/webhookd/receiver/pgdedup"
	"github.com/webhookd/webhookd/receiver/receivertest"
)

func TestStatusStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	clock := receivertest.NewClock(time.Unix(1795000000, 0))
	s, err := pgdedup.NewStatusStore(pgdedup.StatusStoreConfig{DB: pool, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // CreateTable is idempotent
		if err := s.CreateTable(ctx); err != nil {
			t.Fatal(err)
		}
	}
	receivertest.RunStatusStore(t, s)

	// RunStatusStore set two keys; a day later one is set again; 30 days
	// after the first writes, only that one is kept.
	clock.Advance(24 * time.Hour)
	if err := s.SetStatus(ctx, "payout:po_1", "returned"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(29*24*time.Hour + time.Minute)
	n, err := s.DeleteOlderThan(ctx, 30*24*time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("DeleteOlderThan = %d, %v; want 1 deleted", n, err)
	}
	if _, ok, _ := s.LastStatus(ctx, "payout:po_1"); !ok {
		t.Error("the status set a day later was deleted")
	}
	if _, err := pgdedup.NewStatusStore(pgdedup.StatusStoreConfig{}); err == nil {
		t.Error("NewStatusStore without a DB succeeded")
	}
}
