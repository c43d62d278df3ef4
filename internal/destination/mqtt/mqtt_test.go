package mqtt_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/desttest"
	"github.com/webhookd/webhookd/internal/destination/mqtt"
	"github.com/webhookd/webhookd/internal/store/storetest"
)

// TestConformance runs desttest against the machine's Mosquitto: the
// subscriber subscribes before the suite sends. Wrong credentials are
// tried on a private broker that takes testUser only (the machine's is
// anonymous). The suite's "target down, then back" needs the broker of
// Config stopped, which the machine's must not be: it uses Unreachable
// (a port where nothing listens), and TestReconnectsAfterBrokerRestart
// stops and restarts a private broker under a publisher whose connection
// was open. Oversized is nil: MQTT frames every packet with its length,
// and the publisher refuses one over 64 KiB as its header arrives
// (TestBrokerPacketPastTheBound).
func TestConformance(t *testing.T) {
	topic := uniqueTopic(t)
	sub := subscribe(t, machineBroker, "", "", topic)
	private := startBroker(t, nil)
	desttest.Run(t, desttest.Case{
		Kind:             mqtt.New(),
		Config:           config(machineBroker, topic, "", ""),
		Receive:          sub.Receive,
		WrongCredentials: config(private.Addr, topic, testUser, "not-"+testPassword),
		Unreachable:      config(fmt.Sprintf("127.0.0.1:%d", storetest.FreePort(t)), topic, "", ""),
		Hostile: []desttest.Hostile{
			{Name: "a topic with the multi-level wildcard", Config: `{"type": "mqtt", "broker": "mqtt.example.com:8883", "topic": "orders/#"}`, Field: "destination.topic"},
			{Name: "a topic with the single-level wildcard", Config: `{"type": "mqtt", "broker": "mqtt.example.com:8883", "topic": "orders/+/paid"}`, Field: "destination.topic"},
			{Name: "a topic of the broker's own ($SYS)", Config: `{"type": "mqtt", "broker": "mqtt.example.com:8883", "topic": "$SYS/broker/clients"}`, Field: "destination.topic", Secret: "$SYS"},
			{Name: "a topic with a NUL", Config: `{"type": "mqtt", "broker": "mqtt.example.com:8883", "topic": "orders\u0000secret"}`, Field: "destination.topic", Secret: "secret"},
			{Name: "a topic with a newline", Config: `{"type": "mqtt", "broker": "mqtt.example.com:8883", "topic": "orders\nsecret"}`, Field: "destination.topic", Secret: "secret"},
			{Name: "a topic with a C1 control character", Config: `{"type": "mqtt", "broker": "mqtt.example.com:8883", "topic": "orders\u0085secret"}`, Field: "destination.topic", Secret: "secret"},
			{Name: "a topic of 256 bytes", Config: `{"type": "mqtt", "broker": "mqtt.example.com:8883", "topic": "` + strings.Repeat("t", 256) + `"}`, Field: "destination.topic", Secret: strings.Repeat("t", 256)},
			{Name: "a topic that is not a string", Config: `{"type": "mqtt", "broker": "mqtt.example.com:8883", "topic": ["a", "b"]}`, Field: "destination.topic"},
			{Name: "no topic", Config: `{"type": "mqtt", "broker": "mqtt.example.com:8883"}`, Field: "destination.topic"},
			{Name: "a broker with a scheme", Config: `{"type": "mqtt", "broker": "mqtts://mqtt.example.com:8883", "topic": "orders"}`, Field: "destination.broker", Secret: "mqtts://"},
			{Name: "a broker with credentials", Config: `{"type": "mqtt", "broker": "user:hunter2@mqtt.example.com:8883", "topic": "orders"}`, Field: "destination.broker", Secret: "hunter2"},
			{Name: "a broker with a path", Config: `{"type": "mqtt", "broker": "mqtt.example.com:8883/etc/passwd", "topic": "orders"}`, Field: "destination.broker", Secret: "/etc/passwd"},
			{Name: "a broker without a port", Config: `{"type": "mqtt", "broker": "mqtt.example.com", "topic": "orders"}`, Field: "destination.broker"},
			{Name: "a broker with a port out of range", Config: `{"type": "mqtt", "broker": "mqtt.example.com:65536", "topic": "orders"}`, Field: "destination.broker"},
			{Name: "a broker with a control character", Config: `{"type": "mqtt", "broker": "mqtt.example.com\r\n:8883", "topic": "orders"}`, Field: "destination.broker"},
			{Name: "no broker", Config: `{"type": "mqtt", "topic": "orders"}`, Field: "destination.broker"},
			{Name: "tls that is not a boolean", Config: `{"type": "mqtt", "broker": "mqtt.example.com:8883", "topic": "orders", "tls": "yes"}`, Field: "destination.tls"},
			{Name: "an oversized password", Config: `{"type": "mqtt", "broker": "mqtt.example.com:8883", "topic": "orders", "username": "u", "password": "` + strings.Repeat("p", 300) + `"}`, Field: "destination.password", Secret: strings.Repeat("p", 300)},
			{Name: "a password with a control character", Config: `{"type": "mqtt", "broker": "mqtt.example.com:8883", "topic": "orders", "username": "u", "password": "hunter2\u0000"}`, Field: "destination.password", Secret: "hunter2"},
			{Name: "a username with a newline", Config: `{"type": "mqtt", "broker": "mqtt.example.com:8883", "topic": "orders", "username": "admin\nroot"}`, Field: "destination.username", Secret: "admin"},
			{Name: "a will topic (not a field)", Config: `{"type": "mqtt", "broker": "mqtt.example.com:8883", "topic": "orders", "will_topic": "orders/dead"}`, Field: "destination.will_topic", Secret: "orders/dead"},
			{Name: "a client id (the engine picks it)", Config: `{"type": "mqtt", "broker": "mqtt.example.com:8883", "topic": "orders", "client_id": "victim"}`, Field: "destination.client_id", Secret: "victim"},
		},
	})
}

