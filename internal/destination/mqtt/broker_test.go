package mqtt_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"

	"github.com/webhookd/webhookd/internal/destination/desttest"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// The machine's Mosquitto (.ci/services.sh starts it): anonymous, on
// this machine only.
const machineBroker = "127.0.0.1:1883"

// The user of the tests' private brokers.
const (
	testUser     = "webhookd"
	testPassword = "pw-Ay7qk2"
)

// privateBroker is a Mosquitto of the test's own, on a free port, that
// takes testUser only: the tests stop and restart it, and refuse
// credentials with it, without touching the machine's.
type privateBroker struct {
	t    testing.TB
	Addr string
	conf string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	logs *syncBuffer
}

// startBroker starts a private broker; files are written in its
// directory first (name to content), and extra are more lines of its
// configuration, DIR standing for that directory.
func startBroker(t testing.TB, files map[string]string, extra ...string) *privateBroker {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	passwd := filepath.Join(dir, "passwd")
	if out, err := exec.Command(tool(t, "mosquitto_passwd"), "-b", "-c", passwd, testUser, testPassword).CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_passwd: %v: %s", err, out)
	}
	port := storetest.FreePort(t)
	conf := filepath.Join(dir, "mosquitto.conf")
	lines := []string{
		"listener " + strconv.Itoa(port) + " 127.0.0.1",
		"allow_anonymous false",
		"password_file " + passwd,
		"persistence false",
		"log_dest stderr",
		// Run as root (a CI machine), Mosquitto would switch to its own
		// user, who cannot read the test's directory.
		"user root",
	}
	for _, line := range extra {
		lines = append(lines, strings.ReplaceAll(line, "DIR", dir))
	}
	if err := os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := &privateBroker{t: t, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), conf: conf, logs: &syncBuffer{}}
	t.Cleanup(b.Stop)
	b.Start()
	return b
}

// tool is the path of one of Mosquitto's programs: the tests fail, not
// skip, when it is missing.
func tool(t testing.TB, name string) string {
	t.Helper()
	if path, err := exec.LookPath(name); err == nil {
		return path
	}
	for _, dir := range []string{"/usr/sbin", "/usr/bin", "/usr/local/sbin"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return filepath.Join(dir, name)
		}
	}
	t.Fatalf("%s is not installed (Debian's package mosquitto; .ci/services.sh installs it)", name)
	return ""
}

// Start starts the broker and waits until it listens.
func (b *privateBroker) Start() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd != nil {
		b.t.Fatal("the private broker is already running")
	}
	cmd := exec.Command(tool(b.t, "mosquitto"), "-c", b.conf)
	cmd.Stdout, cmd.Stderr = b.logs, b.logs
	if err := cmd.Start(); err != nil {
		b.t.Fatalf("start mosquitto: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	b.cmd, b.done = cmd, done
	deadline := time.Now().Add(10 * time.Second)
	for {
		if conn, err := net.DialTimeout("tcp", b.Addr, time.Second); err == nil {
			_ = conn.Close()
			return
		}
		select {
		case <-done:
			b.t.Fatalf("mosquitto exited: %s", b.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("mosquitto does not listen after 10 s: %s", b.logs.String())
		}
		time.Sleep(20 * time.Millisecond) // kept: the pace of waiting for it to listen
	}
}

// Stop stops the broker (SIGTERM, then SIGKILL after 5 s) and waits for
// it to exit.
func (b *privateBroker) Stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return
	}
	_ = b.cmd.Process.Signal(syscall.SIGCONT) // a frozen one too
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(5 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.done
	}
	b.cmd, b.done = nil, nil
}

// Signal sends sig to the running broker: SIGSTOP freezes it with its
// connections open (a broker that takes packets and answers none),
// SIGCONT thaws it.
func (b *privateBroker) Signal(sig syscall.Signal) {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		b.t.Fatal("the private broker is not running")
	}
	if err := b.cmd.Process.Signal(sig); err != nil {
		b.t.Fatalf("signal mosquitto: %v", err)
	}
}

// Kill kills the broker at once (its connections reset, no DISCONNECT
// sent) and waits for it to exit.
func (b *privateBroker) Kill() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return
	}
	_ = b.cmd.Process.Kill()
	<-b.done
	b.cmd, b.done = nil, nil
}

// syncBuffer is a broker's output, written by its process's pipes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// uniqueTopic is a topic no other test publishes to.
func uniqueTopic(t testing.TB) string {
	t.Helper()
	return "webhookd-test/" + strings.ReplaceAll(t.Name(), "/", "_") + "/" + randomHex(t, 6)
}

