// Package storetest gives integration tests real, private backing services:
// a fresh Postgres database cloned from a migrated template, a private
// redis-server on a unix socket, and the highly available Redis topologies
// (NewSentinel, NewCluster) on loopback ports. It never mocks any, and it
// fails (never skips) when a service is missing.
package storetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/migrations"
)

// AdminURL is the Postgres server the tests use, from
// WEBHOOKD_TEST_DATABASE_URL (default: the local server's postgres database).
func AdminURL() string {
	if u := os.Getenv("WEBHOOKD_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// templateLock serialises template building and cloning across the test
// binaries that go test runs in parallel.
const templateLock = 720_431_977

// NewDatabase creates a fresh database from the migrated template, with the
// partitions around today in place, drops it when the test ends, and
// returns its URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	return NewDatabaseOn(t, AdminURL())
}

// NewDatabaseOn is NewDatabase on another server, given by the URL of a
// database there that the test may connect to and create databases from.
func NewDatabaseOn(t testing.TB, adminURL string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatalf("storetest: connect to postgres at %s (is it running?): %v", adminURL, err)
	}
	defer admin.Close(ctx)

	tmpl := "webhookd_tmpl_" + migrationsHash(t)
	name := "webhookd_test_" + randomHex(t, 8)
	if _, err := admin.Exec(ctx, `SELECT pg_advisory_lock($1)`, templateLock); err != nil {
		t.Fatalf("storetest: lock: %v", err)
	}
	err = func() error {
		defer admin.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, templateLock)
		var exists bool
		if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, tmpl).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			if _, err := admin.Exec(ctx, `CREATE DATABASE `+tmpl); err != nil {
				return err
			}
			if err := store.Migrate(ctx, withDatabase(t, adminURL, tmpl)); err != nil {
				admin.Exec(ctx, `DROP DATABASE `+tmpl)
				return err
			}
		}
		_, err := admin.Exec(ctx, `CREATE DATABASE `+name+` TEMPLATE `+tmpl)
		return err
	}()
	if err != nil {
		t.Fatalf("storetest: create database: %v", err)
	}
	dropAtCleanup(t, adminURL, name)
	u := withDatabase(t, adminURL, name)
	s, err := store.Open(ctx, u)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	defer s.Close()
	if _, err := s.Maintenance.EnsurePartitions(ctx, time.Now(), store.PartitionsAhead); err != nil {
		t.Fatalf("storetest: %v", err)
	}
	return u
}

// ThroughPgBouncerEnv names the environment variable that, set to 1, makes
// NewStore reach its database through a private PgBouncer in transaction
// mode: the store's own test runs its whole suite a second time that way.
const ThroughPgBouncerEnv = "WEBHOOKD_TEST_THROUGH_PGBOUNCER"

// NewEmptyDatabase creates an empty database (no migrations) on the test
// server, drops it when the test ends, and returns its URL: for tests of
// the migrations themselves.
func NewEmptyDatabase(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adminURL := AdminURL()
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatalf("storetest: connect to postgres at %s (is it running?): %v", adminURL, err)
	}
	defer admin.Close(ctx)
	name := "webhookd_test_" + randomHex(t, 8)
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+name); err != nil {
		t.Fatalf("storetest: create database: %v", err)
	}
	dropAtCleanup(t, adminURL, name)
	return withDatabase(t, adminURL, name)
}

// dropAtCleanup drops the database name of the server at adminURL when the
// test ends, whatever sessions still hold it.
func dropAtCleanup(t testing.TB, adminURL, name string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			t.Errorf("storetest: drop %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
			t.Errorf("storetest: drop %s: %v", name, err)
		}
	})
}

// NewStore opens a Store on a fresh database and closes it when the test
// ends; with ThroughPgBouncerEnv set, through a PgBouncer of its own.
func NewStore(t testing.TB, opts ...store.Option) *store.Store {
	t.Helper()
	u := NewDatabase(t)
	if os.Getenv(ThroughPgBouncerEnv) == "1" {
		u = NewPgBouncer(t, u).URL()
	}
	s, err := store.Open(context.Background(), u, opts...)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Redis is a private redis-server listening on a unix socket. Tests may
// flush it, stop it and start it again on the same socket.
type Redis struct {
	// Socket is the unix socket path.
	Socket string

	t   testing.TB
	bin string
	dir string
	mu  sync.Mutex
	cmd *exec.Cmd
}

// URL is the go-redis form of the address (unix://path).
func (r *Redis) URL() string { return "unix://" + r.Socket }

// NewRedis starts a private redis-server (no persistence) for the test and
// stops it when the test ends, so tests may flush or kill it freely.
func NewRedis(t testing.TB) *Redis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("storetest: redis-server not found on PATH (install the redis-server package): %v", err)
	}
	dir, err := os.MkdirTemp("", "webhookd-redis-")
	if err != nil {
		t.Fatal(err)
	}
	r := &Redis{Socket: filepath.Join(dir, "redis.sock"), t: t, bin: bin, dir: dir}
	t.Cleanup(func() {
		r.Stop()
		_ = os.RemoveAll(dir)
	})
	r.Start()
	return r
}

// Start starts the server again after Stop, on the same socket and empty,
// as a restart of a Redis that keeps nothing on disk leaves it.
func (r *Redis) Start() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return
	}
	_ = os.Remove(r.Socket)
	cmd := exec.Command(r.bin, "--port", "0", "--unixsocket", r.Socket, "--unixsocketperm", "700",
		"--save", "", "--appendonly", "no", "--dir", r.dir, "--maxmemory-policy", "noeviction")
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("storetest: start redis-server: %v", err)
	}
	r.cmd = cmd
	waitFor(r.t, "redis-server to open "+r.Socket, func() bool {
		_, err := os.Stat(r.Socket)
		return err == nil
	})
}

// Stop kills the server, as a crash would; Start brings it back.
func (r *Redis) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.cmd = nil
}

// waitFor polls ready for up to 30 seconds and fails the test if it never
// holds.
func waitFor(t testing.TB, what string, ready func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ready() {
		if time.Now().After(deadline) {
			t.Fatalf("storetest: waited 30s for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func withDatabase(t testing.TB, adminURL, name string) string {
	u, err := url.Parse(adminURL)
	if err != nil {
		t.Fatalf("storetest: bad WEBHOOKD_TEST_DATABASE_URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// migrationsHash names the template after the migrations' content, so that
// a changed schema gets a new template.
func migrationsHash(t testing.TB) string {
	h := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%s\x00", path, b)
		return nil
	})
	if err != nil {
		t.Fatalf("storetest: hash migrations: %v", err)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// FullLaneVariable, set to 1 (CI sets it), makes FullLane fail a test
// run with -short instead of skipping it: the full lane never skips one.
const FullLaneVariable = "WEBHOOKD_TEST_FULL_LANE"

// FullLane skips t in the fast lane (go test -short) and says why; where
// FullLaneVariable is 1 a -short run fails instead, so that CI cannot pass
// with the full lane's tests skipped.
func FullLane(t testing.TB, why string) {
	t.Helper()
	if !testing.Short() {
		return
	}
	if os.Getenv(FullLaneVariable) == "1" {
		t.Fatalf("%s is 1 but the tests run with -short: %s must run, not skip", FullLaneVariable, t.Name())
	}
	t.Skip(why + ": the full lane")
}