// config is an mqtt destination object.
func config(broker, topic, user, pass string) string {
	c := map[string]any{"type": "mqtt", "broker": broker, "topic": topic, "tls": false}
	if user != "" {
		c["username"], c["password"] = user, pass
	}
	b, _ := json.Marshal(c)
	return string(b)
}

// env is the engine's Env as desttest makes it: a plain dialer, 5 s.
func env() destination.Env {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return destination.Env{Dial: d.DialContext, Timeout: 5 * time.Second, Clock: clock.Or(nil), Version: "test"}
}

// open parses raw and opens its publisher, closed when t ends.
func open(t testing.TB, raw string) destination.Publisher {
	t.Helper()
	k := mqtt.New()
	cfg, err := k.Parse("destination", json.RawMessage(raw))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	p, err := k.Open(cfg, env())
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// message is a delivery's message, its headers as the engine sets them.
func message(id string, body []byte) destination.Message {
	return destination.Message{
		DeliveryID: "dlv_" + id, EventID: id, EventType: "payout.paid", Body: body, ContentType: "application/json",
		Headers: map[string]string{
			"webhook-id": id, "webhook-timestamp": "1767225600", "webhook-signature": "v1,c2lnbmF0dXJl",
			"content-type": "application/json", "user-agent": "webhookd/test", "x-merchant-header": "kept",
		},
		SignedAt: time.Unix(1767225600, 0), Size: 1,
	}
}

func send(t testing.TB, p destination.Publisher, m destination.Message) (destination.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.Send(ctx, m)
}

// failsAs checks that err is a failure of one of codes, in words that
// name nothing of this server, and returns the words.
func failsAs(t testing.TB, err error, codes ...string) string {
	t.Helper()
	if err == nil {
		t.Fatalf("send succeeded, want one of %v", codes)
	}
	code, said := destination.Classify(err)
	for _, c := range codes {
		if c == code {
			desttest.CheckMerchantWords(t, said)
			return said
		}
	}
	t.Fatalf("send failed as %s (%s; %v), want one of %v", code, said, err, codes)
	return ""
}

// TestMessageProperties: what a subscriber receives is a QoS 1 message,
// not retained, without an expiry, its Content Type property the body's
// media type and every header a user property.
func TestMessageProperties(t *testing.T) {
	topic := uniqueTopic(t)
	sub := subscribe(t, machineBroker, "", "", topic)
	p := open(t, config(machineBroker, topic, "", ""))
	m := message("evt_properties", []byte(`{"id":"evt_properties"}`))
	res, err := send(t, p, m)
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	if res.Answer != "confirmed by the broker (PUBACK 0x00 Success)" {
		t.Errorf("answer %q", res.Answer)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := sub.Next(ctx, t)
	if got.QoS != 1 || got.Retain || got.Topic != topic {
		t.Errorf("arrived at QoS %d, retain %v, on %q; want QoS 1, not retained, on %q", got.QoS, got.Retain, got.Topic, topic)
	}
	if string(got.Payload) != string(m.Body) {
		t.Errorf("payload %q, want %q", got.Payload, m.Body)
	}
	if got.Properties == nil {
		t.Fatal("no properties")
	}
	if got.Properties.ContentType != "application/json" {
		t.Errorf("Content Type %q, want application/json", got.Properties.ContentType)
	}
	if got.Properties.MessageExpiry != nil {
		t.Errorf("Message Expiry Interval %d set, want none", *got.Properties.MessageExpiry)
	}
	for name, value := range m.Headers {
		if v := got.Properties.User.GetAll(name); len(v) != 1 || v[0] != value {
			t.Errorf("user property %s is %q, want [%q]", name, v, value)
		}
	}
	if len(got.Properties.User) != len(m.Headers) {
		t.Errorf("%d user properties, want %d (the headers)", len(got.Properties.User), len(m.Headers))
	}
}

// TestReconnectsAfterBrokerRestart: a publisher whose broker goes away
// under its open connection fails the send (broker_unreachable, or
// not_confirmed when the message was written before the loss was seen),
// and connects again on a send once the broker is back.
func TestReconnectsAfterBrokerRestart(t *testing.T) {
	broker := startBroker(t, nil)
	topic := uniqueTopic(t)
	sub := subscribe(t, broker.Addr, testUser, testPassword, topic)
	p := open(t, config(broker.Addr, topic, testUser, testPassword))
	if _, err := send(t, p, message("evt_before", []byte(`{"n":1}`))); err != nil {
		t.Fatalf("send before the restart: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got := sub.Receive(ctx, t); got.Headers["webhook-id"] != "evt_before" {
		t.Fatalf("received %s, want evt_before", got.Headers["webhook-id"])
	}

	broker.Stop()
	_, err := send(t, p, message("evt_down", []byte(`{"n":2}`)))
	failsAs(t, err, destination.CodeUnreachable, destination.CodeNotConfirmed)

	broker.Start()
	sub.Resubscribe()
	back := message("evt_back", []byte(`{"n":3}`))
	if _, err := send(t, p, back); err != nil {
		t.Fatalf("the broker is back but the send failed: %v", err)
	}
	if got := sub.Receive(ctx, t); got.Headers["webhook-id"] != "evt_back" {
		t.Fatalf("received %s, want evt_back", got.Headers["webhook-id"])
	}
}

// TestMaximumPacketSize: a message over the broker's Maximum Packet Size
// (its CONNACK's) is refused before it is sent, in words that say why;
// one of exactly that size is sent, on the same connection.
func TestMaximumPacketSize(t *testing.T) {
	const limit = 2048
	broker := startBroker(t, nil, fmt.Sprintf("max_packet_size %d", limit))
	topic := uniqueTopic(t)
	sub := subscribe(t, broker.Addr, testUser, testPassword, topic)
	p := open(t, config(broker.Addr, topic, testUser, testPassword))

	m := message("evt_size", nil)
	m.Body = []byte(strings.Repeat("x", 4096))
	_, err := send(t, p, m)
	said := failsAs(t, err, destination.CodeRefused)
	if !strings.Contains(said, "Maximum Packet Size (2048 bytes)") {
		t.Errorf("the words %q do not name the broker's Maximum Packet Size", said)
	}

	// The refusal names the packet's size: the body that makes it the
	// limit exactly is what the broker takes.
	var size int
	if _, err := fmt.Sscanf(said[strings.Index(said, "(")+1:], "%d bytes", &size); err != nil {
		t.Fatalf("no size in %q: %v", said, err)
	}
	m.Body = m.Body[:len(m.Body)-(size-limit)]
	if _, err := send(t, p, m); err != nil {
		t.Fatalf("a message of the broker's Maximum Packet Size: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got := sub.Receive(ctx, t); len(got.Body) != len(m.Body) {
		t.Fatalf("received %d bytes, want %d", len(got.Body), len(m.Body))
	}
	m.Body = append(m.Body, 'x')
	_, err = send(t, p, m)
	failsAs(t, err, destination.CodeRefused)
}

// TestTopicNotAuthorized: a topic the user may not publish to is a PUBACK
// 0x87 Not authorized, told as auth_failed with the broker's reason code.
func TestTopicNotAuthorized(t *testing.T) {
	broker := startBroker(t, map[string]string{"acl": "user " + testUser + "\ntopic readwrite allowed/#\n"}, "acl_file DIR/acl")
	p := open(t, config(broker.Addr, "denied/orders", testUser, testPassword))
	_, err := send(t, p, message("evt_denied", []byte(`{}`)))
	said := failsAs(t, err, destination.CodeAuthFailed)
	if said != "the broker answered PUBACK 0x87 Not authorized" {
		t.Errorf("said %q", said)
	}
	// The connection stays: the next message to the topic is refused the
	// same way, not as a lost connection.
	_, err = send(t, p, message("evt_denied_again", []byte(`{}`)))
	failsAs(t, err, destination.CodeAuthFailed)
}

// TestConcurrentSends: sends from many goroutines share the connection
// and each message arrives once.
func TestConcurrentSends(t *testing.T) {
	topic := uniqueTopic(t)
	sub := subscribe(t, machineBroker, "", "", topic)
	p := open(t, config(machineBroker, topic, "", ""))
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("evt_concurrent_%d", i)
			if _, err := send(t, p, message(id, []byte(`{"id":"`+id+`"}`))); err != nil {
				errs <- fmt.Errorf("%s: %w", id, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	seen := map[string]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for range n {
		id := sub.Receive(ctx, t).Headers["webhook-id"]
		if seen[id] {
			t.Errorf("%s arrived twice", id)
		}
		seen[id] = true
	}
}

// TestBrokerPacketPastTheBound: a "broker" whose CONNACK claims a body of
// 256 MiB is cut off as its header arrives (response_too_large), before
// any of it is allocated or read.
func TestBrokerPacketPastTheBound(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		buf := make([]byte, 1024)
		_, _ = conn.Read(buf) // the CONNECT
		// CONNACK, Remaining Length 268,435,455 (the most MQTT can say).
		_, _ = conn.Write([]byte{0x20, 0xff, 0xff, 0xff, 0x7f})
		_, _ = conn.Write(make([]byte, 64<<10))
	}()
	p := open(t, config(l.Addr().String(), "orders", "", ""))
	_, err = send(t, p, message("evt_large", []byte(`{}`)))
	failsAs(t, err, destination.CodeTooLarge)
}

// TestNoPubackBeforeTheDeadline: a broker that took the connection but
// answers nothing (frozen) is not_confirmed at the send's deadline; the
// publisher drops that connection and the send after the broker thaws
// goes over a new one.
func TestNoPubackBeforeTheDeadline(t *testing.T) {
	broker := startBroker(t, nil)
	topic := uniqueTopic(t)
	sub := subscribe(t, broker.Addr, testUser, testPassword, topic)
	p := open(t, config(broker.Addr, topic, testUser, testPassword))
	if _, err := send(t, p, message("evt_before", []byte(`{}`))); err != nil {
		t.Fatalf("send: %v", err)
	}

	broker.Signal(syscall.SIGSTOP)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_, err := p.Send(ctx, message("evt_frozen", []byte(`{}`)))
	cancel()
	failsAs(t, err, destination.CodeNotConfirmed)
	broker.Signal(syscall.SIGCONT)

	after := message("evt_after", []byte(`{}`))
	if _, err := send(t, p, after); err != nil {
		t.Fatalf("send after the broker thawed: %v", err)
	}
	// The frozen message may arrive too: the broker read it once thawed.
	recv, cancelRecv := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelRecv()
	for _, want := range []string{"evt_before", "evt_frozen", "evt_after"} {
		got := sub.Receive(recv, t).Headers["webhook-id"]
		if got == "evt_after" {
			return
		}
		if got != want {
			t.Fatalf("received %s, want %s", got, want)
		}
	}
}

// TestConnectionLostWhileWaiting: a connection that breaks while a send
// waits for its PUBACK ends that send at once, not at its deadline.
func TestConnectionLostWhileWaiting(t *testing.T) {
	broker := startBroker(t, nil)
	p := open(t, config(broker.Addr, uniqueTopic(t), testUser, testPassword))
	if _, err := send(t, p, message("evt_before", []byte(`{}`))); err != nil {
		t.Fatalf("send: %v", err)
	}
	broker.Signal(syscall.SIGSTOP)
	const deadline = 30 * time.Second
	result := make(chan error, 1)
	start := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		_, err := p.Send(ctx, message("evt_lost", []byte(`{}`)))
		result <- err
	}()
	time.Sleep(200 * time.Millisecond) // kept: lets the send write its PUBLISH before the loss
	broker.Kill()
	err := <-result
	// not_confirmed when the PUBLISH was written before the loss was
	// seen (what the pause above arranges), broker_unreachable when not.
	said := failsAs(t, err, destination.CodeNotConfirmed, destination.CodeUnreachable)
	t.Logf("the send failed: %s", said)
	// The send's own bound is the Env's timeout (5 s): half of it is
	// far more than noticing a reset takes.
	if took := time.Since(start); took > env().Timeout/2 {
		t.Errorf("the send took %v: it waited for its deadline, not for the connection", took)
	}
}
