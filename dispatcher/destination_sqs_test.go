package dispatcher_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Admiral-Piett/goaws/app/models"
	"github.com/Admiral-Piett/goaws/app/router"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"
	"github.com/sirupsen/logrus"

	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
)

// sqsAccessKey is the access key the test's SQS server takes; any other
// is refused as SQS refuses an unknown key.
const sqsAccessKey = "AKIAWEBHOOKDTEST"

// setUpGoAWS configures goaws once per test binary, before any goaws
// code runs: its logging turned down (a line per message), and FIFO
// deduplication on, as SQS has it.
var setUpGoAWS sync.Once

// sqsServer is goaws, an SQS-compatible server speaking the AWS JSON
// protocol, in process on 127.0.0.1. It can be stopped and started again
// on the same address; its queues live on meanwhile, as a real queue's
// messages outlive an outage. goaws checks no credentials: the server
// refuses, as SQS does, a request signed with another access key.
type sqsServer struct {
	addr string
	mu   sync.Mutex
	srv  *http.Server
	// sent are the SendMessage requests it got.
	sent []sqsSend
	// loseAnswers is how many SendMessage answers to lose: the message is
	// taken, then the connection closed before the answer, as when the
	// network fails after SQS stored a message.
	loseAnswers int
}

// sqsSend is what a SendMessage request asked for.
type sqsSend struct {
	QueueURL               string `json:"QueueUrl"`
	MessageGroupID         string `json:"MessageGroupId"`
	MessageDeduplicationID string `json:"MessageDeduplicationId"`
}

func newSQSServer(t *testing.T) *sqsServer {
	t.Helper()
	setUpGoAWS.Do(func() {
		logrus.SetLevel(logrus.WarnLevel)
		models.CurrentEnvironment.EnableDuplicates = true
	})
	s := &sqsServer{}
	s.start(t, "127.0.0.1:0")
	t.Cleanup(s.stop)
	return s
}

