package rabbitmqtest_test

import (
	"context"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/internal/testfixtures/rabbitmqtest"
)

// TestRestartKeepsDurableMessages: a persistent message on a durable queue
// is there again after the node was stopped and started; connections of
// the stopped node are closed.
func TestRestartKeepsDurableMessages(t *testing.T) {
	storetest.FullLane(t, "runs a RabbitMQ node")
	n := rabbitmqtest.Start(t)
	conn, err := amqp.Dial(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("kept", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	c, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", "kept", true, false,
		amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte("hello")})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := c.WaitContext(context.Background()); !ok || err != nil {
		t.Fatalf("confirm: %v %v", ok, err)
	}

	n.Stop()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection stayed open after the node stopped")
	}
	n.Start()

	conn, err = amqp.Dial(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err = conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	m, ok, err := ch.Get("kept", true)
	if err != nil || !ok || string(m.Body) != "hello" {
		t.Fatalf("after the restart: %q %v %v; want the message", m.Body, ok, err)
	}
}
