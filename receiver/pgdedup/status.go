package pgdedup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/receiver"
)

// DefaultStatusTable is the [StatusStore]'s table when
// [StatusStoreConfig.Table] is empty.
const DefaultStatusTable = "webhook_resource_statuses"

// StatusStoreConfig configures a [StatusStore].
type StatusStoreConfig struct {
	// DB is the database; required.
	DB DB
	// Table is the table's name, optionally schema-qualified; empty means
	// DefaultStatusTable.
	Table string
	// Now is the clock that sets updated_at; nil means time.Now.
	Now func() time.Time
}

// validate checks the config without changing it.
func (c StatusStoreConfig) validate() error {
	if c.DB == nil {
		return errors.New("pgdedup: StatusStoreConfig.DB is required")
	}
	return nil
}

// StatusStore is a [receiver.StatusStore] on PostgreSQL, for a
// [receiver.Guard] shared by several replicas. One row per resource:
//
//	CREATE TABLE webhook_resource_statuses (
//	    resource_key text PRIMARY KEY,     -- "payout:po_1"
//	    status       text NOT NULL,
//	    updated_at   timestamptz NOT NULL
//	);
//
// [StatusStore.CreateTable] creates it if missing. If your own table of
// payouts already holds their status, implement receiver.StatusStore on it
// instead: one copy of the status is better than two.
type StatusStore struct {
	cfg   StatusStoreConfig
	table string
	sql   struct{ create, last, set, deleteBefore string }
}

var _ receiver.StatusStore = (*StatusStore)(nil)

// NewStatusStore returns a StatusStore for cfg.
func NewStatusStore(cfg StatusStoreConfig) (*StatusStore, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Table == "" {
		cfg.Table = DefaultStatusTable
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &StatusStore{cfg: cfg, table: pgx.Identifier(strings.Split(cfg.Table, ".")).Sanitize()}
	s.sql.create = `CREATE TABLE IF NOT EXISTS ` + s.table + ` (
	resource_key text PRIMARY KEY,
	status       text NOT NULL,
	updated_at   timestamptz NOT NULL
)`
	s.sql.last = `SELECT status FROM ` + s.table + ` WHERE resource_key = $1`
	s.sql.set = `INSERT INTO ` + s.table + ` (resource_key, status, updated_at) VALUES ($1, $2, $3)
ON CONFLICT (resource_key) DO UPDATE SET status = EXCLUDED.status, updated_at = EXCLUDED.updated_at`
	s.sql.deleteBefore = `DELETE FROM ` + s.table + ` WHERE updated_at < $1`
	return s, nil
}

// CreateTable creates the table if it does not exist.
func (s *StatusStore) CreateTable(ctx context.Context) error {
	if _, err := s.cfg.DB.Exec(ctx, s.sql.create); err != nil {
		return fmt.Errorf("pgdedup: create table %s: %w", s.table, err)
	}
	return nil
}

// LastStatus implements [receiver.StatusStore].
func (s *StatusStore) LastStatus(ctx context.Context, key string) (string, bool, error) {
	var status string
	err := s.cfg.DB.QueryRow(ctx, s.sql.last, key).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("pgdedup: last status of %s: %w", key, err)
	}
	return status, true, nil
}

// SetStatus implements [receiver.StatusStore].
func (s *StatusStore) SetStatus(ctx context.Context, key, status string) error {
	if _, err := s.cfg.DB.Exec(ctx, s.sql.set, key, status, s.cfg.Now()); err != nil {
		return fmt.Errorf("pgdedup: set status of %s: %w", key, err)
	}
	return nil
}

// DeleteOlderThan deletes the statuses not set for age and returns how
// many it deleted. webhookd delivers no event older than 30 days
// (receiver.DefaultRetention), so older rows can no longer stop one.
func (s *StatusStore) DeleteOlderThan(ctx context.Context, age time.Duration) (int64, error) {
	tag, err := s.cfg.DB.Exec(ctx, s.sql.deleteBefore, s.cfg.Now().Add(-age))
	if err != nil {
		return 0, fmt.Errorf("pgdedup: delete old rows of %s: %w", s.table, err)
	}
	return tag.RowsAffected(), nil
}
