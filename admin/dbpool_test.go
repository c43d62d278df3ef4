package admin_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// databases are the admin tests' migrated databases, each used by one
// test at a time and emptied between tests. storetest gives each test a
// database of its own, and creating one (CREATE DATABASE … TEMPLATE) takes
// about half a second that no parallelism shortens: Postgres copies the
// template under a lock that every test process on the machine shares.
// With ~100 tests that was most of the package's time; emptying a used
// database takes a fraction of it and runs beside the other tests.
var databases databasePool

// TestMain drops the pool's databases once every test has run.
//
// Before the tests it compiles the shared transformation sandbox, once:
// the engine's compile takes seconds under the race detector, tens of
// them on a loaded CI machine, which the first tests to simulate a
// transformation waited out within their requests' 30-second client
// timeout (two failed so).
func TestMain(m *testing.M) {
	if _, err := sandbox.Compile(context.Background(), "function handler(w) { return w }"); err != nil {
		fmt.Fprintf(os.Stderr, "compile the transformation sandbox: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	databases.dropAll()
	os.Exit(code)
}

// databasePool holds databases that no test is using, and the drops of
// every database it made.
type databasePool struct {
	mu    sync.Mutex
	idle  []string // URLs of empty databases
	drops []func()
	// tables are the tables of a database fresh from the template, once
	// one was made: a database is reused only with the same.
	tables []string
}

// schema is the tables of a database fresh from the template.
func (p *databasePool) schema() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tables
}

// newStore is storetest.NewStore on a pooled database: the store closes,
// and the database is emptied and returned to the pool, when t ends. With
// storetest.ThroughPgBouncerEnv set it is storetest.NewStore itself, whose
// PgBouncer belongs to one test.
func (p *databasePool) newStore(t testing.TB, opts ...store.Option) *store.Store {
	t.Helper()
	if os.Getenv(storetest.ThroughPgBouncerEnv) == "1" {
		return storetest.NewStore(t, opts...)
	}
	url := p.take(t)
	s, err := store.Open(context.Background(), url, opts...)
	if err != nil {
		t.Fatalf("open a pooled database: %v", err)
	}
	t.Cleanup(func() {
		s.Close()
		// A database whose schema a test changed (a table renamed to make
		// the store fail) is not reused; like every other, it is dropped
		// once every test has run.
		if reusable, err := empty(url, p.schema()); err != nil {
			t.Errorf("empty a pooled database: %v", err)
		} else if reusable {
			p.mu.Lock()
			p.idle = append(p.idle, url)
			p.mu.Unlock()
		}
	})
	return s
}

// take is an idle database, or a new one.
func (p *databasePool) take(t testing.TB) string {
	t.Helper()
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		url := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return url
	}
	p.mu.Unlock()
	keeper := &outlivingTest{TB: t}
	url := storetest.NewDatabase(keeper)
	tables, err := tablesOf(url)
	if err != nil {
		t.Fatalf("read the tables of a new database: %v", err)
	}
	p.mu.Lock()
	p.drops = append(p.drops, keeper.cleanups...)
	if p.tables == nil {
		p.tables = tables
	}
	p.mu.Unlock()
	return url
}

// dropAll drops every database the pool made.
func (p *databasePool) dropAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, drop := range p.drops {
		drop()
	}
	p.drops, p.idle = nil, nil
}

// outlivingTest is the test that asks for a new database, except that
// what storetest would do at its end (drop the database) is kept for the
// pool to do once every test has run.
type outlivingTest struct {
	testing.TB
	cleanups []func()
}

// Cleanup keeps f for the pool.
func (o *outlivingTest) Cleanup(f func()) { o.cleanups = append(o.cleanups, f) }

// tablesQuery lists a database's tables, partitions and the migrations'
// own bookkeeping left out, by name.
const tablesQuery = `SELECT quote_ident(c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition AND c.relname NOT LIKE 'goose%'
	ORDER BY c.relname`

// onDatabase runs f on a connection of its own to the database at url.
func onDatabase(url string, f func(ctx context.Context, c *pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	return f(ctx, c)
}

// tablesOf lists the tables of the database at url.
func tablesOf(url string) (tables []string, err error) {
	err = onDatabase(url, func(ctx context.Context, c *pgx.Conn) error {
		tables, err = names(ctx, c, tablesQuery)
		return err
	})
	return tables, err
}

// names runs query, which selects one text column, on c.
func names(ctx context.Context, c *pgx.Conn, query string) ([]string, error) {
	rows, err := c.Query(ctx, query)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// sequencesQuery lists a database's sequences, the migrations' own left
// out.
const sequencesQuery = `SELECT quote_ident(sequencename) FROM pg_sequences
	WHERE schemaname = 'public' AND sequencename NOT LIKE 'goose%'`

// empty deletes every row of the database at url, the migrations' own
// bookkeeping excepted, and restarts its sequences: the schema and the
// partitions stay, as the template made them. It deletes rather than
// truncates, with the foreign keys' triggers off (which takes a
// superuser): the tables hold a test's few rows, and TRUNCATE, which gives
// each of the ~100 tables and partitions new files, takes ten times as
// long. It empties nothing, and says the database is not reusable, when
// its tables are not want or the triggers cannot be turned off.
func empty(url string, want []string) (reusable bool, err error) {
	err = onDatabase(url, func(ctx context.Context, c *pgx.Conn) error {
		reusable, err = emptyOn(ctx, c, want)
		return err
	})
	return reusable, err
}

// emptyOn is empty on the connection c.
func emptyOn(ctx context.Context, c *pgx.Conn, want []string) (bool, error) {
	tables, err := names(ctx, c, tablesQuery)
	if err != nil || !slices.Equal(tables, want) {
		return false, err
	}
	sequences, err := names(ctx, c, sequencesQuery)
	if err != nil {
		return false, err
	}
	tx, err := c.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
		return false, nil // not a superuser: the database is dropped at the end instead
	}
	batch := &pgx.Batch{}
	for _, table := range tables {
		batch.Queue(`DELETE FROM ` + table)
	}
	for _, seq := range sequences {
		batch.Queue(`ALTER SEQUENCE ` + seq + ` RESTART`)
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}
