package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/kinds"
	"github.com/webhookd/webhookd/signer"
)

// signedHeaders are a delivery's headers as the engine gives them to a
// destination: the Standard Webhooks headers and the content type, names
// in lowercase.
func signedHeaders(id string, body []byte, keys ...signer.Key) map[string]string {
	h := http.Header{}
	signer.SetHeaders(h, id, time.Now(), body, keys...)
	out := map[string]string{"content-type": "application/json"}
	for k := range h {
		out[strings.ToLower(k)] = h.Get(k)
	}
	return out
}

// TestBrokerMessagesVerifiedFromTheirHeaders: a message is counted only
// when its headers carry a valid signature of its body.
func TestBrokerMessagesVerifiedFromTheirHeaders(t *testing.T) {
	log := newPublishLog(4)
	rcv, key := armedReceivers(t, 1, 0, log)
	defer rcv.close()
	_, other := mustSecret(t)
	id := uuid.NewString()
	log.record(id, time.Now())
	body := []byte(`{"id":"x","payload":{}}`)
	for _, tc := range []struct {
		name    string
		headers map[string]string
		want    endpointCounts
	}{
		{"another key", signedHeaders(id, body, other), endpointCounts{BadSignatures: 1}},
		{"no headers", map[string]string{}, endpointCounts{BadSignatures: 2}},
		{"signed", signedHeaders(id, body, key), endpointCounts{Unique: 1, BadSignatures: 2}},
		{"again", signedHeaders(id, body, key), endpointCounts{Unique: 1, Duplicates: 1, BadSignatures: 2}},
	} {
		rcv.noteMessage(0, tc.headers, body)
		if got := rcv.counts(); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if lat := rcv.latencies(false); len(lat) != 1 {
		t.Errorf("latencies %v, want one", lat)
	}
}

// TestBrokerKinds: every -broker-kind value names a kind with an open,
// rabbitmq first (the default, what the scenario did before there were
// others).
func TestBrokerKinds(t *testing.T) {
	names := brokerKindNames()
	if strings.Join(names, ",") != "rabbitmq,nats,mqtt" {
		t.Errorf("kinds %v", names)
	}
	for _, name := range names {
		if k, ok := brokerKindOf(name); !ok || k.open == nil || k.shape == "" {
			t.Errorf("%s: %+v, %v", name, k, ok)
		}
	}
	if _, ok := brokerKindOf("sqs"); ok {
		t.Error("sqs is a kind")
	}
}

// TestBrokerToken: a run's name becomes one part of a stream name,
// subject or topic, whatever -merchant holds.
func TestBrokerToken(t *testing.T) {
	for in, want := range map[string]string{
		"bench-1700000000-broker": "bench-1700000000-broker",
		"a.b/c d*e>f+g#h$":        "a_b_c_d_e_f_g_h_",
		"é":                       "_",
		"":                        "",
	} {
		if got := brokerToken(in); got != want {
			t.Errorf("brokerToken(%q) = %q, want %q", in, got, want)
		}
	}
}

// needService fails t (never skips) when nothing listens at addr:
// .ci/services.sh installs and starts the brokers, as Postgres and Redis.
func needService(t *testing.T, what, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("no %s at %s (bash .ci/services.sh starts it): %v", what, addr, err)
	}
	c.Close()
}

// sendAsEngine publishes one signed message to dest through the engine's
// own publisher of its kind (the registry the engine runs with), so that
// a test proves both that the engine takes the destination the bench
// makes and that the bench reads what the engine sends.
func sendAsEngine(ctx context.Context, t *testing.T, dest map[string]any, id string, body []byte, key signer.Key) {
	t.Helper()
	reg, err := kinds.Default(kinds.Options{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(dest)
	if err != nil {
		t.Fatal(err)
	}
	typ, cfg, err := reg.Parse("destination", raw)
	if err != nil {
		t.Fatalf("the engine refuses the bench's destination %s: %v", raw, err)
	}
	p, err := reg.Open(typ, cfg, destination.Env{Dial: (&net.Dialer{}).DialContext, Timeout: 10 * time.Second,
		Clock: clock.System{}, Version: "webhookd-bench-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Send(ctx, destination.Message{DeliveryID: id, EventID: id, EventType: benchEventType, Body: body,
		ContentType: "application/json", Headers: signedHeaders(id, body, key), SignedAt: time.Now(), Size: 1}); err != nil {
		t.Fatalf("the engine's %s publisher: %v", typ, err)
	}
}

// brokerRoundTrip is every kind's test against its real broker: b, set up
// with two targets, consumes; a message the engine's publisher sends to
// target 1 arrives verified at endpoint 1 and nowhere else. It leaves b
// open for the kind's test to close and check what close deleted.
func brokerRoundTrip(t *testing.T, b brokerTarget) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	log := newPublishLog(2)
	rcv, key := armedReceivers(t, 2, 0, log)
	defer rcv.close()
	if err := b.consume(rcv); err != nil {
		t.Fatal(err)
	}
	id := uuid.NewString()
	log.record(id, time.Now())
	sendAsEngine(ctx, t, b.destination(1), id, []byte(`{"id":"x","payload":{}}`), key)
	if !rcv.waitHealthy(ctx, 1) {
		t.Fatalf("the message did not arrive: %+v", rcv.counts())
	}
	if got := rcv.counts(); got != (endpointCounts{Unique: 1}) {
		t.Errorf("counts %+v, want one unique verified message", got)
	}
	for i, want := range []bool{false, true} {
		ep := rcv.endpoints[i]
		ep.mu.Lock()
		_, seen := ep.seen[id]
		ep.mu.Unlock()
		if seen != want {
			t.Errorf("endpoint %d saw the message: %v, want %v", i, seen, want)
		}
	}
}
