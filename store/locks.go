package store

import (
	"context"
	"fmt"
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

// WithAdvisoryLock runs fn while holding the session advisory lock key, if
// no other session holds it; ran is false when the lock was taken and fn did
// not run. It exists because asynq's Scheduler has no leader election: every
// instance enqueues the periodic jobs, and the lock lets one of them work.
func (s *Store) WithAdvisoryLock(ctx context.Context, key int64, fn func(ctx context.Context) error) (ran bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("advisory lock %d: %w", key, err)
	}
	defer conn.Release()
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&got); err != nil {
		return false, fmt.Errorf("advisory lock %d: %w", key, err)
	}
	if !got {
		return false, nil
	}
	defer func() {
		// Unlock even when ctx is done; a failed unlock ends with the session.
		if _, uerr := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, key); uerr != nil {
			conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	return true, fn(ctx)
}
