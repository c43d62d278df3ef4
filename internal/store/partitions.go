package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Maintenance owns the jobs that keep the database in shape: the day
// partitions ahead and past retention, the expiry of idempotency keys and
// event-id guards, and the advisory lock that lets one instance run them
// (locks.go).
type Maintenance struct {
	db
}

// Retention is how long events, deliveries, attempts and idempotency keys are
// kept (spec 4.4 rule 6, 6.4 rule 6).
const Retention = 30 * 24 * time.Hour

// PartitionsAhead is how many days of partitions exist ahead of today, so
// that a maintenance job that does not run for a week loses nothing.
const PartitionsAhead = 7

// partitionedTables are the day-partitioned tables.
var partitionedTables = [...]string{"events", "deliveries", "attempts"}

// partitionStorage is the storage clause of a table's new partitions.
// A delivery row is updated twice after its insert: by the lease, which
// sets only lease_until, and by the record. Only the lease can be a HOT
// update (the record changes indexed columns), and only if the row's page
// has room for the new version: at the default fillfactor a fresh
// partition's pages are full, so about a third of the leases were HOT and
// the rest wrote a new entry in each of the table's indexes. Leaving a
// fifth of each page free makes nearly every lease HOT.
func partitionStorage(table string) string {
	if table == "deliveries" {
		return " WITH (fillfactor = 80)"
	}
	return ""
}

// EnsurePartitions creates, for each partitioned table, the daily partitions
// from the day before now to days after it. It is idempotent. It returns the
// names of the partitions it created.
func (s *Maintenance) EnsurePartitions(ctx context.Context, now time.Time, days int) ([]string, error) {
	var created []string
	start := day(now).AddDate(0, 0, -1)
	for i := 0; i <= days+1; i++ {
		from := start.AddDate(0, 0, i)
		to := from.AddDate(0, 0, 1)
		for _, table := range partitionedTables {
			name := partitionName(table, from)
			var exists bool
			if err := s.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&exists); err != nil {
				return created, fmt.Errorf("look up partition %s: %w", name, err)
			}
			if exists {
				continue
			}
			sql := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s PARTITION OF %s FOR VALUES FROM ('%s') TO ('%s')%s`,
				pgx.Identifier{name}.Sanitize(), table, from.Format(time.RFC3339), to.Format(time.RFC3339), partitionStorage(table))
			if _, err := s.pool.Exec(ctx, sql); err != nil {
				if isDuplicateTable(err) {
					continue // another instance made it first
				}
				return created, fmt.Errorf("create partition %s: %w", name, err)
			}
			created = append(created, name)
		}
	}
	return created, nil
}

// DropExpiredPartitions drops every daily partition whose whole day ended
// more than Retention before now. It returns the names it dropped.
func (s *Maintenance) DropExpiredPartitions(ctx context.Context, now time.Time) ([]string, error) {
	cutoff := day(now.Add(-Retention))
	rows, err := s.pool.Query(ctx, `
		SELECT c.relname FROM pg_inherits i
		JOIN pg_class c ON c.oid = i.inhrelid
		JOIN pg_class p ON p.oid = i.inhparent
		WHERE p.relname = ANY($1)`, partitionedTables[:])
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	var dropped []string
	for _, name := range names {
		d, ok := partitionDay(name)
		// A partition holds [d, d+1 day): it may go once d+1 day <= cutoff.
		if !ok || d.AddDate(0, 0, 1).After(cutoff) {
			continue
		}
		if _, err := s.pool.Exec(ctx, `DROP TABLE IF EXISTS `+pgx.Identifier{name}.Sanitize()); err != nil {
			return dropped, fmt.Errorf("drop partition %s: %w", name, err)
		}
		dropped = append(dropped, name)
	}
	return dropped, nil
}

// ExpireIdempotencyKeys deletes idempotency keys older than Retention, the
// event-id guard rows of events that are gone and the attempt stats of
// hours past retention.
func (s *Maintenance) ExpireIdempotencyKeys(ctx context.Context, now time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE created_at < $1`, now.Add(-Retention))
	if err != nil {
		return 0, fmt.Errorf("expire idempotency keys: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM event_ids WHERE created_at < $1`, now.Add(-Retention)); err != nil {
		return 0, fmt.Errorf("expire event ids: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM attempt_stats WHERE hour < $1`, now.Add(-Retention)); err != nil {
		return 0, fmt.Errorf("expire attempt stats: %w", err)
	}
	return tag.RowsAffected(), nil
}

func day(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

func partitionName(table string, d time.Time) string {
	return table + "_p" + d.Format("20060102")
}

func partitionDay(name string) (time.Time, bool) {
	i := strings.LastIndex(name, "_p")
	if i < 0 {
		return time.Time{}, false
	}
	d, err := time.Parse("20060102", name[i+2:])
	return d, err == nil
}
