package sqs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Admiral-Piett/goaws/app/models"
	"github.com/Admiral-Piett/goaws/app/router"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"
	"github.com/sirupsen/logrus"

	"github.com/webhookd/webhookd/internal/destination/desttest"
)

// accessKey is the access key the test's SQS server takes; any other is
// refused as SQS refuses an unknown key.
const accessKey = "AKIAWEBHOOKDTEST"

// setUpGoAWS configures goaws once per test binary, before any goaws
// code runs: its logging turned down (a line per message), and FIFO
// deduplication on, as SQS has it.
var setUpGoAWS sync.Once

// goaws keeps its queues in process-wide maps without locks: the tests
// that use it do not run in parallel (not t.Parallel), and a test's own
// requests are made one at a time.

// sqsServer is goaws, an SQS-compatible server speaking the AWS JSON
// protocol, in process on 127.0.0.1. It can be stopped and started again
// on the same address; its queues live on meanwhile, as a real queue's
// messages outlive an outage. goaws checks no credentials: the server
// refuses, as SQS does, a request signed with another access key.
type sqsServer struct {
	mu   sync.Mutex
	addr string
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
func (s *sqsServer) start(t testing.TB, addr string) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	goaws := router.New()
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Authorization"), "Credential="+accessKey+"/") {
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

// down stops the server and returns what starts it again on the same
// address, for desttest's Down.
func (s *sqsServer) down(t testing.TB) (up func()) {
	s.mu.Lock()
	addr := s.addr
	s.mu.Unlock()
	s.stop()
	return func() { s.start(t, addr) }
}

func (s *sqsServer) endpoint() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return "http://" + s.addr
}

// client is an SQS client of the server, with the right key.
func (s *sqsServer) client() *awssqs.Client {
	return awssqs.New(awssqs.Options{Region: "eu-west-1", BaseEndpoint: aws.String(s.endpoint()),
		Credentials: credentials.NewStaticCredentialsProvider(accessKey, "secret", "")})
}

// queue creates a queue of the test's own (".fifo" ends a FIFO queue's
// name) and returns its URL.
func (s *sqsServer) queue(t testing.TB, fifo bool) string {
	t.Helper()
	name := "webhookd-" + uuid.NewString()
	if fifo {
		name += ".fifo"
	}
	if _, err := s.client().CreateQueue(context.Background(), &awssqs.CreateQueueInput{QueueName: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	return s.endpoint() + "/000000000000/" + name
}

// receiver is desttest's Receive of queueURL: the next message, deleted
// once read, its attributes as headers and its group as key.
func (s *sqsServer) receiver(queueURL string) func(ctx context.Context, t testing.TB) desttest.Arrived {
	return func(ctx context.Context, t testing.TB) desttest.Arrived {
		t.Helper()
		for {
			m, ok := s.receiveOne(ctx, t, queueURL)
			if ok {
				return arrived(m)
			}
			if ctx.Err() != nil {
				t.Fatalf("no message at %s: %v", queueURL, ctx.Err())
			}
		}
	}
}

// receiveOne is one long poll of a second for one message, deleted once
// read.
func (s *sqsServer) receiveOne(ctx context.Context, t testing.TB, queueURL string) (types.Message, bool) {
	t.Helper()
	c := s.client()
	res, err := c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 1,
		WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameMessageGroupId}})
	if err != nil {
		if ctx.Err() != nil {
			return types.Message{}, false
		}
		t.Fatal(err)
	}
	if len(res.Messages) == 0 {
		return types.Message{}, false
	}
	m := res.Messages[0]
	if _, err := c.DeleteMessage(context.Background(), &awssqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	return m, true
}

// arrived is m as a consumer reads it.
func arrived(m types.Message) desttest.Arrived {
	headers := make(map[string]string, len(m.MessageAttributes))
	for k, v := range m.MessageAttributes {
		headers[k] = aws.ToString(v.StringValue)
	}
	return desttest.Arrived{Body: []byte(aws.ToString(m.Body)), Headers: headers,
		Key: m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]}
}
