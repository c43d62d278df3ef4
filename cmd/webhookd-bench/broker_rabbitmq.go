package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// defaultAMQP is -amqp's default: the RabbitMQ .ci/services.sh starts.
const defaultAMQP = "amqp://guest:guest@127.0.0.1:5672/"

// brokerQueues are the broker scenario's RabbitMQ targets: a fanout
// exchange per subscription with a durable queue bound to it, exchange i
// and its queue both named names[i], and the bench's consumers of them
// (automatic acks).
type brokerQueues struct {
	url   string
	conn  *amqp.Connection
	ch    *amqp.Channel
	names []string
	// consumers ends when each consumer's deliveries are closed.
	consumers sync.WaitGroup
}

// openRabbitMQ is the rabbitmq kind's open: the broker at -amqp.
func openRabbitMQ(ctx context.Context, cfg config, run string, n int) (brokerTarget, error) {
	return openBrokerQueues(ctx, cfg.amqpURL, run, n)
}

// openBrokerQueues connects to the broker at url and declares n fanout
// exchanges named after run, each with a durable queue bound to it, as a
// merchant would set one up (docs/destinations.md).
func openBrokerQueues(ctx context.Context, url, run string, n int) (*brokerQueues, error) {
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(10 * time.Second)})
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	q := &brokerQueues{url: url, conn: conn}
	if q.ch, err = conn.Channel(); err != nil {
		_ = conn.Close() // the channel's error is the one to report
		return nil, fmt.Errorf("broker: channel: %w", err)
	}
	for i := range n {
		if ctx.Err() != nil {
			q.close(nil)
			return nil, ctx.Err()
		}
		name := "webhookd-bench." + run + "." + strconv.Itoa(i)
		if err := q.ch.ExchangeDeclare(name, amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
			q.close(nil)
			return nil, fmt.Errorf("broker: declare exchange %s: %w", name, err)
		}
		q.names = append(q.names, name) // declared: close deletes it
		if _, err := q.ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
			q.close(nil)
			return nil, fmt.Errorf("broker: declare queue %s: %w", name, err)
		}
		if err := q.ch.QueueBind(name, "", name, false, nil); err != nil {
			q.close(nil)
			return nil, fmt.Errorf("broker: bind queue %s: %w", name, err)
		}
	}
	return q, nil
}

// destination implements brokerTarget: exchange i at the bench's URL
// (the engine reaches the broker at the same address).
func (q *brokerQueues) destination(i int) map[string]any {
	return map[string]any{"type": "rabbitmq", "url": q.url, "exchange": q.names[i]}
}

// consume implements brokerTarget: a consumer of each queue.
func (q *brokerQueues) consume(rcv *receivers) error {
	for i, name := range q.names {
		msgs, err := q.ch.Consume(name, "webhookd-bench-"+strconv.Itoa(i), true, true, false, false, nil)
		if err != nil {
			return fmt.Errorf("broker: consume %s: %w", name, err)
		}
		q.consumers.Go(func() {
			for m := range msgs {
				rcv.noteMessage(i, tableHeaders(m.Headers), m.Body)
			}
		})
	}
	return nil
}

// close implements brokerTarget: the queues and exchanges deleted.
func (q *brokerQueues) close(logf progress) {
	var errs []error
	for _, name := range q.names {
		if _, err := q.ch.QueueDelete(name, false, false, false); err != nil {
			errs = append(errs, fmt.Errorf("delete queue %s: %w", name, err))
		}
		if err := q.ch.ExchangeDelete(name, false, false); err != nil {
			errs = append(errs, fmt.Errorf("delete exchange %s: %w", name, err))
		}
	}
	_ = q.conn.Close() // closes the channel and ends the consumers
	q.consumers.Wait()
	if err := errors.Join(errs...); err != nil && logf != nil {
		logf("broker clean-up: %v", err)
	}
}

// tableHeaders are a message's string headers, names in lowercase (the
// engine sends them so); values of other types are RabbitMQ's or another
// publisher's and carry no part of the signature.
func tableHeaders(headers amqp.Table) map[string]string {
	out := make(map[string]string, len(headers))
	for k, v := range headers {
		switch s := v.(type) {
		case string:
			out[strings.ToLower(k)] = s
		case []byte:
			out[strings.ToLower(k)] = string(s)
		}
	}
	return out
}
