package main

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/webhookd/webhookd/signer"
)

// signedMessage is a delivery as the engine publishes it to a broker: the
// Standard Webhooks headers, lowercase, among the message's headers.
func signedMessage(id string, body []byte, keys ...signer.Key) amqp.Table {
	h := http.Header{}
	signer.SetHeaders(h, id, time.Now(), body, keys...)
	t := amqp.Table{"content-type": "application/json"}
	for k := range h {
		t[strings.ToLower(k)] = h.Get(k)
	}
	return t
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
		headers amqp.Table
		want    endpointCounts
	}{
		{"another key", signedMessage(id, body, other), endpointCounts{BadSignatures: 1}},
		{"no headers", amqp.Table{}, endpointCounts{BadSignatures: 2}},
		{"signed", signedMessage(id, body, key), endpointCounts{Unique: 1, BadSignatures: 2}},
		{"again", signedMessage(id, body, key), endpointCounts{Unique: 1, Duplicates: 1, BadSignatures: 2}},
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

// TestBrokerQueuesOnRabbitMQ declares the broker scenario's exchange and
// queue on the RabbitMQ of .ci/services.sh (WEBHOOKD_TEST_AMQP, else
// -amqp's default; skipped when none answers), consumes a message
// published to the exchange as the engine would, and checks that close
// deletes both.
func TestBrokerQueuesOnRabbitMQ(t *testing.T) {
	url := envOr("WEBHOOKD_TEST_AMQP", defaultAMQP)
	u, err := amqp.ParseURI(url)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", net.JoinHostPort(u.Host, strconv.Itoa(u.Port)), time.Second); err != nil {
		// A missing service fails the test, as Postgres and Redis do:
		// .ci/services.sh installs and starts RabbitMQ.
		t.Fatalf("no RabbitMQ at %s (bash .ci/services.sh starts it): %v", url, err)
	} else {
		c.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q, err := openBrokerQueues(ctx, url, "test-"+uuid.NewString(), 1)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			q.close(t.Logf)
		}
	}()
	log := newPublishLog(2)
	rcv, key := armedReceivers(t, 1, 0, log)
	defer rcv.close()
	if err := q.consume(rcv); err != nil {
		t.Fatal(err)
	}
	id := uuid.NewString()
	log.record(id, time.Now())
	body := []byte(`{"id":"x","payload":{}}`)
	pub, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	ch, err := pub.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.PublishWithContext(ctx, q.names[0], "", true, false, amqp.Publishing{
		Headers: signedMessage(id, body, key), Body: body, DeliveryMode: amqp.Persistent}); err != nil {
		t.Fatal(err)
	}
	if !rcv.waitHealthy(ctx, 1) {
		t.Fatalf("the message did not arrive: %+v", rcv.counts())
	}
	q.close(t.Logf)
	closed = true
	for _, declare := range []func(string) error{
		func(name string) error {
			_, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
			return err
		},
		func(name string) error {
			return ch.ExchangeDeclarePassive(name, amqp.ExchangeFanout, true, false, false, false, nil)
		},
	} {
		// A passive declare of what does not exist closes the channel: one each.
		if ch, err = pub.Channel(); err != nil {
			t.Fatal(err)
		}
		if err := declare(q.names[0]); err == nil {
			t.Errorf("%s still exists after close", q.names[0])
		}
	}
}
