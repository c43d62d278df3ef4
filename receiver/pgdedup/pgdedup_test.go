package pgdedup_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/receiver"
	"github.com/webhookd/webhookd/receiver/pgdedup"
	"github.com/webhookd/webhookd/receiver/receivertest"
)

func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), storetest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func newDedup(t *testing.T, cfg pgdedup.Config) *pgdedup.Deduplicator {
	t.Helper()
	d, err := pgdedup.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestContract runs the shared contract on a fresh database, one table
// per subtest, with an injected clock.
func TestContract(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	var clock *receivertest.Clock
	n := 0
	receivertest.RunDeduplicator(t, receivertest.Deduplicator{
		New: func(t *testing.T, lease, retention time.Duration) receiver.Deduplicator {
			n++
			clock = receivertest.NewClock(time.Unix(1795000000, 0))
			return newDedup(t, pgdedup.Config{DB: pool, Table: fmt.Sprintf("receipts_%d", n),
				Lease: lease, Retention: retention, Now: clock.Now})
		},
		Advance: func(_ *testing.T, d time.Duration) { clock.Advance(d) },
		Lease:   time.Minute, Retention: time.Hour,
	})
}

// TestDeleteExpired removes rows past their lease or retention, and only
// those; CreateTable is idempotent and a schema-qualified name works.
func TestDeleteExpired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	if _, err := pool.Exec(ctx, `CREATE SCHEMA hooks`); err != nil {
		t.Fatal(err)
	}
	clock := receivertest.NewClock(time.Unix(1795000000, 0))
	d := newDedup(t, pgdedup.Config{DB: pool, Table: "hooks.receipts", Lease: time.Minute, Retention: time.Hour, Now: clock.Now})
	if err := d.CreateTable(ctx); err != nil {
		t.Fatalf("second CreateTable: %v", err)
	}
	done, err := d.Claim(ctx, "done")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Complete(ctx, done); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Claim(ctx, "abandoned"); err != nil {
		t.Fatal(err)
	}

	count := func() (n int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM hooks.receipts`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, step := range []struct {
		advance time.Duration
		deleted int64
		left    int
	}{
		{0, 0, 2},
		{2 * time.Minute, 1, 1}, // the abandoned claim's lease is over
		{time.Hour, 1, 0},       // and the done id's retention
	} {
		clock.Advance(step.advance)
		n, err := d.DeleteExpired(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n != step.deleted || count() != step.left {
			t.Fatalf("after %s more: deleted %d, %d left; want %d and %d", step.advance, n, count(), step.deleted, step.left)
		}
	}
	if _, err := pgdedup.New(pgdedup.Config{}); err == nil {
		t.Error("New without a DB succeeded")
	}
}
