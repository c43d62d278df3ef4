// Package smtpsink is a real SMTP server for tests: it accepts every
// message and keeps it, so that a test reads the e-mails webhookd sent.
package smtpsink

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// Sink is a real SMTP server on 127.0.0.1 that accepts every message
// and keeps it. It speaks just enough of RFC 5321 for a client: greeting,
// EHLO, MAIL, RCPT, DATA, QUIT; anything else (NOOP, RSET) is 250.
type Sink struct {
	ln   net.Listener
	mu   sync.Mutex
	msgs []Message
}

// Message is one message the sink accepted.
type Message struct {
	// From is the MAIL command as the client sent it.
	From string
	// To holds the RCPT commands as the client sent them.
	To []string
	// Data is the message, headers and body, as sent (quoted-printable
	// bodies stay encoded).
	Data string
}

// New starts a sink for the test; it stops when the test ends.
func New(t testing.TB) *Sink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Sink{ln: ln}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { s.serve(c) })
		}
	})
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return s
}

// URL is the sink's address as WEBHOOKD_SMTP_URL takes it.
func (s *Sink) URL() string { return "smtp://" + s.ln.Addr().String() }

func (s *Sink) serve(c net.Conn) {
	defer c.Close()
	// A test fixture's socket deadline: the kernel's real time, which no
	// injected clock of a test may stand for.
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	reply := func(line string) { _, _ = c.Write([]byte(line + "\r\n")) }
	reply("220 sink ESMTP")
	var cur Message
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\r\n")
		verb := strings.ToUpper(strings.SplitN(line, " ", 2)[0])
		switch verb {
		case "EHLO", "HELO":
			reply("250 sink")
		case "MAIL":
			cur = Message{From: line}
			reply("250 ok")
		case "RCPT":
			cur.To = append(cur.To, line)
			reply("250 ok")
		case "DATA":
			reply("354 go ahead")
			var data strings.Builder
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if strings.TrimRight(l, "\r\n") == "." {
					break
				}
				data.WriteString(l)
			}
			cur.Data = data.String()
			s.mu.Lock()
			s.msgs = append(s.msgs, cur)
			s.mu.Unlock()
			reply("250 queued")
		case "QUIT":
			reply("221 bye")
			return
		default:
			reply("250 ok")
		}
	}
}

// Messages are the messages accepted so far.
func (s *Sink) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}
