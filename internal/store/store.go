// Package store is webhookd's one place for SQL: every statement that reads
// or writes Postgres lives here, behind methods named for what they mean.
// The methods come in parts, one type per part of the schema
// (Subscriptions, Listeners, Events, Deliveries, ManualAttempts, APIKeys,
// PortalSessions, Merchants, IdempotencyKeys, EndpointHealth, Views,
// Maintenance, Polls, Erasures, Audit, Replays), each in its own files; Store holds them on one
// pool, one named field each.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	pgxuuid "github.com/vgarvardt/pgx-google-uuid/v5"

	"github.com/webhookd/webhookd/migrations"
)

// ErrNotFound is returned when a row does not exist or belongs to another
// merchant: callers must not be able to tell the two apart.
var ErrNotFound = errors.New("not found")

// Store is every part of the store on one pool, each a named field: a
// part owns one part of the schema, and the wiring hands each consumer the
// parts it uses, never the whole Store. The parts are not embedded, so
// that no type gathers every method of the store (and a caller names the
// part it reaches). It is safe for concurrent use.
type Store struct {
	db
	Merchants       *Merchants
	APIKeys         *APIKeys
	PortalSessions  *PortalSessions
	IdempotencyKeys *IdempotencyKeys
	Subscriptions   *Subscriptions
	Listeners       *Listeners
	Events          *Events
	Deliveries      *Deliveries
	ManualAttempts  *ManualAttempts
	EndpointHealth  *EndpointHealth
	Views           *Views
	Maintenance     *Maintenance
	Polls           *Polls
	Erasures        *Erasures
	Audit           *Audit
	Replays         *Replays
}

// Option configures a Store.
type Option func(*Store)

// WithClock replaces the wall clock, so that tests can shift time.
func WithClock(now func() time.Time) Option {
	return func(s *Store) { s.clock = now }
}

// Open connects to Postgres and checks the connection.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		// pgx's default (max(4, CPUs)) starves a worker that runs hundreds
		// of attempts at once; more than this only adds contention.
		cfg.MaxConns = 32
	}
	if _, set := cfg.ConnConfig.RuntimeParams["plan_cache_mode"]; !set && preparesStatements(cfg.ConnConfig) {
		// With day partitions, a custom plan per execution spends more
		// CPU planning than executing; generic plans prune partitions at
		// execution time instead. Only statements pgx prepares and keeps
		// have plans to reuse; without them (the simple protocol a
		// transaction-mode pooler needs) the parameter is useless, and
		// PgBouncer refuses a connection whose startup names it.
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
	cfg.AfterConnect = nameParameterTypes
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping postgres: %w", err)
	}
	s := &Store{db: db{pool: pool, clock: time.Now}}
	for _, o := range opts {
		o(s)
	}
	s.assemble()
	return s, nil
}

// assemble makes the parts, once the options have set the clock they
// share.
func (s *Store) assemble() {
	d := s.db
	s.Merchants = &Merchants{db: d}
	s.APIKeys = &APIKeys{db: d, merchants: s.Merchants}
	s.PortalSessions = &PortalSessions{db: d}
	s.IdempotencyKeys = &IdempotencyKeys{db: d}
	s.Subscriptions = &Subscriptions{db: d}
	s.Listeners = &Listeners{db: d}
	s.Events = &Events{db: d}
	s.Deliveries = &Deliveries{db: d}
	s.ManualAttempts = &ManualAttempts{db: d}
	s.EndpointHealth = &EndpointHealth{db: d}
	s.Views = &Views{db: d}
	s.Maintenance = &Maintenance{db: d}
	s.Polls = &Polls{db: d}
	s.Erasures = &Erasures{db: d}
	s.Audit = &Audit{db: d}
	s.Replays = &Replays{db: d}
}

// Close releases the pool.
func (s *Store) Close() { s.pool.Close() }

