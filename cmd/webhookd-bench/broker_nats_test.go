package main

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestBrokerStreamOnNATS creates the broker scenario's stream on the NATS
// server of .ci/services.sh (WEBHOOKD_TEST_NATS, else -nats's default),
// consumes a message the engine's nats publisher sends, and checks that
// close deletes the stream.
func TestBrokerStreamOnNATS(t *testing.T) {
	server, err := parseNATS(envOr("WEBHOOKD_TEST_NATS", defaultNATS))
	if err != nil {
		t.Fatal(err)
	}
	needService(t, "NATS", server.host)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := openBrokerStream(ctx, server, "test."+uuid.NewString(), 2)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			s.close(t.Logf)
		}
	}()
	brokerRoundTrip(t, s)
	s.close(t.Logf)
	closed = true
	nc, err := natsgo.Connect(server.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Stream(ctx, s.stream); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("stream %s after close: %v, want not found", s.stream, err)
	}
}

// TestParseNATS: -nats is what the engine's destination can say: a
// host:port, TLS or not, and a user or a token.
func TestParseNATS(t *testing.T) {
	for _, tc := range []struct {
		in   string
		dest map[string]any // destination(0)'s fields beside type and subject
	}{
		{"nats://127.0.0.1:4222", map[string]any{"servers": []string{"127.0.0.1:4222"}, "tls": false}},
		{"tls://nats.internal:4443", map[string]any{"servers": []string{"nats.internal:4443"}, "tls": true}},
		{"nats://bench:s3cret@127.0.0.1:4222/", map[string]any{"servers": []string{"127.0.0.1:4222"}, "tls": false,
			"username": "bench", "password": "s3cret"}},
		{"nats://t0ken@127.0.0.1:4222", map[string]any{"servers": []string{"127.0.0.1:4222"}, "tls": false, "token": "t0ken"}},
	} {
		server, err := parseNATS(tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		got := (&brokerStream{server: server, subjects: []string{"webhookd-bench.x.0"}}).destination(0)
		want := maps.Clone(tc.dest)
		want["type"], want["subject"] = "nats", "webhookd-bench.x.0"
		if !maps.EqualFunc(got, want, func(a, b any) bool { return equalValue(a, b) }) {
			t.Errorf("%s: %v, want %v", tc.in, got, want)
		}
	}
	for _, bad := range []string{"", "127.0.0.1:4222", "nats://127.0.0.1", "nats://:4222", "ws://127.0.0.1:4222",
		"nats://127.0.0.1:4222/x", "nats://127.0.0.1:4222?a=b", "nats://127.0.0.1:4222,127.0.0.2:4222"} {
		if _, err := parseNATS(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// equalValue compares a destination's field values: strings, booleans
// and lists of strings.
func equalValue(a, b any) bool {
	if as, ok := a.([]string); ok {
		bs, ok := b.([]string)
		return ok && slices.Equal(as, bs)
	}
	return a == b
}

// TestNATSHeaders: first values, names lowercased.
func TestNATSHeaders(t *testing.T) {
	got := natsHeaders(natsgo.Header{"Webhook-Id": {"msg_1", "msg_2"}, "webhook-signature": {"v1,x"}, "Nats-Msg-Id": {}})
	if len(got) != 2 || got["webhook-id"] != "msg_1" || got["webhook-signature"] != "v1,x" {
		t.Errorf("%v", got)
	}
}
