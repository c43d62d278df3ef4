package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/internal/testfixtures/rabbitmqtest"
)

// brokerFaultSchedule outlasts a broker restart on a loaded machine (a
// RabbitMQ node can take tens of seconds to boot there): about two and a
// half minutes of retries, every five seconds once past the first.
var brokerFaultSchedule = "100ms,250ms,500ms,1s,2s,4s" + strings.Repeat(",5s", 30)

// brokerFaultQueue is the durable queue the subscription's messages go to.
const brokerFaultQueue = "webhookd-fault"

// TestBrokerFault: 2,000 events to a RabbitMQ destination while the
// broker, a node of the test's own, is restarted twice and one of two
// `worker` processes is killed with SIGKILL (a new one started in its
// place). Every event must reach the queue at least once, signed (checked
// with the Standard Webhooks library); every delivery must end succeeded,
// its attempts numbered 1..n with one success last. Duplicates (messages
// of one event more than once) are allowed and counted in the REPORT
// line, with the attempts by error code.
func TestBrokerFault(t *testing.T) {
	storetest.FullLane(t, "a fault test of the real binary and a RabbitMQ node")
	t.Parallel()
	const events = 2000
	// The node boots while the binary builds.
	node := rabbitmqtest.Launch(t)
	f := &faultRun{t: t, seen: map[string]*receipt{}, dbURL: storetest.NewDatabase(t)}
	f.e = newEngineOn(t, f.dbURL, "WEBHOOKD_RETRY_SCHEDULE="+brokerFaultSchedule,
		"WEBHOOKD_DELIVERY_TIMEOUT=2s", "WEBHOOKD_SWEEP_INTERVAL=1s")
	node.WaitReady()
	declareQueue(t, node.URL())
	f.api = f.e.spawn("api", f.e.internal)
	f.worker = f.e.spawn("worker", storetest.FreeAddr(t))
	f.others = append(f.others, f.e.spawn("worker", storetest.FreeAddr(t)))
	f.key = f.e.keysCreate("m_fault")
	status, sub := f.e.call("POST", "http://"+f.e.public+"/v1/webhook_subscriptions", f.key, map[string]any{
		"events":      []string{"*"},
		"destination": map[string]any{"type": "rabbitmq", "url": node.URL(), "exchange": "", "routing_key": brokerFaultQueue},
	})
	if status != http.StatusCreated {
		t.Fatalf("create subscription: %d %v", status, sub)
	}
	secret, _ := sub["secret"].(string)
	f.subs = []*faultSub{{path: "rabbitmq", events: []string{"*"}, secret: secret}}

	db, err := pgx.Connect(context.Background(), f.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	counts := func() (succeeded, pending int) {
		if err := db.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE status = 'succeeded'),
			count(*) FILTER (WHERE status <> 'succeeded') FROM deliveries`).Scan(&succeeded, &pending); err != nil {
			t.Fatal(err)
		}
		return succeeded, pending
	}
	// strike waits until n events are accepted and more deliveries have
	// succeeded than at the last strike, logs where delivery stands, and
	// runs fault.
	lastSucceeded := 0
	var report []string
	strike := func(n int, what string, fault func()) {
		t.Helper()
		waitFor(t, fmt.Sprintf("%d events accepted and deliveries going on before %s", n, what), 2*time.Minute, func() bool {
			s, _ := counts()
			return f.acceptedCount() >= n && s > lastSucceeded
		})
		s, p := counts()
		accepted := f.acceptedCount()
		began := time.Now()
		fault()
		lastSucceeded = s
		report = append(report, fmt.Sprintf("%s at %d accepted, %d delivered, %d pending (took %s)",
			what, accepted, s, p, time.Since(began).Round(time.Millisecond)))
	}

	done := make(chan struct{})
	start := time.Now()
	go f.publishEvents(events, 5*time.Millisecond, nil, done)
	restart := func() {
		node.Stop()
		node.Start()
	}
	strike(events/5, "broker restart 1", restart)
	strike(events/2, "worker SIGKILL", func() {
		killed := f.worker
		killed.kill()
		f.others = append(f.others, killed)
		f.worker = f.e.spawn("worker", storetest.FreeAddr(t))
	})
	strike(events*3/4, "broker restart 2", restart)
	<-done
	f.mu.Lock()
	ids := make([]string, len(f.accepted))
	for i, ev := range f.accepted {
		ids[i] = ev.id
	}
	f.mu.Unlock()
	if len(ids) != events {
		t.Errorf("%d of %d events were accepted; the publisher retries each for a minute", len(ids), events)
	}
	stats := f.checkRecords(ids, len(ids), time.Now().Add(3*time.Minute))
	allDelivered := time.Since(start)

	byID := drainQueue(t, node.URL(), secret)
	messages, duplicates := 0, 0
	for _, id := range ids {
		n := byID[id]
		if n == 0 {
			t.Errorf("event %s never reached the queue; %s", id, f.describe(id))
		}
		messages += n
		duplicates += max(n-1, 0)
	}
	if len(byID) != len(ids) {
		t.Errorf("the queue holds messages of %d events, %d were accepted", len(byID), len(ids))
	}
	f.checkLogs()

	rows, err := db.Query(context.Background(), `SELECT coalesce(error, 'confirmed'), count(*) FROM attempts GROUP BY 1 ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var byCode []string
	for rows.Next() {
		var code string
		var n int
		if err := rows.Scan(&code, &n); err != nil {
			t.Fatal(err)
		}
		byCode = append(byCode, fmt.Sprintf("%s %d", code, n))
	}
	t.Logf("REPORT broker fault: published %d events to a RabbitMQ destination; in the queue %d messages of %d events, duplicates %d (%.2f%%);"+
		" attempts %d (%s); %s; all delivered %s after the first publish",
		len(ids), messages, len(byID), duplicates, 100*float64(duplicates)/float64(max(len(ids), 1)), stats.attempts,
		strings.Join(byCode, ", "), strings.Join(report, "; "), allDelivered.Round(time.Millisecond))
}

// declareQueue declares the durable queue the messages go to: durable, so
// that the messages the broker confirmed outlive its restarts.
func declareQueue(t *testing.T, url string) {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(brokerFaultQueue, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
}

// drainQueue takes every message off the queue and returns how many each
// event (webhook-id) has; a message that fails Standard Webhooks
// verification fails the test.
func drainQueue(t *testing.T, url, secret string) map[string]int {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclarePassive(brokerFaultQueue, true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := ch.Consume(brokerFaultQueue, "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	bad := 0
	for range q.Messages {
		var m amqp.Delivery
		select {
		case m = <-msgs:
		case <-time.After(30 * time.Second):
			t.Fatalf("the queue said %d messages; %d came", q.Messages, len(out))
		}
		h := http.Header{}
		for k, v := range m.Headers {
			h.Set(k, fmt.Sprint(v))
		}
		// The queue is read minutes after the first messages were signed:
		// as a consumer reading late would, the timestamp is not held to
		// the five minutes' tolerance.
		if err := wh.VerifyIgnoringTimestamp(m.Body, h); err != nil {
			bad++
			continue
		}
		out[h.Get("webhook-id")]++
	}
	if bad > 0 {
		t.Errorf("%d messages failed Standard Webhooks verification", bad)
	}
	return out
}
