package store_test

import (
	"context"
	"testing"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// TestMigrateThroughPgBouncer applies the migrations to an empty database
// through PgBouncer in transaction mode, from three instances at once, as
// concurrent starts would: goose's table lock lets one work and the others
// find nothing left to do.
func TestMigrateThroughPgBouncer(t *testing.T) {
	storetest.FullLane(t, "PgBouncer")
	t.Parallel()
	pooled := storetest.NewPgBouncer(t, storetest.NewEmptyDatabase(t)).URL()
	ctx := context.Background()
	errs := make(chan error, 3)
	for range cap(errs) {
		go func() { errs <- store.Migrate(ctx, pooled) }()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Fatalf("migrate through pgbouncer: %v", err)
		}
	}
	s, err := store.Open(ctx, pooled)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Maintenance.EnsurePartitions(ctx, s.Now(), store.PartitionsAhead); err != nil {
		t.Fatalf("the schema is not usable after migrating: %v", err)
	}
}