// start serves on addr.
func (s *sqsServer) start(t *testing.T, addr string) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	goaws := router.New()
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Authorization"), "Credential="+sqsAccessKey+"/") {
			// What SQS answers (AWS JSON 1.0, query-compatible) for an
			// access key it does not know.
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.Header().Set("x-amzn-query-error", "InvalidClientTokenId;Sender")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"com.amazon.coral.service#UnrecognizedClientException",` +
				`"message":"The security token included in the request is invalid."}`))
			return
		}
		if r.Header.Get("X-Amz-Target") == "AmazonSQS.SendMessage" && s.sendMessage(w, r, goaws) {
			return
		}
		goaws.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(l) }()
	s.mu.Lock()
	s.addr, s.srv = l.Addr().String(), srv
	s.mu.Unlock()
}

// sendMessage notes a SendMessage request and, while answers are to be
// lost, serves it and closes the connection instead of answering; it
// reports whether it did.
func (s *sqsServer) sendMessage(w http.ResponseWriter, r *http.Request, goaws http.Handler) bool {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var sent sqsSend
	_ = json.Unmarshal(body, &sent)
	s.mu.Lock()
	s.sent = append(s.sent, sent)
	lose := s.loseAnswers > 0
	if lose {
		s.loseAnswers--
	}
	s.mu.Unlock()
	if !lose {
		return false
	}
	goaws.ServeHTTP(discard{}, r)
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		_ = conn.Close()
	}
	return true
}

// discard is a ResponseWriter that keeps nothing.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

// sends are the SendMessage requests to queueURL so far.
func (s *sqsServer) sends(queueURL string) []sqsSend {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sqsSend
	for _, m := range s.sent {
		if m.QueueURL == queueURL {
			out = append(out, m)
		}
	}
	return out
}

// stop closes the listener and every connection.
func (s *sqsServer) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		_ = s.srv.Close()
		s.srv = nil
	}
}

func (s *sqsServer) endpoint() string { return "http://" + s.addr }

// client is an SQS client of the server, with the right key.
func (s *sqsServer) client() *sqs.Client {
	return sqs.New(sqs.Options{Region: "eu-west-1", BaseEndpoint: aws.String(s.endpoint()),
		Credentials: credentials.NewStaticCredentialsProvider(sqsAccessKey, "secret", "")})
}

// queue creates a queue of the test's own (name a prefix; ".fifo" ends a
// FIFO queue's) and returns its URL.
func (s *sqsServer) queue(t *testing.T, fifo bool) string {
	t.Helper()
	name := "webhookd-" + uuid.NewString()
	if fifo {
		name += ".fifo"
	}
	if _, err := s.client().CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	return s.endpoint() + "/000000000000/" + name
}

// receive takes up to n messages off the queue (deleting them) within
// timeout.
func (s *sqsServer) receive(t *testing.T, queueURL string, n int, timeout time.Duration) []types.Message {
	t.Helper()
	c := s.client()
	deadline := time.Now().Add(timeout)
	var out []types.Message
	for len(out) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d messages of %d within %v", len(out), n, timeout)
		}
		res, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL),
			MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range res.Messages {
			if _, err := c.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, res.Messages...)
	}
	return out
}

// sqsAttributes are a message's attributes as strings.
func sqsAttributes(m types.Message) map[string]string {
	out := make(map[string]string, len(m.MessageAttributes))
	for k, v := range m.MessageAttributes {
		out[k] = aws.ToString(v.StringValue)
	}
	return out
}

func sqsDestination(s *sqsServer, queueURL, accessKey string) map[string]any {
	return map[string]any{"type": "sqs", "queue_url": queueURL, "region": "eu-west-1",
		"access_key_id": accessKey, "secret_access_key": "secret", "endpoint": s.endpoint()}
}

// TestSQSDestination: a delivery is one message, its attributes verified
// by package receiver; the server stopped for ten seconds fails the
// attempts with broker_unreachable until it is back, and nothing is lost.
func TestSQSDestination(t *testing.T) {
	t.Parallel()
	srv := newSQSServer(t)
	queueURL := srv.queue(t, false)
	e := dispatchertest.New(t)
	e.Cfg.Schedule, e.Cfg.DeliveryTimeout = dispatchertest.SlowSchedule, 2*time.Second
	sub, secret := e.SubscribeTo("m1", sqsDestination(srv, queueURL, sqsAccessKey), "", "payout.paid")
	if sub.Destination.Type() != "sqs" || sub.URL != queueURL {
		t.Fatalf("subscription: destination %v, url %q; want sqs, the queue URL", sub.Destination.Summary, sub.URL)
	}
	d, _ := e.Dispatcher()
	e.Run(d)
	v := dispatchertest.Verifier(t, secret)

	ev := e.Publish(d, "m1", "payout.paid")
	del := e.WaitSettled(e.Deliveries(ev.ID)[0].ID, 20*time.Second)
	if del.Status != store.DeliverySucceeded || len(del.Attempts) != 1 || !strings.HasPrefix(del.Attempts[0].ResponseBody, "confirmed by broker (message id ") {
		t.Fatalf("delivery %s %v %+v; want one confirmed attempt", del.Status, dispatchertest.AttemptErrors(del), del.Attempts)
	}
	msgs := srv.receive(t, queueURL, 1, 10*time.Second)
	if len(msgs) != 1 || aws.ToString(msgs[0].Body) != string(ev.Body) {
		t.Fatalf("%d messages, want the envelope once", len(msgs))
	}
	attrs := sqsAttributes(msgs[0])
	if err := v.VerifyMessage(attrs, []byte(aws.ToString(msgs[0].Body))); err != nil {
		t.Errorf("VerifyMessage: %v (attributes %v)", err, attrs)
	}
	if attrs["webhook-id"] != ev.ID.String() || attrs["content-type"] != "application/json" || !strings.HasPrefix(attrs["user-agent"], "webhookd/") {
		t.Errorf("attributes %v", attrs)
	}

	// The server goes away for ten seconds, then comes back on the same
	// address.
	addr := srv.addr
	srv.stop()
	down := time.Now()
	ev = e.Publish(d, "m1", "payout.paid")
	id := e.Deliveries(ev.ID)[0].ID
	e.WaitFor("ten seconds of failed attempts", 40*time.Second, func() bool {
		return time.Since(down) >= 10*time.Second && len(e.Delivery(id).Attempts) >= 2
	})
	srv.start(t, addr)
	del = e.WaitSettled(id, 30*time.Second)
	dispatchertest.CheckBrokerAttempts(t, del, "broker_unreachable")
	msgs = srv.receive(t, queueURL, 1, 10*time.Second)
	if attrs := sqsAttributes(msgs[0]); attrs["webhook-id"] != ev.ID.String() || v.VerifyMessage(attrs, []byte(aws.ToString(msgs[0].Body))) != nil {
		t.Errorf("message after the outage: %v; want event %s verified", attrs, ev.ID)
	}
}

// TestSQSDestinationFailures: an access key SQS does not know is
// auth_failed and a queue that does not exist broker_refused, each
// retried on the schedule.
func TestSQSDestinationFailures(t *testing.T) {
	t.Parallel()
	srv := newSQSServer(t)
	queueURL := srv.queue(t, false)
	e := dispatchertest.New(t)
	e.Cfg.Schedule, e.Cfg.DeliveryTimeout = dispatchertest.SlowSchedule, 2*time.Second
	e.SubscribeTo("m1", sqsDestination(srv, queueURL, "AKIAUNKNOWN"), "", "payout.paid")
	e.SubscribeTo("m2", sqsDestination(srv, srv.endpoint()+"/000000000000/no-such-queue", sqsAccessKey), "", "payout.paid")
	d, _ := e.Dispatcher()
	e.Run(d)
	for merchant, code := range map[string]string{"m1": "auth_failed", "m2": "broker_refused"} {
		ev := e.Publish(d, merchant, "payout.paid")
		id := e.Deliveries(ev.ID)[0].ID
		e.WaitFor(merchant+" two attempts", 30*time.Second, func() bool { return len(e.Delivery(id).Attempts) >= 2 })
		del := e.Delivery(id)
		for _, a := range del.Attempts {
			if a.Error == nil || *a.Error != code {
				t.Errorf("%s attempt %d: %v %q, want %s", merchant, a.Number, a.Error, a.ResponseBody, code)
			}
		}
		if del.Status != store.DeliveryPending {
			t.Errorf("%s delivery %s, want pending (retried)", merchant, del.Status)
		}
	}
}

// TestSQSDestinationFIFO: an ordered subscription's messages to a FIFO
// queue keep each key's order.
func TestSQSDestinationFIFO(t *testing.T) {
	t.Parallel()
	srv := newSQSServer(t)
	queueURL := srv.queue(t, true)
	e := dispatchertest.New(t)
	e.Cfg.DeliveryTimeout = 2 * time.Second
	_, secret := e.SubscribeTo("m1", sqsDestination(srv, queueURL, sqsAccessKey), "payload.account", "payout.paid")
	d, _ := e.Dispatcher()
	e.Run(d)
	v := dispatchertest.Verifier(t, secret)
	const perKey = 5
	keys := []string{"acct_a", "acct_b"}
	for i := range perKey {
		for _, k := range keys {
			e.PublishPayload(d, "m1", map[string]any{"account": k, "n": i})
		}
	}
	next := map[string]int{}
	for _, m := range srv.receive(t, queueURL, perKey*len(keys), 30*time.Second) {
		attrs := sqsAttributes(m)
		var env struct {
			Payload struct {
				Account string `json:"account"`
				N       int    `json:"n"`
			} `json:"payload"`
		}
		body := []byte(aws.ToString(m.Body))
		if err := errors.Join(json.Unmarshal(body, &env), v.VerifyMessage(attrs, body)); err != nil {
			t.Fatal(err)
		}
		if attrs["webhook-ordering-key"] != env.Payload.Account || env.Payload.N != next[env.Payload.Account] {
			t.Errorf("message key %q n %d; want key %q n %d", attrs["webhook-ordering-key"], env.Payload.N, env.Payload.Account, next[env.Payload.Account])
		}
		next[env.Payload.Account] = env.Payload.N + 1
	}
	for _, m := range srv.sends(queueURL) {
		if !slices.Contains(keys, m.MessageGroupID) || uuid.Validate(m.MessageDeduplicationID) != nil {
			t.Errorf("SendMessage group %q, deduplication id %q; want the ordering key and the delivery id", m.MessageGroupID, m.MessageDeduplicationID)
		}
	}
}

// TestSQSDestinationLostAnswer: SQS took a FIFO message but its answer was
// lost; the retry carries the same deduplication id (the delivery id), so
// the queue holds the message once.
func TestSQSDestinationLostAnswer(t *testing.T) {
	t.Parallel()
	srv := newSQSServer(t)
	queueURL := srv.queue(t, true)
	srv.mu.Lock()
	srv.loseAnswers = 1
	srv.mu.Unlock()
	e := dispatchertest.New(t)
	e.Cfg.Schedule, e.Cfg.DeliveryTimeout = dispatchertest.SlowSchedule, 2*time.Second
	e.SubscribeTo("m1", sqsDestination(srv, queueURL, sqsAccessKey), "", "payout.paid")
	d, _ := e.Dispatcher()
	e.Run(d)
	ev := e.Publish(d, "m1", "payout.paid")
	del := e.WaitSettled(e.Deliveries(ev.ID)[0].ID, 20*time.Second)
	dispatchertest.CheckBrokerAttempts(t, del, "broker_unreachable")
	sends := srv.sends(queueURL)
	if len(sends) != len(del.Attempts) {
		t.Fatalf("%d SendMessage requests for %d attempts", len(sends), len(del.Attempts))
	}
	for _, m := range sends {
		if m.MessageDeduplicationID != del.ID.String() || m.MessageGroupID != del.ID.String() {
			t.Errorf("SendMessage group %q, deduplication id %q; want the delivery id %s for both (unordered)", m.MessageGroupID, m.MessageDeduplicationID, del.ID)
		}
	}
	if msgs := srv.receive(t, queueURL, 1, 10*time.Second); len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	res, err := srv.client().ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), WaitTimeSeconds: 1})
	if err != nil || len(res.Messages) != 0 {
		t.Errorf("a second message (%v): the retry was not deduplicated", err)
	}
}