// randomHex is n random bytes in hexadecimal.
func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// subscriber is a consumer of one topic, as a merchant's would be: a
// paho client subscribed at QoS 1 before anything is sent, handing the
// messages over a channel. Resubscribe connects it again after its
// broker restarted.
type subscriber struct {
	t                       testing.TB
	addr, user, pass, topic string
	tls                     *tls.Config // nil in clear
	msgs                    chan *paho.Publish

	mu     sync.Mutex
	client *paho.Client
}

func subscribe(t testing.TB, addr, user, pass, topic string) *subscriber {
	t.Helper()
	return subscribeWith(t, &subscriber{t: t, addr: addr, user: user, pass: pass, topic: topic})
}

// subscribeTLS subscribes as testUser over TLS, trusting caPEM.
func subscribeTLS(t testing.TB, addr string, caPEM []byte, topic string) *subscriber {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("no CA certificate")
	}
	host, _, _ := net.SplitHostPort(addr)
	return subscribeWith(t, &subscriber{t: t, addr: addr, user: testUser, pass: testPassword, topic: topic,
		tls: &tls.Config{RootCAs: roots, ServerName: host, MinVersion: tls.VersionTLS12}})
}

func subscribeWith(t testing.TB, s *subscriber) *subscriber {
	t.Helper()
	s.msgs = make(chan *paho.Publish, 1000)
	s.Resubscribe()
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		_ = s.client.Disconnect(&paho.Disconnect{})
	})
	return s
}

// Resubscribe connects and subscribes, the last connection dropped.
func (s *subscriber) Resubscribe() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		_ = s.client.Disconnect(&paho.Disconnect{})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var conn net.Conn
	var err error
	if s.tls != nil {
		// paho's writers share a tls.Conn: it needs paho's lock.
		if conn, err = (&tls.Dialer{Config: s.tls}).DialContext(ctx, "tcp", s.addr); err == nil {
			conn = packets.NewThreadSafeConn(conn)
		}
	} else {
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", s.addr)
	}
	if err != nil {
		s.t.Fatalf("subscriber: dial %s: %v", s.addr, err)
	}
	client := paho.NewClient(paho.ClientConfig{Conn: conn, OnPublishReceived: []func(paho.PublishReceived) (bool, error){
		func(r paho.PublishReceived) (bool, error) {
			select {
			case s.msgs <- r.Packet:
			default:
				s.t.Errorf("subscriber: more than %d messages waiting", cap(s.msgs))
			}
			return true, nil
		},
	}})
	connect := &paho.Connect{ClientID: "sub-" + randomHex(s.t, 8), CleanStart: true, KeepAlive: 30}
	if s.user != "" {
		connect.Username, connect.UsernameFlag = s.user, true
		connect.Password, connect.PasswordFlag = []byte(s.pass), true
	}
	if _, err := client.Connect(ctx, connect); err != nil {
		s.t.Fatalf("subscriber: connect: %v", err)
	}
	if _, err := client.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: s.topic, QoS: 1}}}); err != nil {
		s.t.Fatalf("subscriber: subscribe: %v", err)
	}
	s.client = client
}

// Next is the next message, raw; it fails t when none comes before ctx
// ends.
func (s *subscriber) Next(ctx context.Context, t testing.TB) *paho.Publish {
	t.Helper()
	select {
	case m := <-s.msgs:
		return m
	case <-ctx.Done():
		t.Fatalf("no message arrived on %s", s.topic)
		return nil
	}
}

// Receive is desttest's Receive: the next message as a consumer reads
// it, each user property a header.
func (s *subscriber) Receive(ctx context.Context, t testing.TB) desttest.Arrived {
	t.Helper()
	return arrived(s.Next(ctx, t))
}

// arrived is what a consumer reads of m: its payload, and its user
// properties as headers (names lowercased), the Content Type property
// as content-type when no user property is.
func arrived(m *paho.Publish) desttest.Arrived {
	headers := map[string]string{}
	if m.Properties != nil {
		for _, p := range m.Properties.User {
			headers[strings.ToLower(p.Key)] = p.Value
		}
		if _, ok := headers["content-type"]; !ok && m.Properties.ContentType != "" {
			headers["content-type"] = m.Properties.ContentType
		}
	}
	return desttest.Arrived{Body: m.Payload, Headers: headers}
}
