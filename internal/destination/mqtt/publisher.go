package mqtt

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	"github.com/eclipse/paho.golang/paho/session"

	"github.com/webhookd/webhookd/internal/destination"
)

// keepAlive is the CONNECT packet's Keep Alive, in seconds: paho pings
// an idle connection at this pace and drops one whose broker stops
// answering, so that the next Send connects again.
const keepAlive = 60

// Kind is the mqtt destination kind.
type Kind struct{}

// New returns the mqtt kind, for the registry.
func New() destination.Kind { return Kind{} }

// Metadata implements destination.Kind.
func (Kind) Metadata() destination.Metadata { return metadata() }

// Parse implements destination.Kind.
func (Kind) Parse(param string, raw json.RawMessage) (destination.Config, error) {
	c, err := parse(param, raw)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Open implements destination.Kind: the publisher connects on its first
// Send.
func (Kind) Open(cfg destination.Config, env destination.Env) (destination.Publisher, error) {
	c, err := destination.ConfigOf[Config]("mqtt", cfg)
	if err != nil {
		return nil, err
	}
	return &publisher{cfg: c, env: env, connecting: make(chan struct{}, 1)}, nil
}

// errClosed is a Send after Close.
var errClosed = errors.New("mqtt: the publisher is closed")

// publisher publishes a destination's messages over one MQTT connection,
// opened on the first Send and again on the Send after it is lost. Sends
// share it: each waits for its own PUBACK.
type publisher struct {
	cfg Config
	env destination.Env

	// connecting is held by the one Send that looks at (and maybe opens)
	// the connection; the others wait on it, within their context.
	connecting chan struct{}

	mu      sync.Mutex
	current *connection
	closed  bool
}

// connection is one MQTT connection: its client and what the broker's
// CONNACK said of its limits.
type connection struct {
	client *paho.Client
	conn   *boundedConn
	// maxPacket is the broker's Maximum Packet Size; 0 when it set none.
	maxPacket uint32
	// maxQoS is the broker's Maximum QoS (2 when it set none).
	maxQoS byte
}

// alive reports whether the client still runs: paho stops it when the
// connection fails, the broker disconnects or a ping goes unanswered.
func (c *connection) alive() bool {
	select {
	case <-c.client.Done():
		return false
	default:
		return true
	}
}

// close disconnects, normally; paho closes the socket whatever the
// broker does with the DISCONNECT.
func (c *connection) close() {
	_ = c.client.Disconnect(&paho.Disconnect{ReasonCode: 0})
}

// Send implements destination.Publisher: one QoS 1 PUBLISH, done when
// the broker's PUBACK says it took it.
func (p *publisher) Send(ctx context.Context, m destination.Message) (destination.Result, error) {
	pub, err := publishOf(p.cfg.Topic, m)
	if err != nil {
		return destination.Result{}, err
	}
	c, err := p.connection(ctx)
	if err != nil {
		return destination.Result{}, err
	}
	if c.maxQoS < 1 {
		return destination.Result{}, destination.Fail(destination.CodeRefused,
			"the broker takes QoS 0 messages only (its CONNACK's Maximum QoS), and webhookd publishes at QoS 1", nil)
	}
	if c.maxPacket > 0 {
		if size := packetSize(pub); size > int(c.maxPacket) {
			return destination.Result{}, destination.Fail(destination.CodeRefused,
				fmt.Sprintf("the message (%d bytes as an MQTT packet) is larger than the broker's Maximum Packet Size (%d bytes)", size, c.maxPacket), nil)
		}
	}

	// A publish waits for its PUBACK or its context: a connection lost
	// in between ends the wait at once rather than at the deadline
	// (paho forgets a lost connection's publishes without a word).
	waitCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-c.client.Done():
			cancel(errConnectionLost)
		case <-waitCtx.Done():
		}
	}()

	resp, err := c.client.Publish(waitCtx, pub)
	switch {
	case resp != nil && resp.ReasonCode >= 0x80:
		return destination.Result{}, pubackFailure(resp.ReasonCode, err)
	case err == nil:
		// 0x00 Success, or 0x10 No matching subscribers: taken, and the
		// merchant learns that nobody was subscribed.
		var code byte
		if resp != nil {
			code = resp.ReasonCode
		}
		return destination.Result{Answer: "confirmed by the broker (PUBACK " + reason(code) + ")"}, nil
	}
	// The connection is not trusted after this: lost, or its broker
	// did not confirm within the delivery timeout.
	p.drop(c)
	switch {
	case c.conn.tooLarge.Load():
		return destination.Result{}, destination.Fail(destination.CodeTooLarge, "", err)
	case errors.Is(err, session.ErrNoConnection):
		return destination.Result{}, destination.Fail(destination.CodeUnreachable, "the connection to the broker closed", err)
	case errors.Is(context.Cause(waitCtx), errConnectionLost):
		return destination.Result{}, destination.Fail(destination.CodeNotConfirmed,
			"the connection to the broker closed before it confirmed the message", err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return destination.Result{}, destination.Fail(destination.CodeNotConfirmed, "the broker did not confirm the message in time (no PUBACK)", err)
	}
	return destination.Result{}, destination.Fail(destination.CodeNotConfirmed,
		"the connection to the broker failed before it confirmed the message", err)
}

