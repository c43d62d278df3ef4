package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	goretry "github.com/sethvargo/go-retry"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
)

// waitReportInterval is how often a process waiting for Postgres says so.
const waitReportInterval = 3 * time.Second

// openStore connects to Postgres (and migrates when migrate is set). A
// process started while Postgres is still coming up (both restarted at
// once, a failover) waits for it with backoff, up to
// WEBHOOKD_STARTUP_TIMEOUT, saying so every few seconds; a server that
// answers but refuses the URL (no such database, user or password) will
// refuse it just the same later, so that fails at once. Redis needs no
// wait, its clients reconnect by themselves.
func openStore(ctx context.Context, cfg config, logger *slog.Logger, migrate bool) (*store.Store, error) {
	target := describeDatabase(cfg.DatabaseURL)
	wall := clock.System{}
	started := wall.Now()
	var reported time.Time
	var st *store.Store
	backoff := goretry.WithCappedDuration(5*time.Second, goretry.NewExponential(100*time.Millisecond))
	err := goretry.Do(ctx, goretry.WithMaxDuration(cfg.StartupTimeout, backoff), func(ctx context.Context) error {
		s, err := store.Open(ctx, cfg.DatabaseURL)
		if err == nil && migrate {
			if err = s.Migrate(ctx); err != nil {
				s.Close()
			}
		}
		if err == nil {
			st = s
			return nil
		}
		if refusal := databaseRefusal(err); refusal != nil {
			return refusal
		}
		if now := wall.Now(); now.Sub(reported) >= waitReportInterval {
			reported = now
			waited := now.Sub(started).Round(time.Second)
			logger.Warn(fmt.Sprintf("waiting for Postgres at %s (%s)", target.addr, waited),
				"variable", "WEBHOOKD_DATABASE_URL", "addr", target.addr, "database", target.database,
				"waited", waited.String(), "timeout", cfg.StartupTimeout.String(), "error", err)
		}
		return goretry.RetryableError(err)
	})
	var refusal *refusedError
	switch {
	case err == nil:
		return st, nil
	case errors.As(err, &refusal):
		return nil, fmt.Errorf("configuration: WEBHOOKD_DATABASE_URL: %w", err)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("start: stopped while waiting for Postgres at %s: %w", target.addr, err)
	}
	return nil, fmt.Errorf("start: Postgres at %s (WEBHOOKD_DATABASE_URL) could not be reached within WEBHOOKD_STARTUP_TIMEOUT (%s): %w",
		target.addr, cfg.StartupTimeout, err)
}

// refusedError is a Postgres server that answered and refused the URL: it
// says what the URL should hold instead.
type refusedError struct {
	expected string
	err      error
}

func (e *refusedError) Error() string { return e.expected + ": " + e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// databaseRefusal returns err as a refusedError when it is not worth
// retrying: the URL does not parse, or the server says the database, the
// role or the password is wrong (SQLSTATE 3D000, 28000, 28P01).
func databaseRefusal(err error) error {
	var parse *pgconn.ParseConfigError
	if errors.As(err, &parse) {
		return &refusedError{"expected a PostgreSQL URL such as postgres://user:password@host:5432/webhookd?sslmode=disable", err}
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return nil
	}
	switch pgErr.Code {
	case "3D000": // invalid_catalog_name
		return &refusedError{"expected a database that exists (create it, or name another in the URL's path)", err}
	case "28000", "28P01": // invalid_authorization_specification, invalid_password
		return &refusedError{"expected a user and password the server accepts (the URL's user:password@)", err}
	}
	return nil
}

// database is where a database URL points, without its credentials.
type database struct{ addr, database string }

// describeDatabase reads url's server address (host:port, or the socket
// path) and database name; a URL that does not parse is described as
// such, loadConfig having refused it already.
func describeDatabase(url string) database {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return database{addr: "(unparsable URL)", database: "(unparsable URL)"}
	}
	cc := cfg.ConnConfig
	addr := net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port)))
	if strings.HasPrefix(cc.Host, "/") {
		addr = fmt.Sprintf("%s/.s.PGSQL.%d", cc.Host, cc.Port)
	}
	return database{addr: addr, database: cc.Database}
}

// openStoreNow connects to Postgres once, for the one-shot commands
// (migrate, keys create): an error names the variable and where it points.
func openStoreNow(ctx context.Context, url string) (*store.Store, error) {
	st, err := store.Open(ctx, url)
	if err != nil {
		target := describeDatabase(url)
		return nil, fmt.Errorf("WEBHOOKD_DATABASE_URL (database %s at %s): %w", target.database, target.addr, err)
	}
	return st, nil
}

// openReadStore connects to the streaming replica of
// WEBHOOKD_DATABASE_READ_URL, or returns nil when it is unset. It does not
// wait for the replica: a process that starts without it would serve
// every read from a store that is not there.
func openReadStore(ctx context.Context, cfg config) (*store.Store, error) {
	if cfg.DatabaseReadURL == "" {
		return nil, nil
	}
	st, err := store.Open(ctx, cfg.DatabaseReadURL)
	if err != nil {
		target := describeDatabase(cfg.DatabaseReadURL)
		return nil, fmt.Errorf("WEBHOOKD_DATABASE_READ_URL (database %s at %s): %w", target.database, target.addr, err)
	}
	return st, nil
}
