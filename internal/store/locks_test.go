package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// TestAdvisoryLockIsExclusiveAndReleased holds the maintenance lock and
// tries it from another connection while it is held, then after. Through
// PgBouncer (TestSuiteThroughPgBouncer) a session lock would fail this: the
// second try could land on the very server connection that holds it.
func TestAdvisoryLockIsExclusiveAndReleased(t *testing.T) {
	t.Parallel()
	s := storetest.NewStore(t)
	ctx := context.Background()
	noop := func(context.Context) error { return nil }
	for round := range 3 {
		ran, err := s.Maintenance.WithAdvisoryLock(ctx, store.LockMaintenance, func(ctx context.Context) error {
			for range 5 {
				again, err := s.Maintenance.WithAdvisoryLock(ctx, store.LockMaintenance, noop)
				if err != nil {
					return err
				}
				if again {
					return errors.New("the lock was taken twice at once")
				}
			}
			return nil
		})
		if err != nil || !ran {
			t.Fatalf("round %d: ran %v, err %v; want the lock free and held once", round, ran, err)
		}
	}
	failed := errors.New("the job failed")
	if _, err := s.Maintenance.WithAdvisoryLock(ctx, store.LockMaintenance, func(context.Context) error { return failed }); !errors.Is(err, failed) {
		t.Fatalf("err = %v, want the job's error", err)
	}
	if ran, err := s.Maintenance.WithAdvisoryLock(ctx, store.LockMaintenance, noop); err != nil || !ran {
		t.Fatalf("after a failed job: ran %v, err %v; want the lock released", ran, err)
	}
}
