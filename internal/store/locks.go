package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Advisory lock keys, one per job that must not run on two instances at
// once. They are arbitrary constants; keep them distinct.
const (
	// LockMaintenance guards partition and retention maintenance.
	LockMaintenance int64 = 4_180_031_001
)

// lockSubscriptionCreate is the first key of the two-key advisory lock that
// serialises one merchant's subscription creates (the second is a hash of
// the merchant id; a collision only makes two merchants take turns).
const lockSubscriptionCreate int32 = 4_180_031

// WithAdvisoryLock runs fn while holding the advisory lock key, if no other
// instance holds it; ran is false when the lock was taken and fn did not
// run. It exists because asynq's Scheduler has no leader election: every
// instance enqueues the periodic jobs, and the lock lets one of them work.
//
// The lock is transaction-scoped and the transaction stays open while fn
// runs: a pooler in transaction mode (PgBouncer) keeps one server
// connection for a transaction but not for a session, so a session lock
// could be taken on one server connection and released on another, or
// stay held by a connection another client gets next. The transaction only
// takes the lock (no snapshot is kept between statements at read committed,
// no row is written), so holding it open does not hold back vacuum; it ends
// with fn, or with the connection if the process dies.
func (s *Maintenance) WithAdvisoryLock(ctx context.Context, key int64, fn func(ctx context.Context) error) (ran bool, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("advisory lock %d: %w", key, err)
	}
	// Rollback releases the lock; after a commit it does nothing.
	defer tx.Rollback(context.WithoutCancel(ctx))
	var got bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, key).Scan(&got); err != nil {
		return false, fmt.Errorf("advisory lock %d: %w", key, err)
	}
	if !got {
		return false, nil
	}
	if err := fn(ctx); err != nil {
		return true, err
	}
	if err := tx.Commit(ctx); err != nil && err != pgx.ErrTxClosed {
		return true, fmt.Errorf("advisory lock %d: release: %w", key, err)
	}
	return true, nil
}
