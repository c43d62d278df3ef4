package nats_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/webhookd/webhookd/internal/destination/desttest"
)

// machineServer is the NATS server this machine runs (CI starts it:
// notes/ci-nats.sh), JetStream on, no auth.
const machineServer = "127.0.0.1:4222"

// testServer is a NATS server in this process, JetStream in a temporary
// directory, which a test can stop and start again on the same port
// with the same store.
type testServer struct {
	t    testing.TB
	opts *server.Options
	srv  *server.Server
}

// startServer starts a server on a port of its choosing; edit sets the
// test's own options (auth, TLS, permissions).
func startServer(t testing.TB, edit func(*server.Options)) *testServer {
	t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(),
		NoLog: true, NoSigs: true}
	if edit != nil {
		edit(opts)
	}
	s := &testServer{t: t, opts: opts}
	s.start()
	s.opts.Port = s.srv.Addr().(*net.TCPAddr).Port // a restart takes the same
	t.Cleanup(s.stop)
	return s
}

func (s *testServer) start() {
	s.t.Helper()
	srv, err := server.NewServer(s.opts)
	if err != nil {
		s.t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		s.t.Fatal("the in-process NATS server did not start")
	}
	s.srv = srv
}

func (s *testServer) stop() {
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
}

// addr is the server's host:port.
func (s *testServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.opts.Port) }

// down stops the server and returns what starts it again: desttest's
// Down.
func (s *testServer) down(t testing.TB) func() {
	s.stop()
	return s.start
}

// stream is a JetStream stream made for one test, on a subject of its
// own, and a durable consumer that reads it in order.
type stream struct {
	name, subject string
	js            jetstream.JetStream
}

// newStream makes a stream on the server at addr, deleted at the test's
// end; opts are the test client's (credentials, TLS).
func newStream(t testing.TB, addr string, opts ...natsgo.Option) *stream {
	t.Helper()
	nc, err := natsgo.Connect("nats://"+addr, append([]natsgo.Option{natsgo.MaxReconnects(-1), natsgo.ReconnectWait(100 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatalf("connect the test client to %s: %v", addr, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	id := randomID(t)
	s := &stream{name: "WEBHOOKD_TEST_" + strings.ToUpper(id), subject: "webhookd.test." + id + ".events", js: js}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: s.name, Subjects: []string{s.subject}, Storage: jetstream.FileStorage,
		Duplicates: time.Minute}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, s.name, jetstream.ConsumerConfig{Durable: "receiver",
		AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy}); err != nil {
		t.Fatalf("create consumer: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, s.name); err != nil {
			t.Errorf("delete stream %s: %v", s.name, err)
		}
		nc.Close()
	})
	return s
}

// receive is desttest's Receive: the stream's next message, acknowledged
// once read.
func (s *stream) receive(ctx context.Context, t testing.TB) desttest.Arrived {
	t.Helper()
	for ctx.Err() == nil {
		msg, err := s.next(ctx)
		if err == nil {
			headers := map[string]string{}
			for name, values := range msg.Headers() {
				headers[strings.ToLower(name)] = values[0]
			}
			if err := msg.DoubleAck(ctx); err != nil {
				t.Fatalf("acknowledge the message read: %v", err)
			}
			return desttest.Arrived{Body: msg.Data(), Headers: headers, Key: msg.Subject()}
		}
		// The server may be restarting (the down-and-back row): the
		// test client reconnects by itself.
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond): // kept: the pace of the retries
		}
	}
	t.Fatalf("no message on stream %s before the deadline", s.name)
	return desttest.Arrived{}
}

func (s *stream) next(ctx context.Context) (jetstream.Msg, error) {
	cons, err := s.js.Consumer(ctx, s.name, "receiver")
	if err != nil {
		return nil, err
	}
	return cons.Next(jetstream.FetchContext(ctx))
}

// count is how many messages the stream holds.
func (s *stream) count(t testing.TB) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := s.js.Stream(ctx, s.name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func randomID(t testing.TB) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// closedPort is a port where nothing listens.
func closedPort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}