// errConnectionLost ends the wait for a PUBACK whose connection closed.
var errConnectionLost = errors.New("mqtt: the connection closed before the PUBACK")

// pubackFailure is a PUBACK's failure reason code: 0x87 Not authorized
// is the credentials' rights (auth_failed), any other the broker's
// refusal of the message (broker_refused), told by its number and name.
func pubackFailure(code byte, err error) error {
	said := "the broker answered PUBACK " + reason(code)
	err = fmt.Errorf("mqtt: PUBACK %s: %w", reason(code), err)
	if code == 0x87 {
		return destination.Fail(destination.CodeAuthFailed, said, err)
	}
	return destination.Fail(destination.CodeRefused, said, err)
}

// connackFailure is a CONNACK's failure reason code: the credentials
// refused (bad user name or password, not authorized, banned, bad
// authentication method) are auth_failed, any other refusal of the
// connection broker_refused.
func connackFailure(code byte, err error) error {
	said := "the broker refused the connection: CONNACK " + reason(code)
	err = fmt.Errorf("mqtt: CONNACK %s: %w", reason(code), err)
	switch code {
	case 0x86, 0x87, 0x8A, 0x8C:
		return destination.Fail(destination.CodeAuthFailed, said, err)
	}
	return destination.Fail(destination.CodeRefused, said, err)
}

// publishOf is m as a QoS 1 PUBLISH to topic: its body the payload, each
// of its headers a user property (sorted by name, so that a message's
// packet is always the same), its content type the Content Type
// property too. No Message Expiry Interval: the broker keeps the message
// for a subscriber's session as long as it keeps any. A header that is
// not an MQTT string (UTF-8, no U+0000, at most 65,535 bytes) would make
// the broker drop the connection: it is refused before anything is sent.
func publishOf(topic string, m destination.Message) (*paho.Publish, error) {
	props := &paho.PublishProperties{ContentType: m.ContentType}
	if props.ContentType == "" {
		props.ContentType = m.Headers["content-type"]
	}
	if !mqttString(props.ContentType) {
		return nil, destination.Fail(destination.CodeRefused, "the message's content type is not an MQTT string (UTF-8 without U+0000)", nil)
	}
	for _, name := range slices.Sorted(maps.Keys(m.Headers)) {
		value := m.Headers[name]
		if !mqttString(name) || !mqttString(value) {
			return nil, destination.Fail(destination.CodeRefused, "a header's name or value is not an MQTT string (UTF-8 without U+0000)", nil)
		}
		props.User.Add(name, value)
	}
	return &paho.Publish{QoS: 1, Topic: topic, Payload: m.Body, Properties: props}, nil
}

// mqttString reports whether s can be an MQTT UTF-8 Encoded String
// (MQTT 5, 1.5.4).
func mqttString(s string) bool {
	return len(s) <= 65535 && utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// packetSize is the size of pub's PUBLISH packet on the wire: the fixed
// header (a byte and the Remaining Length) and the rest, the number a
// broker's Maximum Packet Size bounds.
func packetSize(pub *paho.Publish) int {
	rest := 0
	for _, b := range pub.Packet().Buffers() {
		rest += len(b)
	}
	lengthBytes := 1
	for n := rest >> 7; n > 0; n >>= 7 {
		lengthBytes++
	}
	return 1 + lengthBytes + rest
}

// connection is the publisher's live connection, opened when there is
// none or the last one was lost.
func (p *publisher) connection(ctx context.Context) (*connection, error) {
	select {
	case p.connecting <- struct{}{}:
	case <-ctx.Done():
		return nil, destination.Fail(destination.CodeUnreachable, "", fmt.Errorf("mqtt: wait for the connection: %w", ctx.Err()))
	}
	defer func() { <-p.connecting }()
	p.mu.Lock()
	closed, c := p.closed, p.current
	p.mu.Unlock()
	if closed {
		return nil, destination.Fail(destination.CodeUnreachable, "the destination's publisher was closed", errClosed)
	}
	if c != nil && c.alive() {
		return c, nil
	}
	if c != nil {
		p.drop(c)
	}
	c, err := p.dial(ctx)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.close()
		return nil, destination.Fail(destination.CodeUnreachable, "the destination's publisher was closed", errClosed)
	}
	p.current = c
	p.mu.Unlock()
	return c, nil
}

