package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// defaultNATS is -nats's default: the NATS server (JetStream on) that
// .ci/services.sh starts.
const defaultNATS = "nats://127.0.0.1:4222"

// natsServer is -nats read: the server, for the engine's destination
// (host:port, tls) and the bench's own connection (url).
type natsServer struct {
	url  string
	host string
	tls  bool
	// username and password, or token, are the URL's credentials.
	username, password, token string
}

// parseNATS reads -nats: nats://host:port, or tls:// for TLS, with a
// user:password@ or token@ as nats.go reads them; no path, query or
// fragment (the engine's destination has no field for them).
func parseNATS(s string) (natsServer, error) {
	u, err := url.Parse(s)
	if err != nil {
		return natsServer{}, fmt.Errorf("-nats: %w", err)
	}
	if u.Scheme != "nats" && u.Scheme != "tls" {
		return natsServer{}, fmt.Errorf("-nats: %q is not nats://host:port or tls://host:port", s)
	}
	if _, port, err := net.SplitHostPort(u.Host); err != nil || port == "" || u.Hostname() == "" {
		return natsServer{}, fmt.Errorf("-nats: %q names no host:port", s)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return natsServer{}, fmt.Errorf("-nats: %q has a path, query or fragment; give nats://host:port", s)
	}
	n := natsServer{url: s, host: u.Host, tls: u.Scheme == "tls"}
	if u.User != nil {
		if password, ok := u.User.Password(); ok {
			n.username, n.password = u.User.Username(), password
		} else {
			n.token = u.User.Username()
		}
	}
	return n, nil
}

// brokerStream is the broker scenario's NATS JetStream targets: one file
// stream for the run taking subjects[i], one a subscription, and an
// ephemeral consumer of each subject (no acks, as RabbitMQ's consumers
// take automatic acks).
type brokerStream struct {
	server   natsServer
	nc       *natsgo.Conn
	js       jetstream.JetStream
	stream   string
	subjects []string
	// consuming are the consumers started, stopped by close.
	consuming []jetstream.ConsumeContext
}

// openNATS is the nats kind's open: the server at -nats.
func openNATS(ctx context.Context, cfg config, run string, n int) (brokerTarget, error) {
	server, err := parseNATS(cfg.natsURL)
	if err != nil {
		return nil, err
	}
	return openBrokerStream(ctx, server, run, n)
}

// openBrokerStream connects to server and creates a stream named after
// run taking n subjects, webhookd-bench.<run>.<i>, as a merchant would
// set one up for its destinations.
func openBrokerStream(ctx context.Context, server natsServer, run string, n int) (*brokerStream, error) {
	nc, err := natsgo.Connect(server.url, natsgo.Name("webhookd-bench"), natsgo.Timeout(10*time.Second))
	if err != nil {
		return nil, fmt.Errorf("broker: connect to NATS: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("broker: JetStream: %w", err)
	}
	token := brokerToken(run)
	s := &brokerStream{server: server, nc: nc, js: js, stream: "webhookd-bench-" + token}
	prefix := "webhookd-bench." + token + "."
	for i := range n {
		s.subjects = append(s.subjects, prefix+strconv.Itoa(i))
	}
	// One stream takes every subject of the run: the engine needs a stream
	// per subject, not a stream each, and one is deleted at once.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: s.stream, Subjects: []string{prefix + "*"}, Storage: jetstream.FileStorage,
	}); err != nil {
		nc.Close()
		return nil, fmt.Errorf("broker: create stream %s: %w", s.stream, err)
	}
	return s, nil
}

// destination implements brokerTarget: subject i on -nats's server.
func (s *brokerStream) destination(i int) map[string]any {
	d := map[string]any{"type": "nats", "servers": []string{s.server.host}, "subject": s.subjects[i], "tls": s.server.tls}
	switch {
	case s.server.token != "":
		d["token"] = s.server.token
	case s.server.username != "":
		d["username"], d["password"] = s.server.username, s.server.password
	}
	return d
}

// consume implements brokerTarget: an ephemeral consumer of each subject
// from the stream's start, created before anything is published.
func (s *brokerStream) consume(rcv *receivers) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, subject := range s.subjects {
		c, err := s.js.CreateConsumer(ctx, s.stream, jetstream.ConsumerConfig{
			FilterSubject: subject, AckPolicy: jetstream.AckNonePolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
		})
		if err != nil {
			return fmt.Errorf("broker: consumer of %s: %w", subject, err)
		}
		cc, err := c.Consume(func(m jetstream.Msg) {
			rcv.noteMessage(i, natsHeaders(m.Headers()), m.Data())
		})
		if err != nil {
			return fmt.Errorf("broker: consume %s: %w", subject, err)
		}
		s.consuming = append(s.consuming, cc)
	}
	return nil
}

// close implements brokerTarget: the consumers stopped, the stream (and
// its consumers and messages) deleted.
func (s *brokerStream) close(logf progress) {
	for _, cc := range s.consuming {
		cc.Stop()
	}
	var errs []error
	for _, cc := range s.consuming {
		select {
		case <-cc.Closed():
		case <-time.After(10 * time.Second):
			errs = append(errs, errors.New("a consumer did not stop within 10 s"))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.js.DeleteStream(ctx, s.stream); err != nil {
		errs = append(errs, fmt.Errorf("delete stream %s: %w", s.stream, err))
	}
	s.nc.Close()
	if err := errors.Join(errs...); err != nil && logf != nil {
		logf("broker clean-up: %v", err)
	}
}

// natsHeaders are a message's headers, first values, names in lowercase
// (the engine sends them so; nats.go keeps names as sent).
func natsHeaders(h natsgo.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		if len(v) > 0 {
			out[strings.ToLower(k)] = v[0]
		}
	}
	return out
}
