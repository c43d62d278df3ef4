package deliver

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/signer"
)

// localRabbitMQ is the RabbitMQ the tests run against (.ci/services.sh).
const localRabbitMQ = "127.0.0.1:5672"

// countingDialer dials for real and counts the dials.
func countingDialer(n *atomic.Int32) brokerDialer {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		n.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, address)
	}
}

// TestRabbitMQDialsTypedParts: a rabbitmq destination is dialled from
// the parts of its url read by allow-list, never from the url's text. A
// value stored by an older build with a library option in its query
// (?cacertfile= made amqp091-go open the file, /dev/zero grew a worker to
// 3 GiB) is refused when the attempt opens it, before any dial, with an
// error that is ErrDestinationInvalid and names neither the path nor the
// password; handed to the client all the same, it is refused before any
// dial too. A url of typed parts publishes to the real broker.
func TestRabbitMQDialsTypedParts(t *testing.T) {
	conn, err := amqp.Dial("amqp://guest:guest@" + localRabbitMQ + "/")
	if err != nil {
		t.Fatalf("no RabbitMQ at %s (bash .ci/services.sh): %v", localRabbitMQ, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	queue := "webhookd-typed-" + uuid.NewString()
	if _, err := ch.QueueDeclare(queue, false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	sealer, err := signer.NewSealer(bytes.Repeat([]byte{3}, 32))
	if err != nil {
		t.Fatal(err)
	}
	var dials atomic.Int32
	ds := newDestinations(SenderConfig{Timeout: 2 * time.Second, MaxConns: 1, MaxConnsPerHost: 1, Version: "test", AllowPrivate: true, AllowHTTP: true},
		nil, sealer, clock.System{})
	ds.dial = countingDialer(&dials)
	t.Cleanup(ds.closeAll)

	for _, option := range []string{"cacertfile=/etc/hostname", "certfile=/etc/hostname&keyfile=/etc/hostname", "keyfile=/dev/zero",
		"auth_mechanism=external", "heartbeat=0", "server_name_indication=/etc/hostname"} {
		t.Run(option, func(t *testing.T) {
			url := "amqps://guest:s3cr3t-pw@" + localRabbitMQ + "/?" + option
			sealed, err := sealer.Seal(`{"type":"rabbitmq","url":"` + url + `","routing_key":"` + queue + `"}`)
			if err != nil {
				t.Fatal(err)
			}
			_, err = ds.client(uuid.New(), sealed, time.Now())
			if !errors.Is(err, subscriptions.ErrDestinationInvalid) {
				t.Fatalf("client = %v, want ErrDestinationInvalid (%s)", err, subscriptions.CodeDestinationInvalid)
			}
			if strings.Contains(err.Error(), "/etc/hostname") || strings.Contains(err.Error(), "/dev/zero") || strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("the attempt's error names what the url held: %v", err)
			}
			// The client itself refuses it too, should it ever be given one.
			r := newRabbitMQ(subscriptions.Destination{Type: "rabbitmq", URL: url, RoutingKey: queue}, countingDialer(&dials), 2*time.Second)
			if _, err := r.publish(context.Background(), message{DeliveryID: "d", Body: []byte("{}")}); !errors.Is(err, subscriptions.ErrDestinationInvalid) {
				t.Errorf("publish = %v, want ErrDestinationInvalid", err)
			}
			if n := dials.Load(); n != 0 {
				t.Errorf("%d dials for a refused destination, want none", n)
			}
		})
	}

	for _, url := range []string{"amqp://guest:guest@" + localRabbitMQ + "/", "amqp://" + localRabbitMQ, "amqp://guest:guest@" + localRabbitMQ + "/%2F"} {
		t.Run(url, func(t *testing.T) {
			r := newRabbitMQ(subscriptions.Destination{Type: "rabbitmq", URL: url, RoutingKey: queue}, countingDialer(&dials), 2*time.Second)
			t.Cleanup(r.close)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			answer, err := r.publish(ctx, message{DeliveryID: "d-" + uuid.NewString(), Body: []byte(`{"url":"` + url + `"}`)})
			if err != nil || answer != confirmedAnswer {
				t.Fatalf("publish = %q, %v", answer, err)
			}
			got, ok, err := ch.Get(queue, true)
			if err != nil || !ok || !strings.Contains(string(got.Body), url) {
				t.Fatalf("the queue holds %q (%v, %v), want the message published", got.Body, ok, err)
			}
		})
	}
}
