package sns_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Admiral-Piett/goaws/app/models"
	"github.com/Admiral-Piett/goaws/app/router"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/uuid"
	"github.com/sirupsen/logrus"

	"github.com/webhookd/webhookd/internal/destination/desttest"
)

// The test's AWS account, as goaws names its topics and queues.
const (
	region  = "eu-west-1"
	account = "123456789012"
	// accessKey is the access key the test's server takes; any other is
	// refused as SNS refuses an unknown key (InvalidClientTokenId).
	accessKey = "AKIAWEBHOOKDSNSTEST"
	// deniedKey is a key the server knows but that may not publish: it
	// is refused as SNS refuses a key its policy denies
	// (AuthorizationError).
	deniedKey = "AKIAWEBHOOKDSNSDENY"
	secretKey = "sns-test-secret"
)

// setUpGoAWS configures goaws once per test binary, before any goaws
// code serves a request: its logging turned down (a line per message)
// and the region and account its ARNs name (goaws's are placeholders).
var setUpGoAWS sync.Once

// server is goaws in process on 127.0.0.1: SNS (AWS query protocol) and
// SQS (AWS JSON protocol) on one address. A topic's subscription of an
// SQS queue with raw delivery puts each published message in the queue,
// its message attributes kept (gosns.publishSQS copies the Publish's
// attributes to the queue's message when the subscription is raw), so
// what a subscriber reads is what arrived.
//
// It can be stopped and started again on the same address; goaws's
// topics and queues live in the process meanwhile, as a real topic
// outlives an outage. goaws checks no credentials: the server refuses,
// as SNS does, a request signed with another access key.
type server struct {
	mu  sync.Mutex
	srv *http.Server
	// addr is where it serves, the same after a restart.
	addr string
	// published are the Publish requests it was sent, their form.
	published []url.Values
}

func newServer(t *testing.T) *server {
	t.Helper()
	setUpGoAWS.Do(func() {
		logrus.SetLevel(logrus.WarnLevel)
		models.CurrentEnvironment.Region = region
		models.CurrentEnvironment.AccountID = account
	})
	s := &server{}
	s.start(t, "127.0.0.1:0")
	t.Cleanup(s.stop)
	return s
}

// start serves on addr.
func (s *server) start(t testing.TB, addr string) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	goaws := router.New()
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		switch {
		case strings.Contains(auth, "Credential="+deniedKey+"/"):
			refuse(w, "AuthorizationError", "User is not authorized to perform: SNS:Publish on resource")
			return
		case !strings.Contains(auth, "Credential="+accessKey+"/"):
			refuse(w, "InvalidClientTokenId", "The security token included in the request is invalid.")
			return
		}
		if r.Header.Get("Content-Type") != "application/x-amz-json-1.0" {
			s.notePublish(r)
		}
		goaws.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(l) }()
	s.mu.Lock()
	s.addr, s.srv = l.Addr().String(), srv
	s.mu.Unlock()
}

// refuse answers as SNS does (AWS query protocol) a request it will not
// serve for who signed it.
func refuse(w http.ResponseWriter, code, message string) {
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(http.StatusForbidden)
	_, _ = io.WriteString(w, `<ErrorResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><Error><Type>Sender</Type>`+
		`<Code>`+code+`</Code><Message>`+message+`</Message></Error>`+
		`<RequestId>00000000-0000-0000-0000-000000000000</RequestId></ErrorResponse>`)
}

// notePublish keeps the form of a Publish request (AWS query protocol:
// a form in the body), its body left for goaws to read.
func (s *server) notePublish(r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	form, err := url.ParseQuery(string(body))
	if err != nil || form.Get("Action") != "Publish" {
		return
	}
	s.mu.Lock()
	s.published = append(s.published, form)
	s.mu.Unlock()
}

// publishes are the Publish requests to topicARN so far.
func (s *server) publishes(topicARN string) []url.Values {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []url.Values
	for _, f := range s.published {
		if f.Get("TopicArn") == topicARN {
			out = append(out, f)
		}
	}
	return out
}

// stop closes the listener and every connection.
func (s *server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		_ = s.srv.Close()
		s.srv = nil
	}
}

// down stops the server and returns what starts it again on the same
// address, for desttest's Down.
func (s *server) down(t testing.TB) func() {
	s.stop()
	s.mu.Lock()
	addr := s.addr
	s.mu.Unlock()
	return func() { s.start(t, addr) }
}

func (s *server) endpoint() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return "http://" + s.addr
}

func (s *server) snsClient() *sns.Client {
	return sns.New(sns.Options{Region: region, BaseEndpoint: aws.String(s.endpoint()),
		Credentials: credentials.NewStaticCredentialsProvider(accessKey, secretKey, "")})
}

func (s *server) sqsClient() *sqs.Client {
	return sqs.New(sqs.Options{Region: region, BaseEndpoint: aws.String(s.endpoint()),
		Credentials: credentials.NewStaticCredentialsProvider(accessKey, secretKey, "")})
}

// topic is a topic of the test's own (".fifo" ends a FIFO topic's name)
// with a queue subscribed to it by raw delivery (a FIFO queue for a FIFO
// topic, as SNS requires), which subscriber reads.
func (s *server) topic(t *testing.T, fifo bool) (topicARN string, sub *subscriber) {
	t.Helper()
	ctx := context.Background()
	suffix := ""
	if fifo {
		suffix = ".fifo"
	}
	name := "webhookd-" + uuid.NewString()
	created, err := s.snsClient().CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(name + suffix)})
	if err != nil {
		t.Fatal(err)
	}
	topicARN = aws.ToString(created.TopicArn)
	queue := name + "-queue" + suffix
	if _, err := s.sqsClient().CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(queue)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.snsClient().Subscribe(ctx, &sns.SubscribeInput{TopicArn: aws.String(topicARN), Protocol: aws.String("sqs"),
		Endpoint: aws.String("arn:aws:sqs:" + region + ":" + account + ":" + queue), Attributes: map[string]string{"RawMessageDelivery": "true"}}); err != nil {
		t.Fatal(err)
	}
	return topicARN, &subscriber{srv: s, queueURL: s.endpoint() + "/" + account + "/" + queue}
}

// subscriber reads the queue subscribed to a topic.
type subscriber struct {
	srv      *server
	queueURL string
}

// Receive is desttest's Receive: the queue's next message (deleted once
// read), its message attributes as headers.
func (q *subscriber) Receive(ctx context.Context, t testing.TB) desttest.Arrived {
	t.Helper()
	c := q.srv.sqsClient()
	for {
		res, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.queueURL),
			MaxNumberOfMessages: 1, WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}})
		if ctx.Err() != nil {
			t.Fatalf("no message reached the topic's queue in time")
		}
		if err != nil {
			t.Fatalf("receive from the topic's queue: %v", err)
		}
		if len(res.Messages) == 0 {
			continue
		}
		m := res.Messages[0]
		if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q.queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
		headers := make(map[string]string, len(m.MessageAttributes))
		for name, v := range m.MessageAttributes {
			headers[strings.ToLower(name)] = aws.ToString(v.StringValue)
		}
		return desttest.Arrived{Body: []byte(aws.ToString(m.Body)), Headers: headers}
	}
}
