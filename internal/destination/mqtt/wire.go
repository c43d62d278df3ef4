package mqtt

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/failtext"
)

// maxIncoming bounds a packet the broker sends: a publisher only ever
// receives CONNACK, PUBACK, PINGRESP, DISCONNECT and AUTH, a few bytes
// each unless a broker adds reason strings and user properties. The
// CONNECT packet tells the broker (Maximum Packet Size); boundedConn
// enforces it, since paho's reader allocates whatever length a packet's
// header claims (up to 256 MiB).
const maxIncoming = 64 << 10

// boundedConn is the connection paho reads and writes: each packet the
// broker sends is checked against maxIncoming as its header arrives,
// before paho allocates its body, and each write has the send's timeout
// as its deadline, so that a broker that stops reading cannot hold a
// writer (paho's writes take no context).
type boundedConn struct {
	net.Conn
	// writeTimeout bounds one write, from now on clock.
	writeTimeout time.Duration
	// clock is the engine's clock (nil: the system's).
	clock clock.Clock
	// tooLarge is set once a packet over the bound was refused: the
	// failure is then response_too_large, not a lost connection.
	tooLarge atomic.Bool

	// The reader's place in the stream of packets (paho runs one
	// reader at a time): what the next byte is, the Remaining Length
	// read so far and its next digit's shift, a body's bytes to go.
	state  frameState
	length int
	shift  uint
	left   int
}

// frameState is where a byte falls in MQTT's framing (MQTT 5, 2.1): a
// packet's type byte, its Remaining Length (one to four bytes of seven
// bits), its body.
type frameState int

const (
	wantType frameState = iota
	wantLength
	inBody
)

// Read implements net.Conn, refusing a packet longer than maxIncoming.
func (c *boundedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if scanErr := c.scan(p[:n]); scanErr != nil {
		c.tooLarge.Store(true)
		_ = c.Conn.Close()
		return 0, scanErr
	}
	return n, err
}

// errMalformed is a Remaining Length longer than MQTT's four bytes.
var errMalformed = errors.New("mqtt: malformed packet length from the broker")

// scan follows the packets' framing through b, the bytes just read, and
// fails as soon as a Remaining Length goes past maxIncoming: the read
// that carries it never reaches paho.
func (c *boundedConn) scan(b []byte) error {
	for len(b) > 0 {
		switch c.state {
		case wantType:
			c.state, c.length, c.shift = wantLength, 0, 0
			b = b[1:]
		case wantLength:
			digit := b[0]
			b = b[1:]
			c.length |= int(digit&0x7f) << c.shift
			c.shift += 7
			if c.length > maxIncoming {
				return &failtext.TooLargeError{Limit: maxIncoming}
			}
			if digit&0x80 != 0 {
				if c.shift >= 28 {
					return errMalformed
				}
				continue
			}
			c.state, c.left = inBody, c.length
			if c.left == 0 {
				c.state = wantType
			}
		case inBody:
			skip := min(c.left, len(b))
			c.left -= skip
			b = b[skip:]
			if c.left == 0 {
				c.state = wantType
			}
		}
	}
	return nil
}

// Write implements net.Conn, each write bounded by writeTimeout.
func (c *boundedConn) Write(p []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(clock.Or(c.clock).Now().Add(c.writeTimeout)); err != nil {
		return 0, fmt.Errorf("mqtt: set write deadline: %w", err)
	}
	return c.Conn.Write(p)
}

// reasonNames are MQTT 5's names of the reason codes a broker sends in
// CONNACK and PUBACK (MQTT 5, 2.4): what a merchant is told, with the
// number.
var reasonNames = map[byte]string{
	0x00: "Success",
	0x10: "No matching subscribers",
	0x80: "Unspecified error",
	0x81: "Malformed Packet",
	0x82: "Protocol Error",
	0x83: "Implementation specific error",
	0x84: "Unsupported Protocol Version",
	0x85: "Client Identifier not valid",
	0x86: "Bad User Name or Password",
	0x87: "Not authorized",
	0x88: "Server unavailable",
	0x89: "Server busy",
	0x8A: "Banned",
	0x8C: "Bad authentication method",
	0x90: "Topic Name invalid",
	0x91: "Packet Identifier in use",
	0x95: "Packet too large",
	0x97: "Quota exceeded",
	0x99: "Payload format invalid",
	0x9A: "Retain not supported",
	0x9B: "QoS not supported",
	0x9C: "Use another server",
	0x9D: "Server moved",
	0x9F: "Connection rate exceeded",
}

// reason is a reason code in words: its number, and its name when MQTT
// names it ("0x87 Not authorized").
func reason(code byte) string {
	if name, ok := reasonNames[code]; ok {
		return fmt.Sprintf("0x%02X %s", code, name)
	}
	return fmt.Sprintf("0x%02X", code)
}
