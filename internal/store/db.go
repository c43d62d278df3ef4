package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// db is what every part of the store shares: the pool its
// statements run on and the clock that dates what they write.
type db struct {
	pool  *pgxpool.Pool
	clock func() time.Time
}

// Now is the store's clock, in UTC and at microsecond precision (what
// Postgres keeps), so that values read back compare equal to values written.
// Every part has it, so that a caller judging what a part read (a key's
// expiry, say) by the database's clock needs only that part.
func (d db) Now() time.Time { return d.clock().UTC().Truncate(time.Microsecond) }

// tx runs fn in a transaction, committing when it returns nil.
func (d db) tx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, d.pool, fn)
}

// deadlockRetries is how many times txRetryingDeadlocks runs a
// transaction that Postgres chose as a deadlock's victim.
const deadlockRetries = 3

// txRetryingDeadlocks is tx for a transaction that may deadlock with an
// attempt's record in a way no lock order avoids (it ends many deliveries
// of a subscription while a record ends one and makes the next of its
// ordered line due): Postgres breaks the cycle by failing one of them
// (40P01), and this one runs again, against what the other committed.
// fn must only write through its transaction.
func (d db) txRetryingDeadlocks(ctx context.Context, fn func(pgx.Tx) error) error {
	for i := 1; ; i++ {
		err := d.tx(ctx, fn)
		if pgErr, ok := errors.AsType[*pgconn.PgError](err); !ok || pgErr.Code != "40P01" || i == deadlockRetries {
			return err
		}
	}
}

// retentionStart is the oldest created_at a merchant may still see.
func (d db) retentionStart() time.Time { return d.Now().Add(-Retention) }
