package main

import (
	"context"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/google/uuid"
)

// TestBrokerTopicsOnMosquitto subscribes the broker scenario's clients on
// the Mosquitto of .ci/services.sh (WEBHOOKD_TEST_MQTT, else -mqtt's
// default), consumes a message the engine's mqtt publisher sends, and
// checks that close disconnects every client.
func TestBrokerTopicsOnMosquitto(t *testing.T) {
	addr := envOr("WEBHOOKD_TEST_MQTT", defaultMQTT)
	needService(t, "Mosquitto", addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := openBrokerTopics(ctx, addr, "test/"+uuid.NewString(), 2)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			b.close(t.Logf)
		}
	}()
	brokerRoundTrip(t, b)
	var logged []string
	b.close(func(format string, _ ...any) { logged = append(logged, format) })
	closed = true
	if len(logged) > 0 {
		t.Errorf("close logged %v", logged)
	}
	for i, c := range b.clients {
		select {
		case <-c.Done():
		default:
			t.Errorf("client %d still connected after close", i)
		}
	}
}

// TestMQTTHeaders: user properties, names lowercased; the Content Type
// property when no user property names it.
func TestMQTTHeaders(t *testing.T) {
	user := paho.UserProperties{{Key: "Webhook-Id", Value: "msg_1"}, {Key: "webhook-signature", Value: "v1,x"}}
	got := mqttHeaders(&paho.Publish{Properties: &paho.PublishProperties{User: user, ContentType: "application/json"}})
	if len(got) != 3 || got["webhook-id"] != "msg_1" || got["webhook-signature"] != "v1,x" || got["content-type"] != "application/json" {
		t.Errorf("%v", got)
	}
	user = append(user, paho.UserProperty{Key: "content-type", Value: "text/plain"})
	if got := mqttHeaders(&paho.Publish{Properties: &paho.PublishProperties{User: user, ContentType: "application/json"}}); got["content-type"] != "text/plain" {
		t.Errorf("content-type %q, want the user property's", got["content-type"])
	}
	if got := mqttHeaders(&paho.Publish{}); len(got) != 0 {
		t.Errorf("no properties: %v", got)
	}
}

// TestCheckMQTT: -mqtt is a host:port, as the engine's destination takes.
func TestCheckMQTT(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:1883": true, "mosquitto.internal:8883": true,
		"127.0.0.1": false, "mqtt://127.0.0.1:1883": false, ":1883": false, "": false} {
		if err := checkMQTT(addr); (err == nil) != ok {
			t.Errorf("%q: %v", addr, err)
		}
	}
}
