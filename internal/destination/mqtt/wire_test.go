package mqtt

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/failtext"
)

// streamConn is a net.Conn whose reads hand out a stream chunk by chunk.
type streamConn struct {
	net.Conn
	chunks [][]byte
	closed bool
}

func (s *streamConn) Read(p []byte) (int, error) {
	if len(s.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.chunks[0])
	s.chunks[0] = s.chunks[0][n:]
	if len(s.chunks[0]) == 0 {
		s.chunks = s.chunks[1:]
	}
	return n, nil
}

func (s *streamConn) Close() error { s.closed = true; return nil }

// packetBytes is a packet as a broker writes it.
func packetBytes(t *testing.T, cp *packets.ControlPacket) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := cp.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestBoundedConnFollowsFraming: packets within the bound pass whole,
// however the stream is cut; the first whose Remaining Length goes past
// the bound fails the read that carries its length, and closes the
// connection.
func TestBoundedConnFollowsFraming(t *testing.T) {
	ack := packets.NewControlPacket(packets.CONNACK)
	ack.Content.(*packets.Connack).Properties = &packets.Properties{ReasonString: string(bytes.Repeat([]byte("r"), 300))}
	puback := packets.NewControlPacket(packets.PUBACK)
	puback.Content.(*packets.Puback).PacketID = 1
	ping := packets.NewControlPacket(packets.PINGRESP)
	var stream []byte
	for _, cp := range []*packets.ControlPacket{ack, puback, ping} {
		stream = append(stream, packetBytes(t, cp)...)
	}
	// A packet of maxIncoming+1 bytes' body: its length's three bytes.
	over := []byte{0x30, byte(0x80 | (maxIncoming+1)&0x7f), byte(0x80 | ((maxIncoming+1)>>7)&0x7f), byte((maxIncoming + 1) >> 14)}

	for _, cut := range []int{1, 2, 3, 7, 64, len(stream)} {
		var chunks [][]byte
		for rest := append(append([]byte{}, stream...), over...); len(rest) > 0; {
			n := min(cut, len(rest))
			chunks = append(chunks, rest[:n])
			rest = rest[n:]
		}
		raw := &streamConn{chunks: chunks}
		c := &boundedConn{Conn: raw}
		for _, want := range []byte{packets.CONNACK, packets.PUBACK, packets.PINGRESP} {
			got, err := packets.ReadPacket(c)
			if err != nil {
				t.Fatalf("cut %d: read packet %d: %v", cut, want, err)
			}
			if got.Type != want {
				t.Fatalf("cut %d: packet %d, want %d", cut, got.Type, want)
			}
		}
		_, err := packets.ReadPacket(c)
		var tooLarge *failtext.TooLargeError
		if !errors.As(err, &tooLarge) || !c.tooLarge.Load() || !raw.closed {
			t.Fatalf("cut %d: the packet past the bound read as %v (flagged %v, closed %v)", cut, err, c.tooLarge.Load(), raw.closed)
		}
	}
}

// TestBoundedConnRefusesAFiveByteLength: a Remaining Length of more than
// four bytes is malformed.
func TestBoundedConnRefusesAFiveByteLength(t *testing.T) {
	c := &boundedConn{}
	if err := c.scan([]byte{0xd0, 0x80, 0x80, 0x80, 0x80}); !errors.Is(err, errMalformed) {
		t.Fatalf("scan: %v, want errMalformed", err)
	}
}

// TestPacketSize: the size packetSize counts is what paho writes, across
// the Remaining Length's one- to three-byte forms.
func TestPacketSize(t *testing.T) {
	for _, body := range []int{0, 10, 80, 127, 128, 5000, 16383, 16384, 70000, 2 << 20} {
		pub, err := publishOf("orders/paid", destination.Message{Body: make([]byte, body), ContentType: "application/json",
			Headers: map[string]string{"webhook-id": "msg_1", "x-merchant-header": "kept"}})
		if err != nil {
			t.Fatal(err)
		}
		pub.PacketID = 1
		var b bytes.Buffer
		if _, err := pub.Packet().WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		if got := packetSize(pub); got != b.Len() {
			t.Errorf("body of %d bytes: packetSize %d, written %d", body, got, b.Len())
		}
	}
}

// TestHeadersThatAreNotMQTTStrings are refused before anything is sent:
// the broker would drop the connection on them.
func TestHeadersThatAreNotMQTTStrings(t *testing.T) {
	for name, headers := range map[string]map[string]string{
		"a NUL in a value":    {"x-merchant-header": "a\x00b"},
		"invalid UTF-8":       {"x-merchant-header": "\xff\xfe"},
		"a NUL in a name":     {"x-a\x00": "b"},
		"a value of 64 KiB+1": {"x-big": string(bytes.Repeat([]byte("a"), 65536))},
	} {
		_, err := publishOf("orders", destination.Message{Body: []byte("{}"), Headers: headers})
		if code, _ := destination.Classify(err); err == nil || code != destination.CodeRefused {
			t.Errorf("%s: %v, want broker_refused", name, err)
		}
	}
	pub, err := publishOf("orders", destination.Message{Body: []byte("{}"), Headers: map[string]string{"b": "2", "a": "1", "content-type": "text/plain"}})
	if err != nil {
		t.Fatal(err)
	}
	want := paho.UserProperties{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}, {Key: "content-type", Value: "text/plain"}}
	if got := pub.Properties.User; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("user properties %v, want %v (sorted)", got, want)
	}
	if pub.Properties.ContentType != "text/plain" || pub.Properties.MessageExpiry != nil || pub.QoS != 1 || pub.Retain {
		t.Errorf("publish %+v %+v", pub, pub.Properties)
	}
}

// TestWriteDeadline: a write to a peer that never reads ends at the
// write timeout.
func TestWriteDeadline(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := &boundedConn{Conn: a, writeTimeout: 50 * time.Millisecond}
	start := time.Now()
	_, err := c.Write([]byte("PUBLISH"))
	var netErr net.Error
	if !errors.As(err, &netErr) || !netErr.Timeout() {
		t.Fatalf("write: %v, want a timeout", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the write took %v", took)
	}
}

// TestReasonWords: the reason codes are told by number and MQTT's name.
func TestReasonWords(t *testing.T) {
	for code, want := range map[byte]string{0x00: "0x00 Success", 0x87: "0x87 Not authorized", 0x97: "0x97 Quota exceeded", 0xA2: "0xA2"} {
		if got := reason(code); got != want {
			t.Errorf("reason(%#x) = %q, want %q", code, got, want)
		}
	}
	for code, want := range map[byte]string{0x87: destination.CodeAuthFailed, 0x80: destination.CodeRefused, 0x90: destination.CodeRefused, 0x97: destination.CodeRefused} {
		if got, said := destination.Classify(pubackFailure(code, errors.New("x"))); got != want || said != "the broker answered PUBACK "+reason(code) {
			t.Errorf("PUBACK %#x: %s %q, want %s", code, got, said, want)
		}
	}
	for code, want := range map[byte]string{0x86: destination.CodeAuthFailed, 0x87: destination.CodeAuthFailed, 0x8C: destination.CodeAuthFailed,
		0x8A: destination.CodeAuthFailed, 0x89: destination.CodeRefused, 0x85: destination.CodeRefused} {
		if got, said := destination.Classify(connackFailure(code, errors.New("x"))); got != want || said != "the broker refused the connection: CONNACK "+reason(code) {
			t.Errorf("CONNACK %#x: %s %q, want %s", code, got, said, want)
		}
	}
}
