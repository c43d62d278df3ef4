// Package pgdedup is a [receiver.Deduplicator] on PostgreSQL, for
// endpoints whose replicas share a database rather than a Redis. Each event
// id is one row of a table (DefaultTable unless configured):
//
//	CREATE TABLE webhook_receipts (
//	    webhook_id  text PRIMARY KEY,
//	    claim_token text,                 -- the holder's token; NULL once done
//	    expires_at  timestamptz NOT NULL  -- end of the lease, or of the retention
//	);
//	CREATE INDEX webhook_receipts_expires_at ON webhook_receipts (expires_at);
//
// [Deduplicator.CreateTable] creates both if missing; put them in your own
// migrations instead if you prefer. A row past expires_at counts as absent;
// [Deduplicator.DeleteExpired] removes such rows: call it periodically
// (hourly is plenty).
package pgdedup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/webhookd/webhookd/receiver"
)

// DefaultTable is the table's name when [Config.Table] is empty.
const DefaultTable = "webhook_receipts"

// claimAttempts bounds the loop in Claim that retries when the row was
// deleted between the insert that found it and the select that reads it.
const claimAttempts = 3

// DB is the part of pgx the Deduplicator uses; *pgxpool.Pool, *pgx.Conn
// and pgx.Tx provide it.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Config configures a [Deduplicator].
type Config struct {
	// DB is the database; required. A pool, so that concurrent deliveries
	// do not queue on one connection.
	DB DB
	// Table is the table's name, optionally schema-qualified
	// ("hooks.receipts"); empty means DefaultTable.
	Table string
	// Lease is how long a claim holds an id; zero means receiver.DefaultLease.
	Lease time.Duration
	// Retention is how long a done id is kept; zero means
	// receiver.DefaultRetention.
	Retention time.Duration
	// Now is the clock that sets and checks expires_at; nil means
	// time.Now. Replicas' clocks should agree to within a small part of
	// the lease.
	Now func() time.Time
}

// validate checks the config without changing it.
func (c Config) validate() error {
	if c.DB == nil {
		return errors.New("pgdedup: Config.DB is required")
	}
	if c.Lease < 0 || c.Retention < 0 {
		return fmt.Errorf("pgdedup: negative lease %s or retention %s", c.Lease, c.Retention)
	}
	return nil
}

// Deduplicator is a [receiver.Deduplicator] on PostgreSQL, safe for
// concurrent use.
type Deduplicator struct {
	cfg   Config
	table string // quoted identifier
	sql   statements
}

var _ receiver.Deduplicator = (*Deduplicator)(nil)

// statements are the SQL texts, with the table name in place.
type statements struct {
	create, claim, read, complete, release, deleteExpired string
}

// New returns a Deduplicator for cfg.
func New(cfg Config) (*Deduplicator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	if cfg.Lease == 0 {
		cfg.Lease = receiver.DefaultLease
	}
	if cfg.Retention == 0 {
		cfg.Retention = receiver.DefaultRetention
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	parts := strings.Split(cfg.Table, ".")
	table := pgx.Identifier(parts).Sanitize()
	index := pgx.Identifier{parts[len(parts)-1] + "_expires_at"}.Sanitize()
	return &Deduplicator{cfg: cfg, table: table, sql: statements{
		create: `CREATE TABLE IF NOT EXISTS ` + table + ` (
	webhook_id  text PRIMARY KEY,
	claim_token text,
	expires_at  timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS ` + index + ` ON ` + table + ` (expires_at)`,
		// ON CONFLICT DO NOTHING would leave an expired row in the way;
		// DO UPDATE … WHERE takes it over in the same statement. A
		// concurrent claim waits for the row lock, then sees the new
		// expires_at and returns no row.
		claim: `INSERT INTO ` + table + ` AS r (webhook_id, claim_token, expires_at) VALUES ($1, $2, $3)
ON CONFLICT (webhook_id) DO UPDATE SET claim_token = EXCLUDED.claim_token, expires_at = EXCLUDED.expires_at
WHERE r.expires_at <= $4
RETURNING true`,
		read: `SELECT claim_token IS NULL FROM ` + table + ` WHERE webhook_id = $1 AND expires_at > $2`,
		complete: `INSERT INTO ` + table + ` AS r (webhook_id, claim_token, expires_at) VALUES ($1, NULL, $2)
ON CONFLICT (webhook_id) DO UPDATE SET claim_token = NULL, expires_at = EXCLUDED.expires_at`,
		release:       `DELETE FROM ` + table + ` WHERE webhook_id = $1 AND claim_token = $2`,
		deleteExpired: `DELETE FROM ` + table + ` WHERE expires_at <= $1`,
	}}, nil
}

// CreateTable creates the table and its index if they do not exist.
func (d *Deduplicator) CreateTable(ctx context.Context) error {
	if _, err := d.cfg.DB.Exec(ctx, d.sql.create); err != nil {
		return fmt.Errorf("pgdedup: create table %s: %w", d.table, err)
	}
	return nil
}

// Claim implements [receiver.Deduplicator].
func (d *Deduplicator) Claim(ctx context.Context, id string) (receiver.Claim, error) {
	token := receiver.NewClaimToken()
	for range claimAttempts {
		now := d.cfg.Now()
		var claimed bool
		err := d.cfg.DB.QueryRow(ctx, d.sql.claim, id, token, now.Add(d.cfg.Lease), now).Scan(&claimed)
		if err == nil {
			return receiver.Claim{ID: id, Token: token, State: receiver.Claimed}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return receiver.Claim{}, fmt.Errorf("pgdedup: claim %s: %w", id, err)
		}
		var done bool
		err = d.cfg.DB.QueryRow(ctx, d.sql.read, id, now).Scan(&done)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // released or expired since the insert: try again
		}
		if err != nil {
			return receiver.Claim{}, fmt.Errorf("pgdedup: read %s: %w", id, err)
		}
		if done {
			return receiver.Claim{ID: id, State: receiver.Done}, nil
		}
		return receiver.Claim{ID: id, State: receiver.InProgress}, nil
	}
	// The row keeps appearing and vanishing: other deliveries are busy
	// with it, so this one is as good as in progress.
	return receiver.Claim{ID: id, State: receiver.InProgress}, nil
}

// Complete implements [receiver.Deduplicator]. It marks the id done even
// if the claim ran out meanwhile: the handler did succeed.
func (d *Deduplicator) Complete(ctx context.Context, c receiver.Claim) error {
	if _, err := d.cfg.DB.Exec(ctx, d.sql.complete, c.ID, d.cfg.Now().Add(d.cfg.Retention)); err != nil {
		return fmt.Errorf("pgdedup: complete %s: %w", c.ID, err)
	}
	return nil
}

// Release implements [receiver.Deduplicator].
func (d *Deduplicator) Release(ctx context.Context, c receiver.Claim) error {
	if c.Token == "" {
		return nil
	}
	if _, err := d.cfg.DB.Exec(ctx, d.sql.release, c.ID, c.Token); err != nil {
		return fmt.Errorf("pgdedup: release %s: %w", c.ID, err)
	}
	return nil
}

// DeleteExpired deletes the rows whose lease or retention has ended and
// returns how many it deleted.
func (d *Deduplicator) DeleteExpired(ctx context.Context) (int64, error) {
	tag, err := d.cfg.DB.Exec(ctx, d.sql.deleteExpired, d.cfg.Now())
	if err != nil {
		return 0, fmt.Errorf("pgdedup: delete expired rows of %s: %w", d.table, err)
	}
	return tag.RowsAffected(), nil
}
