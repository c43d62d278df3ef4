package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// db is what every family of the store's methods shares: the pool its
// statements run on and the clock that dates what they write.
type db struct {
	pool  *pgxpool.Pool
	clock func() time.Time
}

// now is the store's clock, in UTC and at microsecond precision (what
// Postgres keeps), so that values read back compare equal to values written.
func (d db) now() time.Time { return d.clock().UTC().Truncate(time.Microsecond) }

// tx runs fn in a transaction, committing when it returns nil.
func (d db) tx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, d.pool, fn)
}

// retentionStart is the oldest created_at a merchant may still see.
func (d db) retentionStart() time.Time { return d.now().Add(-Retention) }
