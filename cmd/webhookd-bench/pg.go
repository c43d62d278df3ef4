package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The bench reads the engine's database only to check what the engine
// claims: that an attempt is recorded, and how many bytes that costs. These
// are measurement queries against the schema and the catalogue, not engine
// data access, so they live here rather than in package store.

// storedTables are the tables that grow with every event, delivery and
// attempt. The partitioned ones are measured through their partitions
// (a partitioned parent has no storage of its own).
var storedTables = []string{"events", "deliveries", "attempts", "event_ids"}

// tableSizes returns pg_total_relation_size (heap, TOAST and indexes) of each
// of storedTables, summed over partitions.
func tableSizes(ctx context.Context, db *pgxpool.Pool) (map[string]int64, error) {
	const q = `
SELECT t.name,
       COALESCE((SELECT sum(pg_total_relation_size(i.inhrelid))
                 FROM pg_inherits i WHERE i.inhparent = t.name::regclass), 0)
       + pg_total_relation_size(t.name::regclass)
FROM unnest($1::text[]) AS t(name)`
	rows, err := db.Query(ctx, q, storedTables)
	if err != nil {
		return nil, fmt.Errorf("table sizes: %w", err)
	}
	defer rows.Close()
	out := make(map[string]int64, len(storedTables))
	for rows.Next() {
		var name string
		var size int64
		if err := rows.Scan(&name, &size); err != nil {
			return nil, fmt.Errorf("table sizes: %w", err)
		}
		out[name] = size
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("table sizes: %w", err)
	}
	return out, nil
}

// recordedDeliveries counts the merchants' deliveries that have at least
// one succeeded attempt recorded: the engine's half of "completed end to end".
func recordedDeliveries(ctx context.Context, db *pgxpool.Pool, merchants []string) (int64, error) {
	const q = `
SELECT count(*) FROM deliveries d
WHERE d.merchant_id = ANY($1)
  AND EXISTS (SELECT 1 FROM attempts a
              WHERE a.delivery_id = d.id AND a.delivery_created_at = d.created_at
                AND a.status = 'succeeded')`
	var n int64
	if err := db.QueryRow(ctx, q, merchants).Scan(&n); err != nil {
		return 0, fmt.Errorf("count recorded deliveries: %w", err)
	}
	return n, nil
}

// attemptedDeliveries counts the merchants' deliveries with at least one
// attempt of any outcome, and all their attempts.
func attemptedDeliveries(ctx context.Context, db *pgxpool.Pool, merchants []string) (deliveries, attempts int64, err error) {
	const q = `
SELECT count(DISTINCT (a.delivery_id, a.delivery_created_at)), count(*)
FROM deliveries d JOIN attempts a ON a.delivery_id = d.id AND a.delivery_created_at = d.created_at
WHERE d.merchant_id = ANY($1)`
	if err := db.QueryRow(ctx, q, merchants).Scan(&deliveries, &attempts); err != nil {
		return 0, 0, fmt.Errorf("count attempted deliveries: %w", err)
	}
	return deliveries, attempts, nil
}

// storedCounts counts the merchants' events and deliveries.
func storedCounts(ctx context.Context, db *pgxpool.Pool, merchants []string) (events, deliveries int64, err error) {
	const q = `
SELECT (SELECT count(*) FROM events WHERE merchant_id = ANY($1)),
       (SELECT count(*) FROM deliveries WHERE merchant_id = ANY($1))`
	if err := db.QueryRow(ctx, q, merchants).Scan(&events, &deliveries); err != nil {
		return 0, 0, fmt.Errorf("count stored events: %w", err)
	}
	return events, deliveries, nil
}

// pendingDeliveries counts a merchant's deliveries still waiting for an attempt.
func pendingDeliveries(ctx context.Context, db *pgxpool.Pool, merchant string) (int64, error) {
	var n int64
	err := db.QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE merchant_id = $1 AND status = 'pending'`, merchant).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count pending deliveries: %w", err)
	}
	return n, nil
}

// backendPID is the server process of one of the bench's connections, to
// find the postmaster whose processes' CPU is the database's.
func backendPID(ctx context.Context, db *pgxpool.Pool) (int, error) {
	var pid int
	if err := db.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		return 0, fmt.Errorf("backend pid: %w", err)
	}
	return pid, nil
}

// walPosition is the cluster's current write-ahead log position in bytes,
// for the WAL a run writes (cluster-wide: run the bench on a quiet server).
func walPosition(ctx context.Context, db *pgxpool.Pool) (float64, bool) {
	var pos float64
	err := db.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8`).Scan(&pos)
	return pos, err == nil
}

// pendingOfSubscription counts a subscription's pending deliveries.
func pendingOfSubscription(ctx context.Context, db *pgxpool.Pool, subscriptionID string) (int64, error) {
	var n int64
	err := db.QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE subscription_id = $1::uuid AND status = 'pending'`,
		subscriptionID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count pending deliveries: %w", err)
	}
	return n, nil
}

// databaseSize is the engine's whole database on disk, in bytes.
func databaseSize(ctx context.Context, db *pgxpool.Pool) (int64, error) {
	var n int64
	if err := db.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&n); err != nil {
		return 0, fmt.Errorf("database size: %w", err)
	}
	return n, nil
}

// failedDeliveries counts the merchants' deliveries that ran out of attempts.
func failedDeliveries(ctx context.Context, db *pgxpool.Pool, merchants []string) (int64, error) {
	var n int64
	err := db.QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE merchant_id = ANY($1) AND status = 'failed'`, merchants).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count failed deliveries: %w", err)
	}
	return n, nil
}

// autovacuumOn reads the server's autovacuum setting: off, dead row
// versions pile up for as long as a run lasts, and every scan pays for them.
func autovacuumOn(ctx context.Context, db *pgxpool.Pool) (bool, error) {
	var on bool
	if err := db.QueryRow(ctx, `SELECT current_setting('autovacuum')::bool`).Scan(&on); err != nil {
		return false, fmt.Errorf("autovacuum setting: %w", err)
	}
	return on, nil
}
