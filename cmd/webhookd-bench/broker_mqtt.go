package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/eclipse/paho.golang/paho"
)

// defaultMQTT is -mqtt's default: the Mosquitto .ci/services.sh starts
// (anonymous, in clear, on this machine only).
const defaultMQTT = "127.0.0.1:1883"

// checkMQTT reads -mqtt: the broker's host:port, as the engine's
// destination takes it.
func checkMQTT(addr string) error {
	if host, port, err := net.SplitHostPort(addr); err != nil || host == "" || port == "" {
		return fmt.Errorf("-mqtt: %q is not host:port", addr)
	}
	return nil
}

// brokerTopics are the broker scenario's MQTT targets: topics[i], one a
// subscription, each read by a client of its own subscribed at QoS 1 (a
// merchant's consumer of one destination), so that one slow topic does
// not hold the others' acknowledgements.
type brokerTopics struct {
	addr    string
	topics  []string
	clients []*paho.Client
	// mu guards lost, the first error a client's connection met before
	// close (its messages stop arriving, which close reports), and
	// closing, set by close: a client may report an error after its own
	// DISCONNECT.
	mu      sync.Mutex
	lost    error
	closing bool
}

// openMQTT is the mqtt kind's open: the broker at -mqtt.
func openMQTT(ctx context.Context, cfg config, run string, n int) (brokerTarget, error) {
	return openBrokerTopics(ctx, cfg.mqttAddr, run, n)
}

// openBrokerTopics connects n clients to the broker at addr, one a topic
// webhookd-bench/<run>/<i>, each with a clean session: nothing stays on
// the broker after they disconnect (the engine publishes without the
// retain flag).
func openBrokerTopics(ctx context.Context, addr, run string, n int) (*brokerTopics, error) {
	token := brokerToken(run)
	b := &brokerTopics{addr: addr}
	for i := range n {
		if ctx.Err() != nil {
			b.close(nil)
			return nil, ctx.Err()
		}
		b.topics = append(b.topics, "webhookd-bench/"+token+"/"+strconv.Itoa(i))
		c, err := b.connect(ctx, "webhookd-bench-"+token+"-"+strconv.Itoa(i))
		if err != nil {
			b.close(nil)
			return nil, err
		}
		b.clients = append(b.clients, c)
	}
	return b, nil
}

// connect dials the broker and sends CONNECT as id.
func (b *brokerTopics) connect(ctx context.Context, id string) (*paho.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", b.addr)
	if err != nil {
		return nil, fmt.Errorf("broker: dial MQTT broker: %w", err)
	}
	c := paho.NewClient(paho.ClientConfig{Conn: conn, OnClientError: b.lose, OnServerDisconnect: func(d *paho.Disconnect) {
		b.lose(fmt.Errorf("the broker disconnected %s (reason %#x)", id, d.ReasonCode))
	}})
	if _, err := c.Connect(dctx, &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: 30}); err != nil {
		return nil, fmt.Errorf("broker: MQTT connect: %w", err) // Connect closed conn
	}
	return c, nil
}

// lose notes a client's lost connection, the first one.
func (b *brokerTopics) lose(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lost == nil && !b.closing {
		b.lost = err
	}
}

// destination implements brokerTarget: topic i on -mqtt's broker.
func (b *brokerTopics) destination(i int) map[string]any {
	return map[string]any{"type": "mqtt", "broker": b.addr, "topic": b.topics[i], "tls": false}
}

// consume implements brokerTarget: each client subscribes to its topic
// at QoS 1; once the broker's SUBACK is in, it holds every message
// published to the topic for the client.
func (b *brokerTopics) consume(rcv *receivers) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, c := range b.clients {
		c.AddOnPublishReceived(func(r paho.PublishReceived) (bool, error) {
			rcv.noteMessage(i, mqttHeaders(r.Packet), r.Packet.Payload)
			return true, nil
		})
		ack, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: b.topics[i], QoS: 1}}})
		if err != nil {
			return fmt.Errorf("broker: subscribe to %s: %w", b.topics[i], err)
		}
		if len(ack.Reasons) != 1 || ack.Reasons[0] != 1 {
			return fmt.Errorf("broker: subscribe to %s: the broker granted %v, not QoS 1", b.topics[i], ack.Reasons)
		}
	}
	return nil
}

// close implements brokerTarget: every client disconnected, which ends
// its session (nothing else was made on the broker).
func (b *brokerTopics) close(logf progress) {
	var errs []error
	b.mu.Lock()
	b.closing = true
	if b.lost != nil {
		errs = append(errs, fmt.Errorf("a consumer lost its connection during the run: %w", b.lost))
	}
	b.mu.Unlock()
	for i, c := range b.clients {
		if err := c.Disconnect(&paho.Disconnect{}); err != nil {
			errs = append(errs, fmt.Errorf("disconnect from %s: %w", b.topics[i], err))
		}
	}
	if err := errors.Join(errs...); err != nil && logf != nil {
		logf("broker clean-up: %v", err)
	}
}

// mqttHeaders are a message's user properties, names in lowercase, the
// Content Type property as content-type when no user property is: the
// engine sends each header as a user property.
func mqttHeaders(m *paho.Publish) map[string]string {
	out := map[string]string{}
	if m.Properties == nil {
		return out
	}
	for _, p := range m.Properties.User {
		out[strings.ToLower(p.Key)] = p.Value
	}
	if _, ok := out["content-type"]; !ok && m.Properties.ContentType != "" {
		out["content-type"] = m.Properties.ContentType
	}
	return out
}
