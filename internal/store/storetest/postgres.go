package storetest

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
)

// Postgres is a private PostgreSQL cluster (initdb in a temporary
// directory), for tests that stop and restart the database under a running
// engine, which they must never do to the shared server.
type Postgres struct {
	// Port is the TCP port on 127.0.0.1.
	Port int

	t    testing.TB
	bin  string
	dir  string
	cred *syscall.Credential
}

// NewPostgres initialises and starts a private cluster that trusts local
// connections, and removes it when the test ends.
func NewPostgres(t testing.TB) *Postgres {
	t.Helper()
	bin, err := postgresBin()
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	dir, err := os.MkdirTemp("", "webhookd-pg-")
	if err != nil {
		t.Fatal(err)
	}
	p := &Postgres{t: t, bin: bin, dir: dir, Port: FreePort(t)}
	// Postgres refuses to run as root; as root, the cluster belongs to the
	// postgres user that the server package creates.
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("storetest: running as root needs a postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		p.Stop()
		_ = os.RemoveAll(dir)
	})
	p.run("initdb", "-D", p.data(), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync")
	p.Start()
	return p
}

// AdminURL is the cluster's postgres database, for NewDatabaseOn.
func (p *Postgres) AdminURL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.Port)
}

// Start starts the server and waits until it accepts connections.
func (p *Postgres) Start() {
	p.t.Helper()
	p.run("pg_ctl", "-D", p.data(), "-l", filepath.Join(p.dir, "server.log"), "-w", "-t", "60", "start",
		"-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=200",
			p.Port, p.dir))
}

// Stop stops the server at once (immediate mode: no checkpoint, clients cut
// off, recovery at the next start), as a crash or failover would.
func (p *Postgres) Stop() {
	if _, err := os.Stat(filepath.Join(p.data(), "postmaster.pid")); err != nil {
		return
	}
	p.run("pg_ctl", "-D", p.data(), "-m", "immediate", "-w", "stop")
}

func (p *Postgres) data() string { return filepath.Join(p.dir, "data") }

func (p *Postgres) run(name string, args ...string) {
	p.t.Helper()
	cmd := exec.Command(filepath.Join(p.bin, name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	cmd.Dir = p.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(p.dir, "server.log"))
		p.t.Fatalf("storetest: %s: %v\n%s\n%s", name, err, out, log)
	}
}

// postgresBin finds the directory of initdb and pg_ctl: on PATH, or in
// Debian's versioned directory (the newest).
func postgresBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi < vj
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i], nil
		}
	}
	return "", fmt.Errorf("initdb not found on PATH or in /usr/lib/postgresql/*/bin (install the postgresql package)")
}
