package main

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

// TestBrokerQueuesOnRabbitMQ declares the broker scenario's exchanges and
// queues on the RabbitMQ of .ci/services.sh (WEBHOOKD_TEST_AMQP, else
// -amqp's default), consumes a message the engine's rabbitmq publisher
// sends, and checks that close deletes both.
func TestBrokerQueuesOnRabbitMQ(t *testing.T) {
	url := envOr("WEBHOOKD_TEST_AMQP", defaultAMQP)
	u, err := amqp.ParseURI(url)
	if err != nil {
		t.Fatal(err)
	}
	needService(t, "RabbitMQ", net.JoinHostPort(u.Host, strconv.Itoa(u.Port)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q, err := openBrokerQueues(ctx, url, "test-"+uuid.NewString(), 2)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			q.close(t.Logf)
		}
	}()
	brokerRoundTrip(t, q)
	q.close(t.Logf)
	closed = true
	pub, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	for _, declare := range []func(*amqp.Channel, string) error{
		func(ch *amqp.Channel, name string) error {
			_, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
			return err
		},
		func(ch *amqp.Channel, name string) error {
			return ch.ExchangeDeclarePassive(name, amqp.ExchangeFanout, true, false, false, false, nil)
		},
	} {
		for _, name := range q.names {
			// A passive declare of what does not exist closes the channel: one each.
			ch, err := pub.Channel()
			if err != nil {
				t.Fatal(err)
			}
			if err := declare(ch, name); err == nil {
				t.Errorf("%s still exists after close", name)
			}
		}
	}
}

// TestTableHeaders: a message's string headers, names lowercased; other
// types are not part of a signature.
func TestTableHeaders(t *testing.T) {
	got := tableHeaders(amqp.Table{"Webhook-Id": "msg_1", "webhook-signature": []byte("v1,x"), "x-death": int64(3)})
	if len(got) != 2 || got["webhook-id"] != "msg_1" || got["webhook-signature"] != "v1,x" {
		t.Errorf("%v", got)
	}
}
