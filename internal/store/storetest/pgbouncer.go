package storetest

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// PgBouncer is a private PgBouncer in transaction pooling mode in front of
// one Postgres server, on a loopback port, for tests that prove webhookd
// keeps no session state. Tests may stop and start it again on the same
// port, as a restart of the pooler would.
type PgBouncer struct {
	// Port is the TCP port on 127.0.0.1.
	Port int

	t       testing.TB
	bin     string
	dir     string
	dbURL   *url.URL
	cred    *syscall.Credential
	mu      sync.Mutex
	cmd     *exec.Cmd
	stopped chan struct{}
}

// NewPgBouncer starts PgBouncer (pool_mode = transaction) in front of the
// server of dbURL, trusting the clients as that server does, and stops it
// when the test ends. It fails, never skips, when pgbouncer is missing.
func NewPgBouncer(t testing.TB, dbURL string) *PgBouncer {
	t.Helper()
	bin, err := pgbouncerBin()
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("storetest: database url: %v", err)
	}
	dir, err := os.MkdirTemp("", "webhookd-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	b := &PgBouncer{Port: FreePort(t), t: t, bin: bin, dir: dir, dbURL: u}
	// PgBouncer refuses to run as root; as root, it runs as the postgres
	// user that the server package creates.
	if os.Geteuid() == 0 {
		pu, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("storetest: running pgbouncer as root needs a postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(pu.Uid)
		gid, _ := strconv.Atoi(pu.Gid)
		b.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	b.writeConfig()
	t.Cleanup(func() {
		b.Stop()
		_ = os.RemoveAll(dir)
	})
	b.Start()
	return b
}

// URL is dbURL's database reached through the pooler, with the setting
// webhookd documents for it: pgx's simple protocol, no prepared statements.
func (b *PgBouncer) URL() string {
	u := *b.dbURL
	u.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(b.Port))
	q := u.Query()
	q.Set("default_query_exec_mode", "simple_protocol")
	u.RawQuery = q.Encode()
	return u.String()
}

// Start starts PgBouncer and waits until it accepts connections.
func (b *PgBouncer) Start() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd != nil {
		return
	}
	cmd := exec.Command(b.bin, filepath.Join(b.dir, "pgbouncer.ini"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: b.cred}
	cmd.Dir = b.dir
	if err := cmd.Start(); err != nil {
		b.t.Fatalf("storetest: start pgbouncer: %v", err)
	}
	stopped := make(chan struct{})
	go func() { _ = cmd.Wait(); close(stopped) }()
	b.cmd, b.stopped = cmd, stopped
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(b.Port))
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-stopped:
			log, _ := os.ReadFile(filepath.Join(b.dir, "pgbouncer.log"))
			b.t.Fatalf("storetest: pgbouncer exited at start:\n%s", log)
		default:
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("storetest: waited 30s for pgbouncer on %s", addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop kills PgBouncer, as a crash would, cutting every client and server
// connection; Start brings it back on the same port.
func (b *PgBouncer) Stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return
	}
	_ = b.cmd.Process.Kill()
	<-b.stopped
	b.cmd = nil
}

// writeConfig writes pgbouncer.ini: every database of the server, trust
// authentication, transaction pooling and no unix socket.
func (b *PgBouncer) writeConfig() {
	b.t.Helper()
	host, port := b.dbURL.Hostname(), b.dbURL.Port()
	if port == "" {
		port = "5432"
	}
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 40
server_login_retry = 1
logfile = %s
pidfile = %s
`, host, port, b.Port, filepath.Join(b.dir, "users.txt"), filepath.Join(b.dir, "pgbouncer.log"),
		filepath.Join(b.dir, "pgbouncer.pid"))
	users := fmt.Sprintf("%q \"\"\n", b.dbURL.User.Username())
	for name, body := range map[string]string{"pgbouncer.ini": ini, "users.txt": users} {
		p := filepath.Join(b.dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			b.t.Fatal(err)
		}
		if b.cred != nil {
			if err := os.Chown(p, int(b.cred.Uid), int(b.cred.Gid)); err != nil {
				b.t.Fatal(err)
			}
		}
	}
}

// pgbouncerBin finds pgbouncer on PATH or where Debian installs it.
func pgbouncerBin() (string, error) {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
		return "/usr/sbin/pgbouncer", nil
	}
	return "", fmt.Errorf("pgbouncer not found on PATH or in /usr/sbin (install the pgbouncer package; .ci/services.sh does)")
}