// Pool exposes the pool for health checks and pool metrics.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ping checks that Postgres answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// Migrate applies the embedded migrations (under goose's lock, so
// concurrent starts are safe) and makes sure the partitions for the coming
// days exist.
func Migrate(ctx context.Context, url string) error {
	s, err := Open(ctx, url)
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Migrate(ctx)
}

// Migrate applies the embedded migrations with this store's connection
// settings, then creates the partitions ahead.
func (s *Store) Migrate(ctx context.Context) error {
	db, err := openSQL(s.pool.Config().ConnConfig)
	if err != nil {
		return err
	}
	defer db.Close()
	// goose's table lock (a lease row it keeps alive) rather than its
	// session advisory lock: a session lock needs one server connection for
	// the whole run, which PgBouncer in transaction mode does not give, so
	// migrations work the same directly and through the pooler. A second
	// instance starting at the same time polls every second until the
	// first is done; a crashed one's lease lapses after 30 seconds.
	locker, err := lock.NewPostgresTableLocker(lock.WithTableLockTimeout(time.Second, 600))
	if err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, goose.WithLocker(locker))
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	if _, err := provider.Up(ctx); err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	if _, err := s.Maintenance.EnsurePartitions(ctx, s.Now(), PartitionsAhead); err != nil {
		return err
	}
	return nil
}

// nameParameterTypes tells pgx which Postgres type the store's Go types
// are, for when the server does not say: with the simple protocol (see
// preparesStatements) nothing describes a statement's parameters, and pgx
// cannot otherwise encode a uuid array or a metadata map. It also hands
// pgx a uuid.UUID's bytes as they are (pgxuuid's encoder): otherwise pgx
// reaches one through its driver.Valuer, formats it as text, fails to
// encode the text in binary (building an error), parses it back and
// encodes that, for every uuid parameter and every element of a uuid
// array, about 5 % of the engine's CPU at light load (BENCHMARKS.md).
// Scanning is left to uuid.UUID's sql.Scanner, which reads NULL as the
// zero UUID, as the store's nullable columns expect (pgxuuid's scanner
// would refuse it). It only touches pgx's in-memory type map; the session
// is left as it was.
func nameParameterTypes(_ context.Context, conn *pgx.Conn) error {
	types := conn.TypeMap()
	types.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{pgxuuid.TryWrapUUIDEncodePlan}, types.TryWrapEncodePlanFuncs...)
	types.RegisterDefaultPgType(uuid.UUID{}, "uuid")
	types.RegisterDefaultPgType([]uuid.UUID{}, "_uuid")
	types.RegisterDefaultPgType(map[string]string{}, "jsonb")
	return nil
}

// preparesStatements reports whether pgx prepares named statements and
// keeps them on the connection (its default exec mode), which a
// transaction-mode pooler cannot follow; default_query_exec_mode in the
// URL chooses another mode.
func preparesStatements(cfg *pgx.ConnConfig) bool {
	return cfg.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement
}

// ConnectionLost reports whether err is a statement that met a pooled
// connection which Postgres, or the PgBouncer in front of it, had cut (a
// restart of either). pgx then closes the connection and reports "conn
// closed", hiding the read error, so the error is neither a net.Error nor
// a server's answer. The pool opens a new connection for the next
// statement: like a server that could not be reached, the same request
// succeeds once the server is back.
func ConnectionLost(err error) bool { return errors.Is(err, pgconn.ErrConnClosed) }

func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

func openSQL(cfg *pgx.ConnConfig) (*sql.DB, error) {
	db := stdlib.OpenDB(*cfg)
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open migration connection: %w", err)
	}
	return db, nil
}

func isDuplicateTable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "42P07" || pgErr.Code == "23505")
}

// ErrConflict is returned when a write loses a race it cannot win.
var ErrConflict = errors.New("conflict")

// ErrSubscriptionInactive reports an attempt asked of a subscription that
// is disabled or deleted: nothing is sent. It wraps ErrConflict (a state
// conflict, not a race).
var ErrSubscriptionInactive = fmt.Errorf("subscription is disabled or deleted: %w", ErrConflict)
