package nats_test

import (
	"bufio"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/webhookd/webhookd/internal/destination"
)

// hostileServer is a TCP server speaking just enough NATS to be a
// hostile target: it sends info as its INFO line (nothing after it when
// it has no end), answers PING, and answers a publish with onPublish.
// It counts what it wrote.
type hostileServer struct {
	addr    string
	written atomic.Int64
}

func startHostile(t testing.TB, info string, onPublish func(w func(string) bool)) *hostileServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hostileServer{addr: l.Addr().String()}
	done := make(chan struct{})
	t.Cleanup(func() { _ = l.Close(); <-done })
	go func() {
		defer close(done)
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go h.serve(conn, info, onPublish)
		}
	}()
	return h
}

func (h *hostileServer) serve(conn net.Conn, info string, onPublish func(func(string) bool)) {
	defer conn.Close()
	write := func(s string) bool {
		n, err := conn.Write([]byte(s))
		h.written.Add(int64(n))
		return err == nil
	}
	if !write(info) {
		return
	}
	lines := bufio.NewScanner(conn)
	for lines.Scan() {
		switch op, _, _ := strings.Cut(lines.Text(), " "); strings.ToUpper(op) {
		case "PING":
			write("PONG\r\n")
		case "PUB", "HPUB":
			onPublish(write)
			return
		}
	}
}

// info is a plausible server's INFO.
const info = `INFO {"server_id":"hostile","version":"2.10.0","proto":1,"headers":true,"max_payload":1048576}` + "\r\n"

// TestFramesBounded: what a server sends is read within bounds (the
// client library bounds neither a control line nor the size a MSG
// announces): past them the send fails as response_too_large and
// reading stops.
func TestFramesBounded(t *testing.T) {
	endless := func(w func(string) bool) {
		chunk := strings.Repeat("x", 64<<10)
		for range 1024 { // 64 MiB at most
			if !w(chunk) {
				return
			}
		}
	}
	for _, tc := range []struct {
		name      string
		info      string
		onPublish func(func(string) bool)
	}{
		{"an INFO line of 4 MiB", `INFO {"server_id":"` + strings.Repeat("x", 4<<20), func(func(string) bool) {}},
		{"a message announcing 100 MB", info, func(w func(string) bool) {
			if w("MSG _INBOX.x.y 1 100000000\r\n") {
				endless(w)
			}
		}},
		{"an endless -ERR line", info, func(w func(string) bool) {
			if w("-ERR 'x") {
				endless(w)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startHostile(t, tc.info, tc.onPublish)
			p := open(t, config([]string{h.addr}, "webhookd.hostile", ""))
			sendFails(t, p, message("evt_hostile"), destination.CodeTooLarge, "")
			if n := h.written.Load(); n > 16<<20 {
				t.Errorf("the server wrote %d bytes before the client stopped reading", n)
			}
		})
	}
}