// dial connects to the broker through env.Dial, TLS over it when the
// destination says so, and sends CONNECT: a clean session under a client
// id of its own, so that two publishers (two subscription versions, two
// webhookd processes) never take over each other's connection.
func (p *publisher) dial(ctx context.Context) (*connection, error) {
	timeout := p.env.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	raw, err := p.env.Dial(ctx, "tcp", p.cfg.Broker)
	if err != nil {
		return nil, destination.Fail(destination.CodeUnreachable, "", fmt.Errorf("mqtt: dial the broker: %w", err))
	}
	conn := raw
	if p.cfg.TLS {
		host, _, _ := net.SplitHostPort(p.cfg.Broker)
		tc := tls.Client(raw, &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12})
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = raw.Close()
			return nil, destination.Fail(destination.CodeUnreachable, "", fmt.Errorf("mqtt: TLS handshake with the broker: %w", err))
		}
		conn = tc
	}
	id, err := clientID()
	if err != nil {
		_ = conn.Close()
		return nil, destination.Fail(destination.CodeUnreachable, "webhookd could not make a client id", err)
	}
	bounded := &boundedConn{Conn: conn, writeTimeout: timeout, clock: p.env.Clock}
	client := paho.NewClient(paho.ClientConfig{Conn: packets.NewThreadSafeConn(bounded), PacketTimeout: timeout})
	maxIncomingPacket := uint32(maxIncoming)
	connect := &paho.Connect{
		ClientID:   id,
		CleanStart: true,
		KeepAlive:  keepAlive,
		Properties: &paho.ConnectProperties{MaximumPacketSize: &maxIncomingPacket},
	}
	if p.cfg.Username != "" {
		connect.Username, connect.UsernameFlag = p.cfg.Username, true
	}
	if p.cfg.Password != "" {
		connect.Password, connect.PasswordFlag = []byte(p.cfg.Password), true
	}
	ack, err := client.Connect(ctx, connect) // closes conn when it fails
	if err != nil {
		switch {
		case ack != nil && ack.ReasonCode >= 0x80:
			return nil, connackFailure(ack.ReasonCode, err)
		case bounded.tooLarge.Load():
			return nil, destination.Fail(destination.CodeTooLarge, "", fmt.Errorf("mqtt: CONNACK: %w", err))
		}
		return nil, destination.Fail(destination.CodeUnreachable, "", fmt.Errorf("mqtt: connect: %w", err))
	}
	c := &connection{client: client, conn: bounded, maxQoS: 2}
	if props := ack.Properties; props != nil {
		if props.MaximumPacketSize != nil {
			c.maxPacket = *props.MaximumPacketSize
		}
		if props.MaximumQoS != nil {
			c.maxQoS = *props.MaximumQoS
		}
	}
	return c, nil
}

// defaultTimeout bounds a send of an Env without a timeout.
const defaultTimeout = 30 * time.Second

// clientID is a client id of its own: "webhookd-" and 14 hexadecimal
// digits, 23 characters, the most every broker must take (MQTT 5,
// 3.1.3.1).
func clientID() (string, error) {
	var b [7]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("mqtt: client id: %w", err)
	}
	return "webhookd-" + hex.EncodeToString(b[:]), nil
}

// drop forgets c, when it is still the publisher's connection, and
// disconnects it.
func (p *publisher) drop(c *connection) {
	p.mu.Lock()
	if p.current == c {
		p.current = nil
	}
	p.mu.Unlock()
	c.close()
}

// Close implements destination.Publisher: it disconnects, and every
// Send after it fails.
func (p *publisher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	c := p.current
	p.current = nil
	p.mu.Unlock()
	if c != nil {
		c.close()
	}
	return nil
}
