package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/webhookd/webhookd/receiver"
)

// defaultAMQP is -amqp's default: the RabbitMQ .ci/services.sh starts.
const defaultAMQP = "amqp://guest:guest@127.0.0.1:5672/"

// broker is single's workload to a RabbitMQ destination (issue 27): each
// subscription publishes to an exchange of its own, which the bench binds
// a durable queue to and consumes (automatic acks), verifying each
// message's signature from its headers with package receiver and timing
// its arrival against its publish instant as single's receivers do. The
// exchanges and queues are deleted at the end. The broker's own CPU is in
// cpu_unattributed_s.
func broker(ctx context.Context, l *lab) (*report, error) {
	subs := orDefault(l.cfg.subscriptions, 1)
	q, err := openBrokerQueues(ctx, l.cfg.amqpURL, l.cfg.merchant+"-broker", subs)
	if err != nil {
		return nil, err
	}
	defer q.close(l.logf)
	r, _, _, err := singleShaped(ctx, l, "broker", " to RabbitMQ destinations (an exchange and a durable queue each)", endpointShape{
		fields: func(i int, _ string) map[string]any {
			return map[string]any{"destination": map[string]any{"type": "rabbitmq", "url": l.cfg.amqpURL, "exchange": q.names[i]}}
		},
	}, func(f *fleet) error { return q.consume(f.rcv) })
	return r, err
}

// brokerQueues are the broker scenario's exchanges and queues, exchange i
// and its queue both named names[i], and the bench's consumers of them.
type brokerQueues struct {
	conn  *amqp.Connection
	ch    *amqp.Channel
	names []string
	// consumers ends when each consumer's deliveries are closed.
	consumers sync.WaitGroup
}

// openBrokerQueues connects to the broker at url and declares n fanout
// exchanges named after run, each with a durable queue bound to it, as a
// merchant would set one up (docs/destinations.md).
func openBrokerQueues(ctx context.Context, url, run string, n int) (*brokerQueues, error) {
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(10 * time.Second)})
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	q := &brokerQueues{conn: conn}
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

// consume starts a consumer of each queue, noting each message at the
// endpoint of the same index of rcv.
func (q *brokerQueues) consume(rcv *receivers) error {
	for i, name := range q.names {
		msgs, err := q.ch.Consume(name, "webhookd-bench-"+strconv.Itoa(i), true, true, false, false, nil)
		if err != nil {
			return fmt.Errorf("broker: consume %s: %w", name, err)
		}
		q.consumers.Go(func() {
			for m := range msgs {
				rcv.noteMessage(i, m.Headers, m.Body)
			}
		})
	}
	return nil
}

// close deletes the queues and exchanges and disconnects, logging to logf
// (when set) what could not be deleted.
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

// noteMessage verifies one message taken from the queue of endpoint i,
// its Standard Webhooks headers among the message's headers, and notes its
// arrival as an HTTP delivery's would be.
func (rs *receivers) noteMessage(i int, headers amqp.Table, body []byte) {
	arrived := time.Now()
	attrs := make(map[string]string, len(headers))
	for k, v := range headers {
		switch s := v.(type) {
		case string:
			attrs[k] = s
		case []byte:
			attrs[k] = string(s)
		}
	}
	ep := rs.endpoints[i]
	v := ep.verifier.Load()
	if v == nil || v.VerifyMessage(attrs, body) != nil {
		rs.bad.Add(1)
		return
	}
	rs.note(ep, attrs[receiver.HeaderID], arrived, true)
}
